/**
 * Kokoro's text frontend, espeak-ng, in a child process of its own (phonemizer-child.ts). espeak-ng 1.51 has crash
 * bugs (it reads freed memory when a word switches to another language's rules); the phonemizer keeps text away
 * from the triggers known, and this keeps an unknown one from taking the server down: a request whose text ends the
 * child gets a 400 saying so, and the next request starts a new child. One child serves every Kokoro model of the
 * process (espeak-ng is one per process anyway); it holds the addon and espeak-ng's data, about 50 MB.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { ApiError } from '../errors.js';
import type { NativeKokoroPiece } from '../native/addon.js';

export interface PhonemizerRequest {
  id: number;
  text: string;
  langCode: string;
  dataDir: string;
}

export type PhonemizerReply = { id: number; pieces: NativeKokoroPiece[] } | { id: number; error: { message: string; code: string } };

/** A native rejection as the addon's own are: an Error with a string `code`. */
function nativeError(error: { message: string; code: string }): Error {
  return Object.assign(new Error(error.message), { code: error.code });
}

/** Whether the child (and its message channel) keeps this process's event loop alive: while an answer is awaited. */
function keepAlive(child: ChildProcess, alive: boolean): void {
  if (alive) {
    child.ref();
    child.channel?.ref();
  } else {
    child.unref();
    child.channel?.unref();
  }
}

class PhonemizerProcess {
  private child: ChildProcess | null = null;
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (pieces: NativeKokoroPiece[]) => void; reject: (error: unknown) => void }>();

  /** Kokoro's phoneme pieces of `text` (the addon's kokoroPhonemes, run in the child). */
  phonemes(text: string, langCode: string, dataDir: string): Promise<NativeKokoroPiece[]> {
    const child = this.started();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      child.send({ id, text, langCode, dataDir } satisfies PhonemizerRequest);
      keepAlive(child, true);
    });
  }

  /** The child's process id, while one runs (for tests). */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  private started(): ChildProcess {
    if (this.child) return this.child;
    const child = fork(fileURLToPath(new URL('./phonemizer-child.js', import.meta.url)), [], {
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
      serialization: 'json',
    });
    child.on('message', (reply: PhonemizerReply) => {
      const waiting = this.pending.get(reply.id);
      if (!waiting) return;
      this.pending.delete(reply.id);
      if (this.pending.size === 0) keepAlive(child, false);
      if ('pieces' in reply) waiting.resolve(reply.pieces);
      else waiting.reject(nativeError(reply.error));
    });
    child.on('exit', (code, signal) => {
      if (this.child === child) this.child = null;
      const failure = new ApiError(
        'invalid_request',
        `the text could not be read: Kokoro's text frontend (espeak-ng) failed on it (${signal ?? `exit ${code}`}); try other wording`,
        { input: 'synthesis.text' },
      );
      for (const waiting of this.pending.values()) waiting.reject(failure);
      this.pending.clear();
    });
    keepAlive(child, false);
    this.child = child;
    return child;
  }
}

/** The process's one phonemizer child. */
export const phonemizerProcess = new PhonemizerProcess();
