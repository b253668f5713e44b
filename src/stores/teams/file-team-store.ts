import { conflict } from '../../core/gateway-errors.ts';
import type { TeamInput, TeamRecord } from '../../core/limits.ts';
import { withTeamId, type StoredTeam } from '../../core/team-identity.ts';
import { LockedJsonFile } from '../locked-json-file.ts';
import { applyTeamChanges, newTeamRecord, type DeletedTeam } from './team-records.ts';
import type { TeamChanges, TeamStore } from './team-store.ts';

/**
 * Teams in `<dataDir>/teams.json`, for a gateway without Redis. A running server re-reads the file
 * when it changes (checked at most every `recheckMs`, 250 ms by default), so teams changed with the
 * CLI apply without a restart; writes are locked and atomic (see {@link LockedJsonFile}). The id of the
 * last deleted team of each name is kept in `<dataDir>/deleted-teams.json`, written on the first delete.
 */
export class FileTeamStore implements TeamStore {
  private readonly file: LockedJsonFile<StoredTeam>;
  private readonly deleted: LockedJsonFile<DeletedTeam>;

  constructor(dataDir: string, recheckMs = 250) {
    this.file = new LockedJsonFile<StoredTeam>(dataDir, 'teams.json', 'teams', recheckMs);
    this.deleted = new LockedJsonFile<DeletedTeam>(dataDir, 'deleted-teams.json', 'deleted', recheckMs);
  }

  get path(): string {
    return this.file.path;
  }

  get revision(): number {
    return this.file.revision;
  }

  async create(input: TeamInput): Promise<TeamRecord> {
    const record = newTeamRecord(input);
    await this.file.write((teams) => {
      if (teams.some((team) => team.name === record.name))
        throw conflict(`A team named '${record.name}' exists already`);
      return [...teams, record];
    });
    return record;
  }

  async list(): Promise<TeamRecord[]> {
    return this.file.read(true).map(withTeamId);
  }

  /** Looks at the file each time (one stat): callers cache in front of it (the authenticator for seconds). */
  async get(name: string): Promise<TeamRecord | undefined> {
    const found = this.file.read(true).find((team) => team.name === name);
    return found && withTeamId(found);
  }

  async update(name: string, changes: TeamChanges): Promise<TeamRecord | undefined> {
    let updated: TeamRecord | undefined;
    await this.file.write((teams) => {
      const index = teams.findIndex((team) => team.name === name);
      if (index < 0) return undefined;
      const changed = applyTeamChanges(withTeamId(teams[index]!), changes);
      updated = changed;
      return teams.map((team, at) => (at === index ? changed : team));
    });
    return updated;
  }

  async remove(name: string): Promise<boolean> {
    let removed: TeamRecord | undefined;
    await this.file.write((teams) => {
      const found = teams.find((team) => team.name === name);
      removed = found && withTeamId(found);
      return found ? teams.filter((team) => team !== found) : undefined;
    });
    if (!removed) return false;
    const gone: DeletedTeam = { name, id: removed.id, deletedAt: new Date().toISOString() };
    await this.deleted.write((teams) => [...teams.filter((team) => team.name !== name), gone]);
    return true;
  }

  async deletedId(name: string): Promise<string | undefined> {
    return this.deleted.read(true).find((team) => team.name === name)?.id;
  }

  async close(): Promise<void> {}
}
