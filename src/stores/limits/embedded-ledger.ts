import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { MemoryLedger } from './memory-ledger.ts';

/** The file under the data directory that day and month counters are kept in. */
export const LIMIT_COUNTERS_FILE = 'limit-counters.json';

const WRITE_DELAY_MS = 500;

interface CountersFile {
  readonly version: 1;
  /** Counter name → [value, resetAt (epoch ms)]. */
  readonly counters: Record<string, [number, number]>;
}

// Minute (and other request-rate) windows are over before a restart matters; only day and month
// counters (`…:d:2026-11-27`, `…:mo:2026-11`) are kept.
const DAY_OR_MONTH = /:(?:d:\d{4}-\d{2}-\d{2}|mo:\d{4}-\d{2})$/;
const isMinuteCounter = (counter: string): boolean => !DAY_OR_MONTH.test(counter);

/**
 * The embedded default's ledger (no Redis): a {@link MemoryLedger} whose day and month counters
 * survive a restart in `<dataDir>/limit-counters.json`, written whole (temp file, then rename) about
 * 500 ms after a change, and at once on {@link flush} and {@link close}.
 */
export class EmbeddedLedger extends MemoryLedger {
  private readonly path: string;
  private timer: NodeJS.Timeout | undefined;
  private dirty = false;
  private writing: Promise<void> | undefined;
  private closed = false;

  private constructor(
    dataDir: string,
    private readonly logger: Logger,
    now: () => number,
  ) {
    super(now);
    this.path = join(dataDir, LIMIT_COUNTERS_FILE);
  }

  /**
   * Opens the ledger, loading the counters a previous process left (those whose window ended are
   * dropped). A file that cannot be read as counters is logged and moved aside; the ledger starts empty.
   */
  static async open(dataDir: string, logger: Logger, now: () => number = Date.now): Promise<EmbeddedLedger> {
    await mkdir(dataDir, { recursive: true });
    const ledger = new EmbeddedLedger(dataDir, logger, now);
    await ledger.load();
    return ledger;
  }

  override add(counter: string, amount: number, resetAt: number, now = this.now()): number {
    const value = super.add(counter, amount, resetAt, now);
    if (!isMinuteCounter(counter)) this.changed();
    return value;
  }

  override async flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    while (this.writing) await this.writing;
    if (this.dirty) await this.write();
  }

  override async close(): Promise<void> {
    await this.flush();
    this.closed = true;
  }

  private changed(): void {
    this.dirty = true;
    if (this.timer || this.closed) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.flush();
    }, WRITE_DELAY_MS);
    this.timer.unref();
  }

  private write(): Promise<void> {
    const now = this.now();
    const counters: CountersFile['counters'] = {};
    for (const [name, entry] of this.counters) {
      if (entry.resetAt > now && !isMinuteCounter(name)) counters[name] = [entry.value, entry.resetAt];
    }
    this.dirty = false;
    const temp = `${this.path}.${process.pid}.tmp`;
    const body: CountersFile = { version: 1, counters };
    this.writing = writeFile(temp, JSON.stringify(body))
      .then(() => rename(temp, this.path))
      .catch((error: unknown) => {
        // Kept dirty: the next change or flush tries again.
        this.dirty = true;
        this.logger.error({ err: error, path: this.path }, 'limit ledger: cannot write the limit counters');
      })
      .finally(() => {
        this.writing = undefined;
      });
    return this.writing;
  }

  private async load(): Promise<void> {
    let text: string;
    try {
      text = await readFile(this.path, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw error;
    }
    const file = parseCounters(text);
    if (!file) {
      const aside = `${this.path}.corrupt-${this.now()}`;
      this.logger.warn(
        { path: this.path, movedTo: aside },
        'limit ledger: the limit counters file is unreadable; moved aside, starting from zero',
      );
      await rename(this.path, aside).catch(() => {});
      return;
    }
    const now = this.now();
    for (const [name, [value, resetAt]] of Object.entries(file.counters)) {
      if (resetAt > now) this.counters.set(name, { value, resetAt });
    }
  }
}

function parseCounters(text: string): CountersFile | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null || (value as CountersFile).version !== 1) return undefined;
  const counters = (value as CountersFile).counters;
  if (typeof counters !== 'object' || counters === null) return undefined;
  const valid: CountersFile['counters'] = {};
  for (const [name, entry] of Object.entries(counters)) {
    if (Array.isArray(entry) && entry.length === 2 && entry.every((part) => Number.isSafeInteger(part)))
      valid[name] = entry as [number, number];
  }
  return { version: 1, counters: valid };
}
