/**
 * Code under test in a forked child process, so that an input that crashes it is a finding rather than the
 * fuzzer's own death: the parent side (WorkerChild) starts the child on first use and again after it died or hung,
 * and sends one request at a time; the child side (answerParent) says when it is ready, then answers every request.
 */
import { fork, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';

/** What became of one request: the child's reply, or the child died or did not answer in time (then it is gone). */
export type CallOutcome<Reply> = { kind: 'reply'; reply: Reply } | { kind: 'died'; detail: string } | { kind: 'timeout'; ms: number };

type ToChild<Request> = { id: number; request: Request };
type FromChild<Ready, Reply> = { ready: Ready } | { id: number; reply: Reply };

const READY_MS = 60_000;

/**
 * glibc's checking allocator, where it is installed: a heap overflow then aborts when the block is freed, in the
 * call that made it, instead of corrupting the heap for a later input to trip over.
 */
function heapCheckEnv(): NodeJS.ProcessEnv {
  const debugMalloc = ['/usr/lib/x86_64-linux-gnu/libc_malloc_debug.so.0', '/usr/lib/aarch64-linux-gnu/libc_malloc_debug.so.0'].find((f) => fs.existsSync(f));
  return debugMalloc ? { LD_PRELOAD: debugMalloc, GLIBC_TUNABLES: 'glibc.malloc.check=3' } : {};
}

/** The last lines of a child's stderr, for a finding's detail. */
export function tail(text: string): string {
  return text.trim().split('\n').slice(-3).join(' | ').slice(-400);
}

export class WorkerChild<Request, Reply, Ready> {
  private child: ChildProcess | null = null;
  private readyInfo: Ready | null = null;
  private stderr = '';
  private nextId = 1;

  /** `script`: the child's module, which calls answerParent; `name`: what it runs, for messages. */
  constructor(
    private readonly script: URL,
    private readonly name: string,
  ) {}

  /** What the running child said when it was ready (after a first `call`). */
  get ready(): Ready {
    if (this.readyInfo === null) throw new Error(`the ${this.name} child has not started`);
    return this.readyInfo;
  }

  /** Sends `request`; a child that dies or does not answer within `timeoutMs` is left behind (the next call starts a fresh one). */
  async call(request: Request, timeoutMs: number): Promise<CallOutcome<Reply>> {
    const child = await this.started();
    const id = this.nextId++;
    const outcome = await new Promise<CallOutcome<Reply>>((resolve) => {
      const onMessage = (message: FromChild<Ready, Reply>): void => {
        if ('id' in message && message.id === id) settle({ kind: 'reply', reply: message.reply });
      };
      const onExit = (code: number | null, signal: NodeJS.Signals | null): void => {
        settle({ kind: 'died', detail: `${signal ?? `exit code ${code}`}${this.stderr ? `: ${tail(this.stderr)}` : ''}` });
      };
      const timer = setTimeout(() => settle({ kind: 'timeout', ms: timeoutMs }), timeoutMs);
      const settle = (result: CallOutcome<Reply>): void => {
        clearTimeout(timer);
        child.off('message', onMessage);
        child.off('exit', onExit);
        resolve(result);
      };
      child.on('message', onMessage);
      child.on('exit', onExit);
      child.send(
        { id, request } satisfies ToChild<Request>,
        (error) => error && settle({ kind: 'died', detail: `could not be sent the input: ${error.message}` }),
      );
    });
    if (outcome.kind !== 'reply') await this.stop();
    return outcome;
  }

  /** Kills the child, if any, and waits for it to go. */
  async stop(): Promise<void> {
    const child = this.child;
    this.child = null;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGKILL');
    await exited;
  }

  private async started(): Promise<ChildProcess> {
    if (this.child && this.child.exitCode === null && this.child.signalCode === null) return this.child;
    this.stderr = '';
    const child = fork(this.script, [], { serialization: 'advanced', stdio: ['ignore', 'ignore', 'pipe', 'ipc'], env: { ...process.env, ...heapCheckEnv() } });
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (this.stderr = (this.stderr + chunk).slice(-4096)));
    this.readyInfo = await new Promise<Ready>((resolve, reject) => {
      const timer = setTimeout(() => fail(`did not get ready within ${READY_MS} ms`), READY_MS);
      const onMessage = (message: FromChild<Ready, Reply>): void => {
        if ('ready' in message) done(() => resolve(message.ready));
      };
      const onExit = (code: number | null, signal: NodeJS.Signals | null): void => fail(`exited (${signal ?? code}) before it was ready: ${tail(this.stderr)}`);
      const fail = (why: string): void => done(() => reject(new Error(`the ${this.name} child ${why}`)));
      const done = (then: () => void): void => {
        clearTimeout(timer);
        child.off('message', onMessage);
        child.off('exit', onExit);
        then();
      };
      child.on('message', onMessage);
      child.on('exit', onExit);
    }).catch(async (error: unknown) => {
      child.kill('SIGKILL');
      throw error;
    });
    this.child = child;
    return child;
  }
}

/**
 * The child's side: says it is ready (with `ready`, e.g. what it loaded), then answers each request with what
 * `handle` resolves to (it turns errors into replies: a rejection would end the child, a crash). Exits when the
 * parent goes away.
 */
export function answerParent<Request, Reply, Ready>(ready: Ready, handle: (request: Request) => Promise<Reply>): void {
  const send = (message: FromChild<Ready, Reply>): void => void process.send?.(message);
  process.on('disconnect', () => process.exit(0));
  process.on('message', (message: ToChild<Request>) => {
    void handle(message.request).then((reply) => send({ id: message.id, reply }));
  });
  send({ ready });
}
