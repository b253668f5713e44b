import { createReadStream, createWriteStream, type WriteStream } from 'node:fs';
import { appendFile, mkdir, open } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Logger } from 'pino';
import { addTotals, dayOf, emptyTotals, recordTotals, type UsageRecord, type UsageTotals } from './usage-record.ts';
import { groupCells, periodRange, type QuotaPeriod, type UsageCell, type UsageQuery, type UsageRow, type UsageStore } from './usage-store.ts';

const isRecord = (value: unknown): value is UsageRecord =>
  typeof value === 'object' && value !== null && typeof (value as UsageRecord).id === 'string' && typeof (value as UsageRecord).keyId === 'string';

/** Reads a JSONL journal of records; a torn line (a crash mid-write) is skipped. A missing file is empty. */
export async function readJournal(path: string, onRecord: (record: UsageRecord) => void): Promise<void> {
  try {
    const stream = createReadStream(path, { encoding: 'utf8' });
    for await (const line of createInterface({ input: stream, crlfDelay: Infinity })) {
      if (!line.trim()) continue;
      let value: unknown;
      try {
        value = JSON.parse(line);
      } catch {
        // A torn line: the record it began was never acknowledged as stored.
        continue;
      }
      if (isRecord(value)) onRecord(value);
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
}

/**
 * Ends a journal with a line break when a crash left it mid-line, so that the next record starts a
 * line of its own instead of joining the torn one.
 */
export async function closeTornLine(path: string): Promise<void> {
  let file;
  try {
    file = await open(path, 'r');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw error;
  }
  try {
    const { size } = await file.stat();
    if (size === 0) return;
    const last = Buffer.alloc(1);
    await file.read(last, 0, 1, size - 1);
    if (last[0] === 0x0a) return;
  } finally {
    await file.close();
  }
  await appendFile(path, '\n');
}

/**
 * The embedded default (no Redis): an append-only JSONL journal, `<dataDir>/usage.jsonl`, one line per
 * record, and daily totals per key × model in memory, rebuilt from the journal at start, so a restart
 * loses nothing. Records of one tick reach the file in one write.
 */
export class EmbeddedUsageStore implements UsageStore {
  readonly healthy = true;
  private readonly cells = new Map<string, UsageCell>();
  /** Charged tokens per key and UTC day (`<keyId>\t<day>`), so a quota check reads at most 31 entries. */
  private readonly chargedByDay = new Map<string, number>();

  private constructor(
    private readonly journal: WriteStream,
    private readonly logger?: Logger,
  ) {}

  /** Opens (or creates) the journal under `dataDir` and sums what it holds. */
  static async open(dataDir: string, logger?: Logger): Promise<EmbeddedUsageStore> {
    await mkdir(dataDir, { recursive: true });
    const path = join(dataDir, 'usage.jsonl');
    const records: UsageRecord[] = [];
    await readJournal(path, (record) => records.push(record));
    await closeTornLine(path);
    const journal = createWriteStream(path, { flags: 'a' });
    journal.on('error', (error) => logger?.error({ err: error }, 'usage journal write failed; usage since is kept in memory only'));
    const store = new EmbeddedUsageStore(journal, logger);
    for (const record of records) store.apply(record);
    return store;
  }

  private apply(record: UsageRecord): void {
    const day = dayOf(record.time);
    const cellId = `${record.keyId}\t${day}\t${record.model}`;
    const cell = this.cells.get(cellId) ?? { keyId: record.keyId, day, model: record.model, totals: emptyTotals() };
    const added = recordTotals(record);
    addTotals(cell.totals as UsageTotals, added);
    this.cells.set(cellId, cell);
    const dayId = `${record.keyId}\t${day}`;
    this.chargedByDay.set(dayId, (this.chargedByDay.get(dayId) ?? 0) + added.charged_tokens);
  }

  record(record: UsageRecord): void {
    try {
      this.apply(record);
      if (!this.journal.writableCorked) {
        this.journal.cork();
        process.nextTick(() => this.journal.uncork());
      }
      this.journal.write(`${JSON.stringify(record)}\n`);
    } catch (error) {
      this.logger?.error({ err: error, record: record.id }, 'usage record failed');
    }
  }

  async query(query: UsageQuery): Promise<UsageRow[]> {
    return groupCells(this.cells.values(), query);
  }

  async totalsFor(keyId: string, period: QuotaPeriod, now: Date): Promise<number> {
    const { fromDay, toDay } = periodRange(period, now);
    let sum = 0;
    const day = new Date(`${fromDay}T00:00:00.000Z`);
    for (let current = fromDay; current <= toDay; day.setUTCDate(day.getUTCDate() + 1), current = dayOf(day)) {
      sum += this.chargedByDay.get(`${keyId}\t${current}`) ?? 0;
    }
    return sum;
  }

  flush(): Promise<void> {
    if (this.journal.writableEnded) return Promise.resolve();
    // Resolves once everything written before it has reached the file.
    return new Promise((resolve) => this.journal.write('', () => resolve()));
  }

  async close(): Promise<void> {
    if (this.journal.writableEnded) return;
    await new Promise<void>((resolve) => this.journal.end(resolve));
  }
}
