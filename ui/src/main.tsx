/** The voxd web interface (docs/ui.md): one page, five views chosen by the URL's hash, talking to the API only. */
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import './styles.css';
import { apiBase, apiJson, describeError } from './api';
import { LiveView } from './live';
import { useModelList } from './model-list';
import { ModelsView } from './models';
import { SeparateView } from './separate';
import { SpeakView } from './speak';
import { TranscribeView } from './transcribe';

const VIEWS = [
  { id: 'speak', name: 'Speak' },
  { id: 'transcribe', name: 'Transcribe' },
  { id: 'live', name: 'Live' },
  { id: 'separate', name: 'Separate' },
  { id: 'models', name: 'Models' },
] as const;
type ViewId = (typeof VIEWS)[number]['id'];

function viewFromHash(): ViewId {
  const wanted = location.hash.slice(1);
  return VIEWS.find((view) => view.id === wanted)?.id ?? 'speak';
}

type Health = { state: 'checking' } | { state: 'ready' } | { state: 'starting'; reason: string } | { state: 'down'; reason: string };

/** /healthz and /readyz, asked every few seconds. */
function useHealth(): Health {
  const [health, setHealth] = useState<Health>({ state: 'checking' });
  useEffect(() => {
    const check = async (): Promise<void> => {
      try {
        await apiJson('/healthz');
      } catch (error) {
        return setHealth({ state: 'down', reason: describeError(error) });
      }
      try {
        await apiJson('/readyz');
        setHealth({ state: 'ready' });
      } catch (error) {
        setHealth({ state: 'starting', reason: describeError(error) });
      }
    };
    void check();
    const timer = setInterval(check, 5000);
    return () => clearInterval(timer);
  }, []);
  return health;
}

function App() {
  const [view, setView] = useState<ViewId>(viewFromHash);
  const health = useHealth();
  const models = useModelList();
  const [liveRunning, setLiveRunning] = useState(false);

  // the list's own refresh runs on its own timer: once the server is back, ask at once rather than show a stale failure
  const { refresh } = models;
  useEffect(() => {
    if (health.state === 'ready') void refresh();
  }, [health.state, refresh]);

  useEffect(() => {
    const follow = (): void => setView(viewFromHash());
    window.addEventListener('hashchange', follow);
    return () => window.removeEventListener('hashchange', follow);
  }, []);

  useEffect(() => {
    document.title = `${VIEWS.find((entry) => entry.id === view)!.name} · voxd`;
  }, [view]);

  const healthLabel = { checking: 'checking…', ready: 'ready', starting: 'starting', down: 'unreachable' }[health.state];

  return (
    <>
      <header class="top">
        <div class="brand">
          <svg viewBox="0 0 16 16" aria-hidden="true" class="logo">
            <rect width="16" height="16" rx="3" />
            <path d="M3 8h1M5 5v6M7 3v10M9 6v4M11 4v8M13 7v2" />
          </svg>
          <h1>voxd</h1>
        </div>
        <p class="server" title={apiBase}>
          <span class={`dot ${health.state}`} aria-hidden="true" />
          <span>
            API <code>{apiBase.replace(/^https?:\/\//, '')}</code> <span class="visually-hidden">is</span> {healthLabel}
          </span>
        </p>
      </header>
      <nav class="tabs" aria-label="Views">
        {VIEWS.map((entry) => (
          <a key={entry.id} href={`#${entry.id}`} class="tab" aria-current={view === entry.id ? 'page' : undefined}>
            {entry.name}
            {entry.id === 'live' && liveRunning && (
              <span class="tab-running" title="Live transcription is running">
                <span class="visually-hidden">(running)</span>
              </span>
            )}
          </a>
        ))}
      </nav>
      <main>
        {health.state === 'down' && (
          <p class="banner error" role="alert">
            {health.reason}
          </p>
        )}
        {health.state === 'starting' && (
          <p class="banner" role="status">
            The server is up but not ready yet: {health.reason}
          </p>
        )}
        {/* every view stays mounted, so what it holds (text, files, results, a live session) outlives a tab switch */}
        <div id="view-speak" hidden={view !== 'speak'}>
          <SpeakView models={models.models} apiOnline={health.state === 'ready' || health.state === 'checking'} />
        </div>
        <div id="view-transcribe" hidden={view !== 'transcribe'}>
          <TranscribeView models={models.models} />
        </div>
        <div id="view-live" hidden={view !== 'live'}>
          <LiveView models={models.models} onRunningChange={setLiveRunning} />
        </div>
        <div id="view-separate" hidden={view !== 'separate'}>
          <SeparateView models={models.models} />
        </div>
        <div id="view-models" hidden={view !== 'models'}>
          <ModelsView list={models} apiDown={health.state === 'down'} />
        </div>
      </main>
    </>
  );
}

render(<App />, document.getElementById('app')!);
