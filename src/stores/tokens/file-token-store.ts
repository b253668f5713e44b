import { LockedJsonFile } from '../locked-json-file.ts';
import { newServiceToken, type NewServiceToken, type ServiceTokenRecord, type TokenStore } from './token-store.ts';

/** Service tokens in `<dataDir>/service-tokens.json` (hashes only), shared with the CLI on one machine. */
export class FileTokenStore implements TokenStore {
  private readonly file: LockedJsonFile<ServiceTokenRecord>;

  constructor(dataDir: string) {
    this.file = new LockedJsonFile<ServiceTokenRecord>(dataDir, 'service-tokens.json', 'tokens');
  }

  async create(input: NewServiceToken) {
    const made = newServiceToken(input);
    await this.file.write((records) => [...records, made.record]);
    return made;
  }

  async list(): Promise<ServiceTokenRecord[]> {
    return [...this.file.read(true)];
  }

  async revoke(id: string): Promise<boolean> {
    let found = false;
    await this.file.write((records) => {
      if (!records.some((record) => record.id === id)) return undefined;
      found = true;
      return records.map((record) => (record.id === id ? { ...record, revoked: true } : record));
    });
    return found;
  }

  async findByHash(hash: string): Promise<ServiceTokenRecord | undefined> {
    return this.file.read().find((record) => record.hash === hash);
  }

  async close(): Promise<void> {}
}
