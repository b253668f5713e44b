import { generateApiKey, newKeyRecord, type ApiKeyRecord, type NewKeyInput } from '../../core/api-keys.ts';
import { LockedJsonFile } from '../locked-json-file.ts';
import { applyKeyChanges } from './key-records.ts';
import type { KeyChanges, KeyStore } from './key-store.ts';

/**
 * Keys in `<dataDir>/keys.json` (hashes only), for a gateway without Redis. A running server re-reads
 * the file when it changes (checked at most every `recheckMs`, 250 ms by default), so keys created,
 * changed or revoked with the CLI apply without a restart. Writes take a lock file, then write a temporary file
 * and rename it over the old one, so readers never see half a file (see {@link LockedJsonFile}).
 */
export class FileKeyStore implements KeyStore {
  private readonly file: LockedJsonFile<ApiKeyRecord>;
  private byHash = new Map<string, ApiKeyRecord>();
  private indexed: readonly ApiKeyRecord[] | undefined;

  constructor(dataDir: string, recheckMs = 250) {
    this.file = new LockedJsonFile<ApiKeyRecord>(dataDir, 'keys.json', 'keys', recheckMs);
  }

  get path(): string {
    return this.file.path;
  }

  get revision(): number {
    return this.file.revision;
  }

  async create(input: NewKeyInput): Promise<{ key: string; record: ApiKeyRecord }> {
    const key = generateApiKey();
    const record = newKeyRecord(key, input);
    await this.file.write((records) => [...records, record]);
    return { key, record };
  }

  async list(): Promise<ApiKeyRecord[]> {
    return [...this.file.read(true)];
  }

  async revoke(id: string): Promise<boolean> {
    let found = false;
    await this.file.write((records) =>
      records.map((record) => {
        if (record.id !== id) return record;
        found = true;
        return { ...record, revoked: true };
      }),
    );
    return found;
  }

  async update(id: string, changes: KeyChanges): Promise<ApiKeyRecord | undefined> {
    let updated: ApiKeyRecord | undefined;
    // Under the file's lock, on the records read whole: a revoke or change by another process is never lost.
    await this.file.write((records) => {
      const index = records.findIndex((record) => record.id === id);
      if (index < 0) return undefined;
      const changed = applyKeyChanges(records[index]!, changes);
      updated = changed;
      return records.map((record, at) => (at === index ? changed : record));
    });
    return updated;
  }

  async findByHash(hash: string): Promise<ApiKeyRecord | undefined> {
    const records = this.file.read();
    if (records !== this.indexed) {
      this.byHash = new Map(records.map((record) => [record.hash, record]));
      this.indexed = records;
    }
    return this.byHash.get(hash);
  }

  async close(): Promise<void> {}
}
