import { conflict } from '../../core/gateway-errors.ts';
import { LockedJsonFile } from '../locked-json-file.ts';
import type { DeletedRecord, NamedRecord, NamedRecordKind } from './named-record-kind.ts';

/** The files a file store keeps its records in, under the data directory. */
export interface NamedRecordFiles {
  /** The records, as `{"<field>": [...]}` in `<dataDir>/<file>`. */
  readonly file: string;
  readonly field: string;
  /** Where the id of the last removed record of each name is kept, as `{"deleted": [...]}`; none when absent. */
  readonly deletedFile?: string;
}

/**
 * Named records in a JSON file of the data directory, for a gateway without Redis. A running server re-reads
 * the file when it changes (checked at most every `recheckMs`, 250 ms by default), so records changed with the
 * CLI apply without a restart; writes are locked and atomic (see {@link LockedJsonFile}).
 */
export class FileNamedRecordStore<R extends NamedRecord & S, I, C, S extends { readonly name: string } = R> {
  private readonly file: LockedJsonFile<S>;
  private readonly deleted: LockedJsonFile<DeletedRecord> | undefined;

  constructor(
    dataDir: string,
    private readonly kind: NamedRecordKind<R, I, C, S>,
    files: NamedRecordFiles,
    recheckMs = 250,
  ) {
    this.file = new LockedJsonFile<S>(dataDir, files.file, files.field, recheckMs);
    this.deleted = files.deletedFile
      ? new LockedJsonFile<DeletedRecord>(dataDir, files.deletedFile, 'deleted', recheckMs)
      : undefined;
  }

  get path(): string {
    return this.file.path;
  }

  get revision(): number {
    return this.file.revision;
  }

  async create(input: I): Promise<R> {
    const record = this.kind.newRecord(input);
    await this.file.write((records) => {
      if (records.some((stored) => stored.name === record.name))
        throw conflict(`A ${this.kind.noun} named '${record.name}' exists already`);
      return [...records, record];
    });
    return record;
  }

  async list(): Promise<R[]> {
    return this.file.read(true).map((stored) => this.kind.fromStored(stored));
  }

  /** Looks at the file each time (one stat): callers cache in front of it (the authenticator for seconds). */
  async get(name: string): Promise<R | undefined> {
    const found = this.file.read(true).find((stored) => stored.name === name);
    return found && this.kind.fromStored(found);
  }

  async update(name: string, changes: C): Promise<R | undefined> {
    let updated: R | undefined;
    await this.file.write((records) => {
      const index = records.findIndex((stored) => stored.name === name);
      if (index < 0) return undefined;
      const changed = this.kind.applyChanges(this.kind.fromStored(records[index]!), changes);
      updated = changed;
      return records.map((stored, at) => (at === index ? changed : stored));
    });
    return updated;
  }

  async remove(name: string): Promise<boolean> {
    let removed: R | undefined;
    await this.file.write((records) => {
      const found = records.find((stored) => stored.name === name);
      removed = found && this.kind.fromStored(found);
      return found ? records.filter((stored) => stored !== found) : undefined;
    });
    if (!removed) return false;
    if (this.deleted) {
      const gone: DeletedRecord = { name, id: removed.id, deletedAt: new Date().toISOString() };
      await this.deleted.write((deleted) => [...deleted.filter((record) => record.name !== name), gone]);
    }
    return true;
  }

  async close(): Promise<void> {}

  /** The id of the last removed record of that name, when the store keeps them (undefined when none was). */
  protected async deletedIdOf(name: string): Promise<string | undefined> {
    return this.deleted?.read(true).find((record) => record.name === name)?.id;
  }
}
