/** The server's models, merged from `GET /v1/models?available=true` (what can be loaded) and `GET /v1/models` (what is). */
import { useCallback, useEffect, useState } from 'preact/hooks';
import { apiJson, type ModelInfo } from './api';

export type Task = NonNullable<ModelInfo['task']>;

export interface ModelList {
  models: ModelInfo[];
  /** Null until the first answer. */
  error: unknown;
  loaded: boolean;
  refresh: () => Promise<void>;
}

const REFRESH_MS = 5000;
/** Sent on window when something on the page changed the server's models (a model fetched from a menu). */
const MODELS_CHANGED = 'voxd:models-changed';

/** Has every model list on the page asked again. */
export function announceModelsChanged(): void {
  window.dispatchEvent(new Event(MODELS_CHANGED));
}

export function useModelList(): ModelList {
  const [models, setModels] = useState<ModelInfo[]>([]);
  const [error, setError] = useState<unknown>(null);
  const [loaded, setLoaded] = useState(false);

  const refresh = useCallback(async () => {
    try {
      const [available, resident] = await Promise.all([
        apiJson<{ data: ModelInfo[] }>('/v1/models?available=true'),
        apiJson<{ data: ModelInfo[] }>('/v1/models'),
      ]);
      const byId = new Map(available.data.map((model) => [model.id, model]));
      for (const model of resident.data) byId.set(model.id, { ...byId.get(model.id), ...model });
      setModels([...byId.values()]);
      setError(null);
    } catch (failure) {
      setError(failure);
    } finally {
      setLoaded(true);
    }
  }, []);

  useEffect(() => {
    void refresh();
    const timer = setInterval(() => document.visibilityState === 'visible' && void refresh(), REFRESH_MS);
    const changed = (): void => void refresh();
    window.addEventListener(MODELS_CHANGED, changed);
    return () => {
      clearInterval(timer);
      window.removeEventListener(MODELS_CHANGED, changed);
    };
  }, [refresh]);

  return { models, error, loaded, refresh };
}

/** The task of a model, an alias taking its target's. */
export function taskOf(model: ModelInfo, models: readonly ModelInfo[]): Task | undefined {
  return model.task ?? resolvedModel(model.id, models)?.task;
}

/** Model IDs for a task, models before aliases (in the server's order). */
export function modelsFor(task: Task, models: readonly ModelInfo[]): ModelInfo[] {
  const matching = models.filter((model) => taskOf(model, models) === task);
  return [...matching.filter((model) => !model.target), ...matching.filter((model) => model.target)];
}

/** A model's entry, an alias resolved to its target's (the loaded model it stands for, when loaded). */
export function resolvedModel(id: string, models: readonly ModelInfo[]): ModelInfo | undefined {
  const model = models.find((m) => m.id === id);
  return model?.target ? (models.find((m) => m.id === model.target) ?? model) : model;
}
