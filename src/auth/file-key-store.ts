import { mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { generateApiKey, newKeyRecord, type ApiKeyRecord, type NewKeyInput } from './api-keys.ts';
import type { KeyStore } from './key-store.ts';

/**
 * Keys in `<dataDir>/keys.json` (hashes only), for the embedded default. The running server re-reads
 * the file when its modification time changes (checked at most every `recheckMs`), so keys created or
 * revoked with the CLI apply without a restart. Writes go through a temporary file and a rename.
 */
export class FileKeyStore implements KeyStore {
  private records: ApiKeyRecord[] = [];
  private byHash = new Map<string, ApiKeyRecord>();
  private loadedVersion = '';
  private checkedAt = 0;
  readonly path: string;

  constructor(
    dataDir: string,
    private readonly recheckMs = 250,
  ) {
    this.path = join(dataDir, 'keys.json');
    this.reload(true);
  }

  private reload(force = false): void {
    const now = Date.now();
    if (!force && now - this.checkedAt < this.recheckMs) return;
    this.checkedAt = now;
    let version = '';
    try {
      const stat = statSync(this.path);
      version = `${stat.mtimeMs}:${stat.size}`;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
    if (version === this.loadedVersion) return;
    this.loadedVersion = version;
    this.records = version ? ((JSON.parse(readFileSync(this.path, 'utf8')) as { keys: ApiKeyRecord[] }).keys ?? []) : [];
    this.byHash = new Map(this.records.map((record) => [record.hash, record]));
  }

  private save(records: ApiKeyRecord[]): void {
    mkdirSync(dirname(this.path), { recursive: true });
    const temporary = `${this.path}.${process.pid}.tmp`;
    writeFileSync(temporary, `${JSON.stringify({ keys: records }, null, 2)}\n`, { mode: 0o600 });
    renameSync(temporary, this.path);
    this.reload(true);
  }

  async create(input: NewKeyInput): Promise<{ key: string; record: ApiKeyRecord }> {
    this.reload(true);
    const key = generateApiKey();
    const record = newKeyRecord(key, input);
    this.save([...this.records, record]);
    return { key, record };
  }

  async list(): Promise<ApiKeyRecord[]> {
    this.reload(true);
    return [...this.records];
  }

  async revoke(id: string): Promise<boolean> {
    this.reload(true);
    if (!this.records.some((record) => record.id === id)) return false;
    this.save(this.records.map((record) => (record.id === id ? { ...record, revoked: true } : record)));
    return true;
  }

  async findByHash(hash: string): Promise<ApiKeyRecord | undefined> {
    this.reload();
    return this.byHash.get(hash);
  }

  async close(): Promise<void> {}
}
