import { conflict } from '../../core/gateway-errors.ts';
import type { GroupInput, GroupRecord } from '../../core/limits.ts';
import { LockedJsonFile } from '../locked-json-file.ts';
import { applyGroupChanges, newGroupRecord } from './group-records.ts';
import type { GroupChanges, GroupStore } from './group-store.ts';

/**
 * Budget groups in `<dataDir>/groups.json`, for a gateway without Redis. A running server re-reads the
 * file when it changes (checked at most every `recheckMs`, 250 ms by default), so groups changed with the
 * CLI apply without a restart; writes are locked and atomic (see {@link LockedJsonFile}).
 */
export class FileGroupStore implements GroupStore {
  private readonly file: LockedJsonFile<GroupRecord>;

  constructor(dataDir: string, recheckMs = 250) {
    this.file = new LockedJsonFile<GroupRecord>(dataDir, 'groups.json', 'groups', recheckMs);
  }

  get path(): string {
    return this.file.path;
  }

  get revision(): number {
    return this.file.revision;
  }

  async create(input: GroupInput): Promise<GroupRecord> {
    const record = newGroupRecord(input);
    await this.file.write((groups) => {
      if (groups.some((group) => group.name === record.name))
        throw conflict(`A group named '${record.name}' exists already`);
      return [...groups, record];
    });
    return record;
  }

  async list(): Promise<GroupRecord[]> {
    return [...this.file.read(true)];
  }

  /** Looks at the file each time (one stat): callers cache in front of it (the authenticator for seconds). */
  async get(name: string): Promise<GroupRecord | undefined> {
    return this.file.read(true).find((group) => group.name === name);
  }

  async update(name: string, changes: GroupChanges): Promise<GroupRecord | undefined> {
    let updated: GroupRecord | undefined;
    await this.file.write((groups) => {
      const index = groups.findIndex((group) => group.name === name);
      if (index < 0) return undefined;
      const changed = applyGroupChanges(groups[index]!, changes);
      updated = changed;
      return groups.map((group, at) => (at === index ? changed : group));
    });
    return updated;
  }

  async remove(name: string): Promise<boolean> {
    let removed = false;
    await this.file.write((groups) => {
      const kept = groups.filter((group) => group.name !== name);
      removed = kept.length < groups.length;
      return removed ? kept : undefined;
    });
    return removed;
  }

  async close(): Promise<void> {}
}
