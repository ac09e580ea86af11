/**
 * The Speak view's recent results, kept in IndexedDB so they survive a reload (audio included, as blobs).
 * Bounded: the oldest entries go beyond HISTORY_LIMIT.
 */
export interface SpeechResult {
  id: number;
  text: string;
  model: string;
  voice: string;
  format: string;
  /** Seconds of audio, when the browser could decode it. */
  duration: number | null;
  createdAt: number;
  audio: Blob;
}

export const HISTORY_LIMIT = 12;
const DATABASE = 'voxd-ui';
const STORE = 'speech-history';

function open(): Promise<IDBDatabase> {
  return new Promise((resolve, reject) => {
    const request = indexedDB.open(DATABASE, 1);
    request.onupgradeneeded = () => request.result.createObjectStore(STORE, { keyPath: 'id', autoIncrement: true });
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });
}

function done<T>(request: IDBRequest<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });
}

/** Newest first. */
export async function loadHistory(): Promise<SpeechResult[]> {
  const db = await open();
  try {
    const all = await done(db.transaction(STORE).objectStore(STORE).getAll() as IDBRequest<SpeechResult[]>);
    return all.reverse();
  } finally {
    db.close();
  }
}

/** Stores a result and drops the oldest beyond the limit; resolves with the history, newest first. */
export async function addToHistory(result: Omit<SpeechResult, 'id'>): Promise<SpeechResult[]> {
  const db = await open();
  try {
    const store = db.transaction(STORE, 'readwrite').objectStore(STORE);
    await done(store.add(result));
    const keys = (await done(store.getAllKeys())) as number[];
    for (const key of keys.slice(0, Math.max(0, keys.length - HISTORY_LIMIT))) await done(store.delete(key));
  } finally {
    db.close();
  }
  return loadHistory();
}

export async function removeFromHistory(id: number): Promise<SpeechResult[]> {
  const db = await open();
  try {
    await done(db.transaction(STORE, 'readwrite').objectStore(STORE).delete(id));
  } finally {
    db.close();
  }
  return loadHistory();
}
