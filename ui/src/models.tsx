/** Models: what the server can load and what it holds, load and unload (POST/DELETE /v1/models). */
import { useEffect, useState } from 'preact/hooks';
import { apiFetch, type ModelInfo } from './api';
import { ErrorNote, formatBytes, Status } from './components';
import { taskOf, type ModelList } from './model-list';

const TASK_NAMES: Record<string, string> = { stt: 'speech to text', tts: 'text to speech', vad: 'voice activity', separation: 'separation' };

/** Seconds since `since`, ticking while `since` is set (a load may download gigabytes first). */
function useElapsed(since: number | null): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    if (since === null) return;
    const timer = setInterval(() => setNow(Date.now()), 500);
    return () => clearInterval(timer);
  }, [since]);
  return since === null ? 0 : Math.max(0, Math.round((now - since) / 1000));
}

/** `apiDown`: the page's banner already says the server cannot be reached; nothing here can act meanwhile. */
export function ModelsView({ list, apiDown }: { list: ModelList; apiDown: boolean }) {
  const [pending, setPending] = useState<{ id: string; action: 'load' | 'unload'; since: number } | null>(null);
  const [rowError, setRowError] = useState<{ id: string; error: unknown } | null>(null);
  const [newId, setNewId] = useState('');
  const [formError, setFormError] = useState<unknown>(null);
  const [done, setDone] = useState('');
  const elapsed = useElapsed(pending?.since ?? null);

  async function act(id: string, action: 'load' | 'unload', fromForm = false): Promise<void> {
    setPending({ id, action, since: Date.now() });
    setRowError(null);
    setFormError(null);
    setDone('');
    try {
      await apiFetch(`/v1/models?model_name=${encodeURIComponent(id)}`, { method: action === 'load' ? 'POST' : 'DELETE' });
      setDone(`${action === 'load' ? 'Loaded' : 'Unloaded'} ${id}.`);
      if (fromForm) setNewId('');
    } catch (failure) {
      if (fromForm) setFormError(failure);
      else setRowError({ id, error: failure });
    } finally {
      setPending(null);
      await list.refresh();
    }
  }

  const busy = pending !== null || apiDown;
  // by ID, so a row stays where it was when its model is loaded or unloaded
  const rows = list.models.filter((model) => !model.target).sort((a, b) => a.id.localeCompare(b.id));
  const aliases = list.models.filter((model) => model.target);

  return (
    <section aria-labelledby="models-title" class="view">
      <h2 id="models-title">Models</h2>
      <form
        class="card"
        onSubmit={(event) => {
          event.preventDefault();
          if (newId.trim()) void act(newId.trim(), 'load', true);
        }}
      >
        <div class="row">
          <div class="field grow">
            <label for="model-id">Load a model by ID</label>
            <input
              id="model-id"
              type="text"
              value={newId}
              onInput={(e) => setNewId(e.currentTarget.value)}
              placeholder="owner/repo, owner/repo/file.bin, owner/repo:Q8_0 or a local path"
              aria-describedby="model-id-hint"
            />
            <span id="model-id-hint" class="hint">
              Hub models are downloaded first, then loaded; this can take minutes for large ones.
            </span>
          </div>
        </div>
        <div class="actions">
          <button type="submit" disabled={busy || !newId.trim()}>
            {pending && pending.id === newId.trim() ? `Loading… ${elapsed} s` : 'Load'}
          </button>
        </div>
        <ErrorNote error={formError} id="model-form-error" />
      </form>
      <div class="card">
        <div class="card-head">
          <h3>Available and loaded</h3>
          {/* in the heading's line: an empty status takes no line of its own */}
          <Status>{pending ? `${pending.action === 'load' ? 'Loading' : 'Unloading'} ${pending.id}… ${elapsed} s` : done}</Status>
          <button type="button" class="secondary small" onClick={() => void list.refresh()}>
            Refresh
          </button>
        </div>
        <ErrorNote error={apiDown ? null : list.error} />
        <div class="table-wrap">
          <table class="models">
            <thead>
              <tr>
                <th scope="col">Model</th>
                <th scope="col">Task</th>
                <th scope="col">Engine</th>
                <th scope="col">Size</th>
                <th scope="col">State</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {rows.map((model) => (
                <ModelRow
                  key={model.id}
                  model={model}
                  task={taskOf(model, list.models)}
                  pending={pending?.id === model.id ? pending.action : null}
                  disabled={busy}
                  error={rowError?.id === model.id ? rowError.error : null}
                  onAction={(action) => act(model.id, action)}
                />
              ))}
            </tbody>
          </table>
        </div>
        {aliases.length > 0 && (
          <p class="hint">
            Vendor names:{' '}
            {aliases.map((alias, index) => (
              <span key={alias.id}>
                {index > 0 && ', '}
                <code>{alias.id}</code> → <code>{alias.target}</code>
              </span>
            ))}
            .
          </p>
        )}
      </div>
    </section>
  );
}

function ModelRow({
  model,
  task,
  pending,
  disabled,
  error,
  onAction,
}: {
  model: ModelInfo;
  task: string | undefined;
  pending: 'load' | 'unload' | null;
  disabled: boolean;
  error: unknown;
  onAction: (action: 'load' | 'unload') => void;
}) {
  const action = model.loaded ? 'unload' : 'load';
  return (
    <>
      <tr data-model={model.id}>
        <th scope="row" class="model-id">
          {model.id}
        </th>
        <td class="model-task">{task ? (TASK_NAMES[task] ?? task) : '—'}</td>
        <td class="model-engine">{model.engine ?? '—'}</td>
        <td class={model.size_bytes === undefined ? 'model-size none' : 'model-size'}>
          {model.size_bytes === undefined ? '—' : formatBytes(model.size_bytes)}
        </td>
        <td class="model-state">
          <span class={`badge ${model.loaded ? 'on' : ''}`}>
            {pending === 'load' ? 'loading…' : pending === 'unload' ? 'unloading…' : model.loaded ? 'loaded' : 'not loaded'}
          </span>
        </td>
        <td class="row-actions">
          <button
            type="button"
            class="secondary small"
            disabled={disabled}
            onClick={() => onAction(action)}
            aria-label={`${action === 'load' ? 'Load' : 'Unload'} ${model.id}`}
          >
            {action === 'load' ? 'Load' : 'Unload'}
          </button>
        </td>
      </tr>
      {error != null && (
        <tr class="row-error">
          <td colSpan={6}>
            <ErrorNote error={error} />
          </td>
        </tr>
      )}
    </>
  );
}
