import type { GroupInput, GroupRecord } from '../../core/limits.ts';
import { FileNamedRecordStore } from '../named-records/file-named-record-store.ts';
import { GROUP_KIND } from './group-records.ts';
import type { GroupChanges, GroupStore } from './group-store.ts';

/** Budget groups in `<dataDir>/groups.json`, for a gateway without Redis (see {@link FileNamedRecordStore}). */
export class FileGroupStore extends FileNamedRecordStore<GroupRecord, GroupInput, GroupChanges> implements GroupStore {
  constructor(dataDir: string, recheckMs = 250) {
    super(dataDir, GROUP_KIND, { file: 'groups.json', field: 'groups' }, recheckMs);
  }
}
