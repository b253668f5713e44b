import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { CounterChange, CounterDemand, Enrolment, LimitLedger, ReserveResult } from '../../usage/limit-ledger.ts';

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
 * Limit counters in process memory: the embedded default's ledger (one machine), and the counts an
 * instance goes on with while Redis is away. Every call is synchronous, so a reservation is atomic.
 */
export class MemoryLedger implements LimitLedger {
  protected readonly counters = new Map<string, Counter>();

  constructor(protected readonly now: () => number = Date.now) {}

  reserve(demands: readonly CounterDemand[]): ReserveResult {
    const now = this.now();
    const used = demands.map((demand) => this.valueOf(demand.counter, now));
    for (let index = 0; index < demands.length; index += 1) {
      const demand = demands[index]!;
      if (demand.limit - used[index]! < demand.need) return { refused: index, used, reserved: demands.map(() => 0) };
    }
    const reserved = demands.map((demand, index) => Math.max(0, Math.min(demand.want, demand.limit - used[index]!)));
    demands.forEach((demand, index) => {
      used[index] = this.add(demand.counter, reserved[index]!, demand.resetAt, now);
    });
    return { used, reserved };
  }

  adjust(changes: readonly CounterChange[]): void {
    const now = this.now();
    for (const change of changes) {
      if (change.resetAt <= now || !this.has(change.counter, now)) continue;
      this.add(change.counter, change.delta, change.resetAt, now);
    }
  }

  // A roster is kept as counters (its size, and one marker per member, named to end as the roster's window
  // tag does), so the embedded ledger keeps it across a restart as it keeps the day's counters.
  enroll(roster: string, member: string, cap: number, resetAt: number): Enrolment {
    const now = this.now();
    const marker = `${member}@${roster}`;
    if (this.valueOf(marker, now) > 0) return 'member';
    if (this.valueOf(roster, now) < cap) {
      this.add(roster, 1, resetAt, now);
      this.add(marker, 1, resetAt, now);
      return 'member';
    }
    const over = `!over@${roster}`;
    if (this.valueOf(over, now) > 0) return 'over';
    this.add(over, 1, resetAt, now);
    return 'first-over';
  }

  async peek(counters: readonly string[]): Promise<number[]> {
    const now = this.now();
    return counters.map((counter) => this.valueOf(counter, now));
  }

  /** The value of one counter now (0 when unknown or its window ended). */
  valueOf(counter: string, now = this.now()): number {
    const entry = this.counters.get(counter);
    if (!entry) return 0;
    if (entry.resetAt <= now) {
      this.counters.delete(counter);
      return 0;
    }
    return entry.value;
  }

  /** True when the counter exists and its window is still open. */
  has(counter: string, now = this.now()): boolean {
    const entry = this.counters.get(counter);
    return entry !== undefined && entry.resetAt > now;
  }

  /** Forgets every counter. */
  clear(): void {
    this.counters.clear();
  }

  /** Adds to a counter (creating it for its window) and gives back its new value. */
  add(counter: string, amount: number, resetAt: number, now = this.now()): number {
    let entry = this.counters.get(counter);
    if (!entry || entry.resetAt <= now) {
      if (this.counters.size >= MAX_COUNTERS) this.dropOldest(now);
      entry = { value: 0, resetAt };
      this.counters.set(counter, entry);
    }
    entry.value += amount;
    return entry.value;
  }

  degraded(): boolean {
    return false;
  }

  async flush(): Promise<void> {}

  async close(): Promise<void> {}

  private dropOldest(now: number): void {
    for (const [name, entry] of this.counters) if (entry.resetAt <= now) this.counters.delete(name);
    if (this.counters.size < MAX_COUNTERS) return;
    // Every window still open: drop the minute counters first, they matter for the shortest time.
    const byReset = [...this.counters].sort((a, b) => a[1].resetAt - b[1].resetAt);
    for (const [name] of byReset.slice(0, Math.ceil(MAX_COUNTERS / 10))) this.counters.delete(name);
  }
}

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

interface Counter {
  value: number;
  resetAt: number;
}

// Counters kept at most; past it, the ones whose window ends first are dropped.
const MAX_COUNTERS = 200_000;
