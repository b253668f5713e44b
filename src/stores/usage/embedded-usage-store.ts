import { createReadStream, createWriteStream, renameSync, type WriteStream } from 'node:fs';
import { appendFile, mkdir, open, readdir, readFile, rename, rm } from 'node:fs/promises';
import { once } from 'node:events';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Logger } from 'pino';
import {
  addTotals,
  dayOf,
  emptyTotals,
  recordTotals,
  type UsageRecord,
  type UsageTotals,
  groupCells,
  type UsageCell,
  type UsageQuery,
  type UsageRow,
  type UsageStore,
} from '../../usage/usage-accounting.ts';

const isRecord = (value: unknown): value is UsageRecord =>
  typeof value === 'object' &&
  value !== null &&
  typeof (value as UsageRecord).id === 'string' &&
  typeof (value as UsageRecord).keyId === 'string';

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

/** Journal and snapshot files under the data directory. */
const LIVE = 'usage.jsonl';
const SNAPSHOT = 'usage.snapshot.json';
const SEALED = /^usage\.sealed-(\d+)\.jsonl$/;
const sealedName = (generation: number) => `usage.sealed-${generation}.jsonl`;

/** Where a compaction is; a test may stop it at any of them, as a crash would. */
export type CompactionStep = 'sealed' | 'snapshot-written' | 'snapshot-renamed' | 'segments-removed';

export interface EmbeddedUsageStoreOptions {
  /** Records in the live journal that start a compaction (50,000 by default, ~20 MB). */
  readonly compactEvery?: number;
  /** Called at each step of a compaction; throwing stops it there (tests simulate crashes with it). */
  readonly onCompactionStep?: (step: CompactionStep) => void;
}

interface Snapshot {
  readonly version: 1;
  /** Every record of the sealed segments up to this generation is in `cells`. */
  readonly sealedThrough: number;
  readonly cells: UsageCell[];
  /** The same records' totals per key, day and end user (absent in snapshots written before end users). */
  readonly endUserCells?: UsageCell[];
}

/** Writes a file so that readers see the old or the new content whole, even across a crash. */
async function writeAtomically(dir: string, name: string, text: string): Promise<void> {
  const temporary = join(dir, `${name}.tmp`);
  const file = await open(temporary, 'w');
  try {
    await file.writeFile(text);
    await file.sync();
  } finally {
    await file.close();
  }
  await rename(temporary, join(dir, name));
  const directory = await open(dir, 'r');
  try {
    await directory.sync();
  } finally {
    await directory.close();
  }
}

async function readSnapshot(dir: string): Promise<Snapshot | undefined> {
  let text: string;
  try {
    text = await readFile(join(dir, SNAPSHOT), 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  // Written by rename only: it is whole, or an operator broke it (then refuse rather than lose usage).
  const snapshot = JSON.parse(text) as Snapshot;
  if (snapshot.version !== 1 || !Array.isArray(snapshot.cells))
    throw new Error(`${join(dir, SNAPSHOT)} is not a usage snapshot`);
  return snapshot;
}

/**
 * The embedded default (no Redis): daily totals per key × model (and per key × end user), kept as an aggregates
 * snapshot (`usage.snapshot.json`) plus a JSONL journal of the records since (`usage.jsonl`, one line per
 * record; records of one tick reach the file in one write). Start-up reads the snapshot and the
 * journal, so its time and memory follow the number of keys × models × days, not of records.
 *
 * Compaction, every `compactEvery` records: the live journal is renamed to a sealed segment and a new
 * one started, in the same tick as the totals are copied (so the copy holds exactly the sealed
 * records); the snapshot is written to a temporary file, synced and renamed over the old one; then the
 * sealed segments it covers are removed. A crash before the rename leaves the old snapshot and every
 * segment (all replayed); after it, the covered segments are skipped and removed at the next start:
 * no record is lost or counted twice.
 */
export class EmbeddedUsageStore implements UsageStore {
  readonly healthy = true;
  private readonly cells = new Map<string, UsageCell>();
  private readonly endUserCells = new Map<string, UsageCell>();
  private journal!: WriteStream;
  private liveRecords = 0;
  private generation = 0;
  private compacting: Promise<void> | undefined;
  // The sealed journal's last writes, until they reach its file.
  private sealing: Promise<void> | undefined;
  private readonly compactEvery: number;

  private constructor(
    private readonly dataDir: string,
    private readonly logger: Logger | undefined,
    private readonly options: EmbeddedUsageStoreOptions,
  ) {
    this.compactEvery = options.compactEvery ?? 50_000;
  }

  /** Opens (or creates) the store under `dataDir`: the snapshot, then the records journaled since. */
  static async open(
    dataDir: string,
    logger?: Logger,
    options: EmbeddedUsageStoreOptions = {},
  ): Promise<EmbeddedUsageStore> {
    await mkdir(dataDir, { recursive: true });
    const store = new EmbeddedUsageStore(dataDir, logger, options);
    const snapshot = await readSnapshot(dataDir);
    for (const cell of snapshot?.cells ?? []) store.applyCell(cell);
    // A snapshot from before end users: its records named none.
    const endUserCells =
      snapshot?.endUserCells ?? snapshot?.cells.map((cell) => ({ ...cell, model: '', endUser: null }));
    for (const cell of endUserCells ?? []) store.applyEndUserCell(cell);
    const sealedThrough = snapshot?.sealedThrough ?? 0;
    store.generation = sealedThrough;
    const segments = (await readdir(dataDir))
      .map((name) => SEALED.exec(name))
      .filter((match): match is RegExpExecArray => match !== null)
      .map((match) => Number(match[1]))
      .sort((a, b) => a - b);
    for (const generation of segments) {
      const path = join(dataDir, sealedName(generation));
      // Covered by the snapshot: a crash came between its rename and the segment's removal.
      if (generation <= sealedThrough) {
        await rm(path, { force: true });
        continue;
      }
      await readJournal(path, (record) => {
        store.apply(record);
        store.liveRecords += 1;
      });
      store.generation = generation;
    }
    const live = join(dataDir, LIVE);
    await readJournal(live, (record) => {
      store.apply(record);
      store.liveRecords += 1;
    });
    await closeTornLine(live);
    store.journal = store.openJournal();
    if (store.liveRecords >= store.compactEvery) store.startCompaction();
    return store;
  }

  private openJournal(): WriteStream {
    const journal = createWriteStream(join(this.dataDir, LIVE), { flags: 'a' });
    journal.on('error', (error) =>
      this.logger?.error({ err: error }, 'usage journal write failed; usage since is kept in memory only'),
    );
    return journal;
  }

  private applyCell(cell: UsageCell): void {
    const cellId = `${cell.keyId}\t${cell.day}\t${cell.model}`;
    const existing = this.cells.get(cellId) ?? {
      keyId: cell.keyId,
      day: cell.day,
      model: cell.model,
      totals: emptyTotals(),
    };
    addTotals(existing.totals as UsageTotals, cell.totals);
    this.cells.set(cellId, existing);
  }

  private applyEndUserCell(cell: UsageCell): void {
    const endUser = cell.endUser ?? null;
    const cellId = `${cell.keyId}\t${cell.day}\t${endUser === null ? '' : `=${endUser}`}`;
    const existing = this.endUserCells.get(cellId) ?? {
      keyId: cell.keyId,
      day: cell.day,
      model: '',
      endUser,
      totals: emptyTotals(),
    };
    addTotals(existing.totals as UsageTotals, cell.totals);
    this.endUserCells.set(cellId, existing);
  }

  private apply(record: UsageRecord): void {
    const day = dayOf(record.time);
    this.applyCell({ keyId: record.keyId, day, model: record.model, totals: recordTotals(record) });
    this.applyEndUserCell({
      keyId: record.keyId,
      day,
      model: '',
      endUser: record.endUser ?? null,
      totals: recordTotals(record),
    });
  }

  record(record: UsageRecord): void {
    try {
      this.apply(record);
      if (!this.journal.writableCorked) {
        const journal = this.journal;
        journal.cork();
        process.nextTick(() => journal.uncork());
      }
      this.journal.write(`${JSON.stringify(record)}\n`);
      this.liveRecords += 1;
      if (this.liveRecords >= this.compactEvery) this.startCompaction();
    } catch (error) {
      this.logger?.error({ err: error, record: record.id }, 'usage record failed');
    }
  }

  private startCompaction(): void {
    if (this.compacting) return;
    this.compacting = this.compact()
      .catch((error: unknown) =>
        this.logger?.error(
          { err: error },
          'usage journal compaction failed; the journal keeps growing until the next one',
        ),
      )
      .finally(() => {
        this.compacting = undefined;
      });
  }

  private async compact(): Promise<void> {
    // The journal file must be open before it is renamed: a stream still opening would open the new file.
    if (this.journal.pending) await once(this.journal, 'ready');
    const generation = this.generation + 1;
    // One tick: the renamed journal holds exactly the records in this copy of the totals.
    renameSync(join(this.dataDir, LIVE), join(this.dataDir, sealedName(generation)));
    const sealed = this.journal;
    this.journal = this.openJournal();
    this.generation = generation;
    this.liveRecords = 0;
    const cells = [...this.cells.values()].map((cell) => ({ ...cell, totals: { ...cell.totals } }));
    const endUserCells = [...this.endUserCells.values()].map((cell) => ({ ...cell, totals: { ...cell.totals } }));
    this.sealing = new Promise<void>((resolve) => sealed.end(resolve));
    await this.sealing;
    this.options.onCompactionStep?.('sealed');
    const snapshot: Snapshot = { version: 1, sealedThrough: generation, cells, endUserCells };
    this.options.onCompactionStep?.('snapshot-written');
    await writeAtomically(this.dataDir, SNAPSHOT, JSON.stringify(snapshot));
    this.options.onCompactionStep?.('snapshot-renamed');
    for (const name of await readdir(this.dataDir)) {
      const match = SEALED.exec(name);
      if (match && Number(match[1]) <= generation) await rm(join(this.dataDir, name), { force: true });
    }
    this.options.onCompactionStep?.('segments-removed');
    this.logger?.info({ sealed_through: generation, cells: cells.length }, 'usage journal compacted');
  }

  async query(query: UsageQuery): Promise<UsageRow[]> {
    return groupCells(query.groupBy === 'end_user' ? this.endUserCells.values() : this.cells.values(), query);
  }

  async flush(): Promise<void> {
    await this.sealing;
    if (this.journal.writableEnded) return;
    // Resolves once everything written before it has reached the file.
    await new Promise<void>((resolve) => this.journal.write('', () => resolve()));
  }

  async close(): Promise<void> {
    await this.compacting;
    if (this.journal.writableEnded) return;
    await new Promise<void>((resolve) => this.journal.end(resolve));
  }
}
