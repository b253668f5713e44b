import { appendFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { LockedJsonFile } from '../locked-json-file.ts';
import { chainedRecord, type AuditEntry, type AuditHead, type AuditRecord, type AuditStore } from './audit-store.ts';

/**
 * The audit log in `<dataDir>/audit.jsonl`, one record a line, appended under the lock of its head
 * (`audit-head.json`: the last record's number and hash), so the server and the CLI chain onto each other.
 */
export class FileAuditStore implements AuditStore {
  readonly path: string;
  private readonly headFile: LockedJsonFile<AuditHead>;

  constructor(dataDir: string) {
    this.path = join(dataDir, 'audit.jsonl');
    this.headFile = new LockedJsonFile<AuditHead>(dataDir, 'audit-head.json', 'head');
  }

  async append(entry: AuditEntry): Promise<AuditRecord> {
    let record: AuditRecord | undefined;
    await this.headFile.write(([head]) => {
      record = chainedRecord(entry, head);
      appendFileSync(this.path, `${JSON.stringify(record)}\n`, { mode: 0o600 });
      return [{ seq: record.seq, hash: record.hash }];
    });
    return record!;
  }

  async all(): Promise<AuditRecord[]> {
    let text: string;
    try {
      text = readFileSync(this.path, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw error;
    }
    return text
      .split('\n')
      .filter((line) => line.trim() !== '')
      .map((line) => JSON.parse(line) as AuditRecord);
  }

  async page(keep: (record: AuditRecord) => boolean, limit: number, before?: number): Promise<AuditRecord[]> {
    const records = await this.all();
    const found: AuditRecord[] = [];
    for (let index = records.length - 1; index >= 0 && found.length < limit; index -= 1) {
      const record = records[index]!;
      if ((before === undefined || record.seq < before) && keep(record)) found.push(record);
    }
    return found;
  }

  async head(): Promise<AuditHead | undefined> {
    return this.headFile.read(true)[0];
  }

  async close(): Promise<void> {}
}
