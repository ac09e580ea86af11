/**
 * Models: the catalog of recommended models, what the server can load and what it holds; load (with the download's
 * progress and Cancel) and unload (POST/DELETE /v1/models).
 */
import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { apiFetch, isCatalogModel, type ModelInfo } from './api';
import { ErrorNote, formatBytes, Status } from './components';
import { cancelFetch, fetchModel, FetchProgressBar, type FetchProgress } from './model-fetch';
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
  const [progress, setProgress] = useState<FetchProgress | null>(null);
  const elapsed = useElapsed(pending?.since ?? null);

  async function act(id: string, action: 'load' | 'unload', fromForm = false): Promise<void> {
    setPending({ id, action, since: Date.now() });
    setProgress(null);
    setRowError(null);
    setFormError(null);
    setDone('');
    try {
      if (action === 'load') await fetchModel(id, setProgress);
      else await apiFetch(`/v1/models?model_name=${encodeURIComponent(id)}`, { method: 'DELETE' });
      setDone(`${action === 'load' ? 'Loaded' : 'Unloaded'} ${id}.`);
      if (fromForm) setNewId('');
    } catch (failure) {
      if (fromForm) setFormError(failure);
      else setRowError({ id, error: failure });
    } finally {
      setPending(null);
      setProgress(null);
      await list.refresh();
    }
  }

  /** What a row shows of a load under way (its progress, Cancel), or null. */
  const rowLoad = (id: string): RowLoad | null =>
    pending?.id === id && pending.action === 'load'
      ? { progress, cancel: () => void cancelFetch(id).catch((failure) => setRowError({ id, error: failure })) }
      : null;

  const busy = pending !== null || apiDown;
  const catalog = list.models.filter(isCatalogModel);
  // by ID, so a row stays where it was when its model is loaded or unloaded
  const rows = list.models.filter((model) => !model.target).sort((a, b) => a.id.localeCompare(b.id));
  const aliases = list.models.filter((model) => model.target && !isCatalogModel(model));

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
              placeholder="a catalog name, owner/repo, owner/repo/file.bin, owner/repo:Q8_0 or a local path"
              aria-describedby="model-id-hint"
            />
            <span id="model-id-hint" class="hint">
              Hub models are downloaded first (with their progress below), then loaded.
            </span>
          </div>
        </div>
        <div class="actions">
          <button type="submit" disabled={busy || !newId.trim()}>
            {pending && pending.id === newId.trim() ? `Loading… ${elapsed} s` : 'Load'}
          </button>
          {pending && pending.id === newId.trim() && progress && (
            <>
              <FetchProgressBar progress={progress} label={`Fetching ${pending.id}`} />
              <button type="button" class="secondary small" onClick={() => void cancelFetch(pending.id).catch(setFormError)}>
                Cancel
              </button>
            </>
          )}
        </div>
        <ErrorNote error={formError} id="model-form-error" />
      </form>
      {catalog.length > 0 && (
        <div class="card">
          <div class="card-head">
            <h3>Catalog</h3>
          </div>
          <p class="hint">
            Recommended models by short name (also <code>voxd pull &lt;name&gt;</code> on the server); each is downloaded once into the hub cache.
          </p>
          <ModelTable columns={['Model', 'Task', 'Download', 'Memory', 'State']}>
            {catalog.map((model) => (
              <CatalogRow
                key={model.id}
                model={model}
                loaded={list.models.some((m) => m.id === model.target && m.loaded)}
                load={rowLoad(model.id)}
                disabled={busy}
                error={rowError?.id === model.id ? rowError.error : null}
                onLoad={() => act(model.id, 'load')}
              />
            ))}
          </ModelTable>
        </div>
      )}
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
        <ModelTable columns={['Model', 'Task', 'Engine', 'Size', 'State']}>
          {rows.map((model) => (
            <ModelRow
              key={model.id}
              model={model}
              task={taskOf(model, list.models)}
              load={rowLoad(model.id)}
              pending={pending?.id === model.id ? pending.action : null}
              disabled={busy}
              error={rowError?.id === model.id ? rowError.error : null}
              onAction={(action) => act(model.id, action)}
            />
          ))}
        </ModelTable>
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

/** A table of models: a header of `columns` and an unnamed one for the row's action, then the rows. */
function ModelTable({ columns, children }: { columns: string[]; children: ComponentChildren }) {
  return (
    <div class="table-wrap">
      <table class="models">
        <thead>
          <tr>
            {columns.map((column) => (
              <th key={column} scope="col">
                {column}
              </th>
            ))}
            <th scope="col">
              <span class="visually-hidden">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody>{children}</tbody>
      </table>
    </div>
  );
}

/** A load under way in a row: its progress (null until the first event) and how to cancel it. */
interface RowLoad {
  progress: FetchProgress | null;
  cancel: () => void;
}

/**
 * The state cell of a row: a progress bar while a load runs (this page's, or one the list reports: a request, a
 * `voxd pull`), else a badge.
 */
function StateCell({ model, load, label, on, text }: { model: ModelInfo; load: RowLoad | null; label: string; on: boolean; text: string }) {
  const listed: FetchProgress | null = model.state === 'downloading' ? { state: 'downloading', bytes: model.bytes, total: model.total, eta: model.eta } : null;
  const progress = load?.progress ?? listed;
  return (
    <td class="model-state">{progress ? <FetchProgressBar progress={progress} label={label} /> : <span class={`badge ${on ? 'on' : ''}`}>{text}</span>}</td>
  );
}

/** The action cell of a row: Cancel while its load runs, else its action (`verb`, named with the model for assistive technology). */
function ActionCell({ id, load, verb, disabled, onClick }: { id: string; load: RowLoad | null; verb: string; disabled: boolean; onClick: () => void }) {
  return (
    <td class="row-actions">
      {load ? (
        <button type="button" class="secondary small" onClick={load.cancel} aria-label={`Cancel the download of ${id}`}>
          Cancel
        </button>
      ) : (
        <button type="button" class="secondary small" disabled={disabled} onClick={onClick} aria-label={`${verb} ${id}`}>
          {verb}
        </button>
      )}
    </td>
  );
}

/** A row's error, under it across the table. */
function RowError({ error, columns }: { error: unknown; columns: number }) {
  if (error == null) return null;
  return (
    <tr class="row-error">
      <td colSpan={columns}>
        <ErrorNote error={error} />
      </td>
    </tr>
  );
}

function CatalogRow({
  model,
  loaded,
  load,
  disabled,
  error,
  onLoad,
}: {
  model: ModelInfo;
  loaded: boolean;
  load: RowLoad | null;
  disabled: boolean;
  error: unknown;
  onLoad: () => void;
}) {
  const state = loaded ? 'loaded' : model.cached ? 'downloaded' : 'not downloaded';
  return (
    <>
      <tr data-model={model.id}>
        <th scope="row" class="model-id">
          {model.id}
          <span class="hint catalog-note">
            {model.description} {model.languages}. {model.license}.
          </span>
        </th>
        <td class="model-task">{model.task ? (TASK_NAMES[model.task] ?? model.task) : '—'}</td>
        <td class="model-size">{formatBytes(model.size_bytes ?? 0)}</td>
        <td class="model-size">{model.memory_bytes ? formatBytes(model.memory_bytes) : '—'}</td>
        <StateCell model={model} load={load} label={`Fetching ${model.id}`} on={loaded} text={load ? 'starting…' : state} />
        <ActionCell id={model.id} load={load} verb={model.cached ? 'Load' : 'Download'} disabled={disabled || loaded} onClick={onLoad} />
      </tr>
      <RowError error={error} columns={6} />
    </>
  );
}

function ModelRow({
  model,
  task,
  load,
  pending,
  disabled,
  error,
  onAction,
}: {
  model: ModelInfo;
  task: string | undefined;
  load: RowLoad | null;
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
        <StateCell
          model={model}
          load={load}
          label={`Fetching ${model.id}`}
          on={model.loaded}
          text={
            pending === 'load'
              ? 'loading…'
              : pending === 'unload'
                ? 'unloading…'
                : model.loaded
                  ? 'loaded'
                  : model.state === 'downloading'
                    ? 'downloading…'
                    : 'not loaded'
          }
        />
        <ActionCell id={model.id} load={load} verb={action === 'load' ? 'Load' : 'Unload'} disabled={disabled} onClick={() => onAction(action)} />
      </tr>
      <RowError error={error} columns={6} />
    </>
  );
}
