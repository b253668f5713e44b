import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { CountReply, CountRequest } from './token-count-messages.ts';
import { countedSlices } from './token-count.ts';

/**
 * Token counts on a worker thread. Loading the tokenizer blocks for over a second and holds tens of
 * megabytes, and most gateways never estimate: the thread starts on the first count, loads the
 * tokenizer there, and ends again after `idleMs` without counts, so the serving thread never blocks
 * on it and the memory is held only while estimates are being made. A thread that fails is replaced
 * on the next count; its pending counts fail (the caller records them flagged as estimated).
 */
export class TokenizerThread {
  private worker: Worker | undefined;
  private readonly pending = new Map<number, { resolve: (tokens: number) => void; reject: (error: Error) => void }>();
  private nextId = 1;
  private idleTimer: NodeJS.Timeout | undefined;

  constructor(private readonly idleMs = 60_000) {}

  /**
   * Tokens of `text`, a leading sample of a text `chars` long (bounded work, see `countTokensBounded`). Only the
   * slices the count looks at cross to the thread, so a long text is not copied whole.
   */
  count(text: string, chars = text.length): Promise<number> {
    if (!text) return Promise.resolve(0);
    const worker = this.start();
    const id = this.nextId++;
    return new Promise<number>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      worker.postMessage({ id, slices: countedSlices(text), chars } satisfies CountRequest);
    });
  }

  /** Whether the thread is running (for tests and diagnostics). */
  get running(): boolean {
    return this.worker !== undefined;
  }

  /** Ends the thread; pending counts fail. */
  async close(): Promise<void> {
    const worker = this.worker;
    if (!worker) return;
    this.stop(worker, new Error('the tokenizer thread was closed'));
    await worker.terminate();
  }

  private start(): Worker {
    clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    if (this.worker) {
      this.worker.ref();
      return this.worker;
    }
    const worker = spawnWorker();
    worker.on('message', (reply: CountReply) => {
      const waiting = this.pending.get(reply.id);
      if (!waiting) return;
      this.pending.delete(reply.id);
      if ('error' in reply) waiting.reject(new Error(`token count failed: ${reply.error}`));
      else waiting.resolve(reply.tokens);
      if (this.pending.size === 0 && this.worker === worker) this.idle(worker);
    });
    worker.on('error', (error) => this.stop(worker, error));
    worker.on('exit', () => this.stop(worker, new Error('the tokenizer thread ended')));
    this.worker = worker;
    return worker;
  }

  /** With nothing pending the thread does not keep the process alive, and ends after `idleMs`. */
  private idle(worker: Worker): void {
    worker.unref();
    this.idleTimer = setTimeout(() => void this.close(), this.idleMs);
    this.idleTimer.unref();
  }

  private stop(worker: Worker, error: Error): void {
    if (this.worker !== worker) return;
    this.worker = undefined;
    clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    for (const waiting of this.pending.values()) waiting.reject(error);
    this.pending.clear();
  }
}

/**
 * The thread's heap, bounded: the tokenizer's tables hold about 20 MB and a count at most `maxSlices` slices, so a
 * small young generation (V8's default grows to 16 MB a semi-space) and a cap on the old one keep the thread's
 * memory near what it uses (measured in bench/tokenizer-memory.ts).
 */
const TOKENIZER_HEAP = { maxYoungGenerationSizeMb: 4, maxOldGenerationSizeMb: 64 };

/**
 * The worker runs token-count-worker as it is on disk: compiled JavaScript in production; under tsx
 * (tests, development) the worker registers tsx itself, as loader hooks are not passed on to workers.
 */
function spawnWorker(): Worker {
  const typeScript = import.meta.url.endsWith('.ts');
  const entry = new URL(typeScript ? './token-count-worker.ts' : './token-count-worker.js', import.meta.url);
  if (!typeScript) return new Worker(entry, { resourceLimits: TOKENIZER_HEAP });
  // tsx's ESM API sits beside its CommonJS build (`import.meta.resolve` is not there under tsx's transform).
  const tsx = pathToFileURL(
    createRequire(import.meta.url)
      .resolve('tsx/esm/api')
      .replace(/\.cjs$/, '.mjs'),
  ).href;
  return new Worker(
    `import(${JSON.stringify(tsx)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(entry.href)}); });`,
    { eval: true, resourceLimits: TOKENIZER_HEAP },
  );
}
