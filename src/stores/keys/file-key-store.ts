import { readFileSync, statSync } from 'node:fs';
import { mkdir, open, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { generateApiKey, newKeyRecord, type ApiKeyRecord, type NewKeyInput } from '../../core/api-keys.ts';
import type { KeyStore } from './key-store.ts';

const LOCK_WAIT_MS = 3000;
// A lock older than this was left by a process that died while writing.
const STALE_LOCK_MS = 10_000;

/**
 * Keys in `<dataDir>/keys.json` (hashes only), for a gateway without Redis. A running server re-reads
 * the file when it changes (checked at most every `recheckMs`, 250 ms by default), so keys created or
 * revoked with the CLI apply without a restart. Writes take a lock file, then write a temporary file
 * and rename it over the old one, so readers never see half a file.
 */
export class FileKeyStore implements KeyStore {
  readonly path: string;
  private readonly lockPath: string;
  private records: ApiKeyRecord[] = [];
  private byHash = new Map<string, ApiKeyRecord>();
  private loadedVersion = '';
  private checkedAt = 0;
  revision = 0;

  constructor(
    private readonly dataDir: string,
    private readonly recheckMs = 250,
  ) {
    this.path = join(dataDir, 'keys.json');
    this.lockPath = `${this.path}.lock`;
    this.reload(true);
  }

  async create(input: NewKeyInput): Promise<{ key: string; record: ApiKeyRecord }> {
    const key = generateApiKey();
    const record = newKeyRecord(key, input);
    await this.update((records) => [...records, record]);
    return { key, record };
  }

  async list(): Promise<ApiKeyRecord[]> {
    this.reload(true);
    return [...this.records];
  }

  async revoke(id: string): Promise<boolean> {
    let found = false;
    await this.update((records) =>
      records.map((record) => {
        if (record.id !== id) return record;
        found = true;
        return { ...record, revoked: true };
      }),
    );
    return found;
  }

  async findByHash(hash: string): Promise<ApiKeyRecord | undefined> {
    this.reload();
    return this.byHash.get(hash);
  }

  async close(): Promise<void> {}

  // Reads the file again if it changed since the last read (a rename gives it a new inode).
  private reload(force = false): void {
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
    if (version === this.loadedVersion) return;
    const records = version ? parseKeyFile(this.path, readFileSync(this.path, 'utf8')) : [];
    this.records = records;
    this.byHash = new Map(records.map((record) => [record.hash, record]));
    this.loadedVersion = version;
    this.revision += 1;
  }

  private async update(change: (records: ApiKeyRecord[]) => ApiKeyRecord[]): Promise<void> {
    await mkdir(this.dataDir, { recursive: true });
    await this.lock();
    try {
      this.reload(true);
      const temporary = `${this.path}.${process.pid}.${Date.now()}.tmp`;
      try {
        await writeFile(temporary, `${JSON.stringify({ keys: change(this.records) }, null, 2)}\n`, { mode: 0o600 });
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

  private async lock(): Promise<void> {
    const deadline = Date.now() + LOCK_WAIT_MS;
    for (;;) {
      try {
        await (await open(this.lockPath, 'wx')).close();
        return;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      }
      const age = await stat(this.lockPath).then((info) => Date.now() - info.mtimeMs, () => 0);
      if (age > STALE_LOCK_MS) await rm(this.lockPath, { force: true });
      else if (Date.now() > deadline) throw new Error(`${this.lockPath} is held by another writer; try again`);
      else await sleep(20);
    }
  }
}

function parseKeyFile(path: string, text: string): ApiKeyRecord[] {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new Error(`${path} is not valid JSON: ${(error as Error).message}`);
  }
  const keys = (value as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(keys)) throw new Error(`${path} must hold {"keys": [...]}`);
  return keys as ApiKeyRecord[];
}
