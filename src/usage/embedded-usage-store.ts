import { createReadStream, createWriteStream, type WriteStream } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Logger } from 'pino';
import { addTotals, dayOf, emptyTotals, recordTotals, type UsageRecord, type UsageTotals } from './usage-record.ts';
import { groupCells, inRange, type UsageCell, type UsageQuery, type UsageRow, type UsageStore } from './usage-store.ts';

/** Reads a JSONL journal; a torn last line (a crash mid-write) is skipped. */
export async function readJournal(path: string, onRecord: (record: UsageRecord) => void): Promise<void> {
  let stream;
  try {
    stream = createReadStream(path, { encoding: 'utf8' });
    for await (const line of createInterface({ input: stream, crlfDelay: Infinity })) {
      if (!line.trim()) continue;
      try {
        onRecord(JSON.parse(line) as UsageRecord);
      } catch {
        // A torn line: the record it began was never acknowledged as stored.
      }
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
}

/**
 * The embedded default (no Redis): an append-only JSONL journal under the data directory, and daily
 * totals in memory rebuilt from it at start, so a restart loses nothing.
 */
export class EmbeddedUsageStore implements UsageStore {
  readonly healthy = true;
  private readonly cells = new Map<string, UsageCell>();
  private constructor(
    private readonly journal: WriteStream,
    private readonly logger?: Logger,
  ) {}

  static async open(dataDir: string, logger?: Logger): Promise<EmbeddedUsageStore> {
    await mkdir(dataDir, { recursive: true });
    const path = join(dataDir, 'usage.jsonl');
    const records: UsageRecord[] = [];
    await readJournal(path, (record) => records.push(record));
    const store = new EmbeddedUsageStore(createWriteStream(path, { flags: 'a' }), logger);
    for (const record of records) store.apply(record);
    store.journal.on('error', (error) => logger?.error({ err: error }, 'usage journal write failed'));
    return store;
  }

  private apply(record: UsageRecord): void {
    const day = dayOf(record.time);
    const id = `${record.keyId}\t${day}\t${record.model}`;
    const cell = this.cells.get(id) ?? { keyId: record.keyId, day, model: record.model, totals: emptyTotals() };
    addTotals(cell.totals as UsageTotals, recordTotals(record));
    this.cells.set(id, cell);
  }

  record(record: UsageRecord): void {
    try {
      this.apply(record);
      // Records of one tick go to the file in one write.
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

  async chargedTokens(keyId: string, fromDay: string, toDay: string): Promise<number> {
    let sum = 0;
    for (const cell of this.cells.values()) if (cell.keyId === keyId && inRange(cell.day, fromDay, toDay)) sum += cell.totals.charged_tokens;
    return sum;
  }

  flush(): Promise<void> {
    return new Promise((resolve) => this.journal.write('', () => resolve()));
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => this.journal.end(resolve));
  }
}
