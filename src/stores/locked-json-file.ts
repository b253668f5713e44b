import { readFileSync, statSync } from 'node:fs';
import { mkdir, open, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

const LOCK_WAIT_MS = 3000;
// A lock older than this was left by a process that died while writing.
const STALE_LOCK_MS = 10_000;

/**
 * A list of records in `<dataDir>/<file>` as `{"<field>": [...]}`, shared by processes on one machine
 * (a server and the CLI). Reads pick up another process's writes (checked at most every `recheckMs`);
 * a write takes a lock file, re-reads, then writes a temporary file and renames it over the old one,
 * so readers never see half a file and no writer loses another's change.
 */
export class LockedJsonFile<R> {
  readonly path: string;
  private readonly lockPath: string;
  private records: readonly R[] = [];
  private loadedVersion = '';
  private checkedAt = 0;
  /** Grows each time a changed file is read. */
  revision = 0;

  constructor(
    private readonly dataDir: string,
    file: string,
    private readonly field: string,
    private readonly recheckMs = 250,
  ) {
    this.path = join(dataDir, file);
    this.lockPath = `${this.path}.lock`;
    this.reload(true);
  }

  /** The records, read again first when the file changed (at once when `force`, else at most every `recheckMs`). */
  read(force = false): readonly R[] {
    this.reload(force);
    return this.records;
  }

  /**
   * Replaces the records with what `change` makes of the current ones, under the lock. `change` may
   * throw (nothing is written) or give back undefined (nothing to write).
   */
  async write(change: (records: readonly R[]) => readonly R[] | undefined): Promise<void> {
    await mkdir(this.dataDir, { recursive: true });
    await this.lock();
    try {
      // Read whole under the lock, whatever the version says: two writes within one tick of the file
      // clock can leave a same-sized file on a reused inode, and a change must never be built on a stale list.
      this.reload(true, true);
      const next = change(this.records);
      if (next === undefined) return;
      const temporary = `${this.path}.${process.pid}.${Date.now()}.tmp`;
      try {
        await writeFile(temporary, `${JSON.stringify({ [this.field]: next }, null, 2)}\n`, { mode: 0o600 });
        await rename(temporary, this.path);
      } catch (error) {
        await rm(temporary, { force: true });
        throw error;
      }
      this.reload(true);
    } finally {
      await rm(this.lockPath, { force: true });
    }
  }

  // Reads the file again if it changed since the last read (a rename gives it a new inode).
  private reload(force: boolean, always = false): void {
    const now = Date.now();
    if (!force && now - this.checkedAt < this.recheckMs) return;
    this.checkedAt = now;
    let version = '';
    try {
      const info = statSync(this.path);
      version = `${info.ino}:${info.mtimeMs}:${info.size}`;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
    if (version === this.loadedVersion && !always) return;
    this.records = version ? this.parse(readFileSync(this.path, 'utf8')) : [];
    this.loadedVersion = version;
    this.revision += 1;
  }

  private parse(text: string): R[] {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (error) {
      throw new Error(`${this.path} is not valid JSON: ${(error as Error).message}`);
    }
    const records = (value as Record<string, unknown> | null)?.[this.field];
    if (!Array.isArray(records)) throw new Error(`${this.path} must hold {"${this.field}": [...]}`);
    return records as R[];
  }

  private async lock(): Promise<void> {
    const deadline = Date.now() + LOCK_WAIT_MS;
    for (;;) {
      try {
        await (await open(this.lockPath, 'wx')).close();
        return;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      }
      const age = await stat(this.lockPath).then(
        (info) => Date.now() - info.mtimeMs,
        () => 0,
      );
      if (age > STALE_LOCK_MS) await rm(this.lockPath, { force: true });
      else if (Date.now() > deadline) throw new Error(`${this.lockPath} is held by another writer; try again`);
      else await sleep(20);
    }
  }
}
