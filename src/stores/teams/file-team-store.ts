import type { TeamInput, TeamRecord } from '../../core/limits.ts';
import type { StoredTeam } from '../../core/team-identity.ts';
import { FileNamedRecordStore } from '../named-records/file-named-record-store.ts';
import { TEAM_KIND } from './team-records.ts';
import type { TeamChanges, TeamStore } from './team-store.ts';

/**
 * Teams in `<dataDir>/teams.json`, for a gateway without Redis (see {@link FileNamedRecordStore}). The id of
 * the last deleted team of each name is kept in `<dataDir>/deleted-teams.json`, written on the first delete.
 */
export class FileTeamStore
  extends FileNamedRecordStore<TeamRecord, TeamInput, TeamChanges, StoredTeam>
  implements TeamStore
{
  constructor(dataDir: string, recheckMs = 250) {
    super(dataDir, TEAM_KIND, { file: 'teams.json', field: 'teams', deletedFile: 'deleted-teams.json' }, recheckMs);
  }

  async deletedId(name: string): Promise<string | undefined> {
    return this.deletedIdOf(name);
  }
}
