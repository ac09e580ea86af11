/**
 * Fetching a model with its progress (docs/ui.md): POST /v1/models asking for server-sent events, read as they come,
 * a progress bar with size and time left, and Cancel (DELETE /v1/models, which stops the download on the server; the
 * next fetch resumes it). The Models view and the model menus of Transcribe, Speak and Live share it.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { apiFetch, ApiFailure, type ModelInfo } from './api';
import { ErrorNote, formatBytes } from './components';

export interface FetchProgress {
  state: 'downloading' | 'loading';
  bytes?: number;
  total?: number;
  /** Seconds left; null while there is no rate yet. */
  eta?: number | null;
}

interface LoadEvent extends Partial<FetchProgress> {
  type?: 'model.progress' | 'model.loaded';
  model?: ModelInfo;
  error?: { message?: string; code?: string; param?: string | null };
}

/** Loads a model (downloading it first when it must), reporting each progress event; resolves with the model loaded. */
export async function fetchModel(id: string, onProgress: (progress: FetchProgress) => void, signal?: AbortSignal): Promise<ModelInfo> {
  const response = await apiFetch(`/v1/models?model_name=${encodeURIComponent(id)}`, {
    method: 'POST',
    headers: { accept: 'text/event-stream' },
    ...(signal ? { signal } : {}),
  });
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffered += value;
    const frames = buffered.split('\n\n');
    buffered = frames.pop() ?? '';
    for (const frame of frames) {
      if (!frame.startsWith('data: ')) continue;
      const event = JSON.parse(frame.slice('data: '.length)) as LoadEvent;
      if (event.error)
        throw new ApiFailure(event.error.message ?? 'the load failed', event.error.code ?? 'server_error', response.status, event.error.param ?? null);
      if (event.type === 'model.loaded' && event.model) return event.model;
      if (event.type === 'model.progress' && event.state) onProgress(event as FetchProgress);
    }
  }
  throw new ApiFailure(`the server ended the load of ${id} without an answer`, 'server_error', response.status);
}

/** Stops a download under way on the server (the partial file stays for the next fetch). */
export function cancelFetch(id: string): Promise<Response> {
  return apiFetch(`/v1/models?model_name=${encodeURIComponent(id)}`, { method: 'DELETE' });
}

function formatEta(seconds: number): string {
  if (seconds < 60) return `${seconds} s left`;
  const minutes = Math.round(seconds / 60);
  return minutes < 60 ? `${minutes} min left` : `${Math.floor(minutes / 60)} h ${minutes % 60} min left`;
}

/** What a progress bar says in words: "123 MB of 669 MB · 1 min left", or "Loading…". */
export function progressText(progress: FetchProgress): string {
  if (progress.state === 'loading') return 'Downloaded; loading…';
  const { bytes = 0, total = 0, eta = null } = progress;
  if (total === 0) return 'Starting the download…';
  return `${formatBytes(bytes)} of ${formatBytes(total)}${eta === null ? '' : ` · ${formatEta(eta)}`}`;
}

/** A labelled progress bar for a model's fetch; indeterminate until the size is known, and while the engine loads. */
export function FetchProgressBar({ progress, label }: { progress: FetchProgress; label: string }) {
  const known = progress.state === 'downloading' && (progress.total ?? 0) > 0;
  return (
    <div class="fetch-progress">
      <progress aria-label={label} max={known ? progress.total : undefined} value={known ? progress.bytes : undefined} />
      <span class="hint">{progressText(progress)}</span>
    </div>
  );
}

/**
 * Under a model menu: a catalog model not yet downloaded says its size and offers to fetch it, with the bar and
 * Cancel while it downloads; `onFetched` when it is loaded (the menu's list then says so).
 */
export function CatalogFetch({ model, onFetched }: { model: ModelInfo | undefined; onFetched: () => void }) {
  const [progress, setProgress] = useState<FetchProgress | null>(null);
  const [error, setError] = useState<unknown>(null);
  // another model chosen unmounts this one (its `key`): the download goes on on the server, unreported here
  const mounted = useRef(true);
  useEffect(
    () => () => {
      mounted.current = false;
    },
    [],
  );
  if (!model || model.cached !== false || model.loaded) return null;

  const id = model.id;
  async function start(): Promise<void> {
    setError(null);
    setProgress({ state: 'downloading' });
    try {
      await fetchModel(id, (p) => mounted.current && setProgress(p));
      onFetched();
    } catch (failure) {
      if (mounted.current) setError(failure);
    } finally {
      if (mounted.current) setProgress(null);
    }
  }

  return (
    <div class="catalog-fetch">
      {progress ? (
        <div class="row tight">
          <FetchProgressBar progress={progress} label={`Fetching ${id}`} />
          <button type="button" class="secondary small" onClick={() => void cancelFetch(id).catch(setError)}>
            Cancel
          </button>
        </div>
      ) : (
        <div class="row tight">
          <span class="hint">
            Not downloaded yet: {formatBytes(model.size_bytes ?? 0)}
            {model.memory_bytes ? `, about ${formatBytes(model.memory_bytes)} of memory` : ''}.
          </span>
          <button type="button" class="secondary small" onClick={() => void start()}>
            Download
          </button>
        </div>
      )}
      <ErrorNote error={error} />
    </div>
  );
}
