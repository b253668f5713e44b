import { conflict } from '../../core/gateway-errors.ts';
import type { TeamInput, TeamRecord } from '../../core/limits.ts';
import { LockedJsonFile } from '../locked-json-file.ts';
import { applyTeamChanges, newTeamRecord } from './team-records.ts';
import type { TeamChanges, TeamStore } from './team-store.ts';

/**
 * Teams in `<dataDir>/teams.json`, for a gateway without Redis. A running server re-reads the file
 * when it changes (checked at most every `recheckMs`, 250 ms by default), so teams changed with the
 * CLI apply without a restart; writes are locked and atomic (see {@link LockedJsonFile}).
 */
export class FileTeamStore implements TeamStore {
  private readonly file: LockedJsonFile<TeamRecord>;

  constructor(dataDir: string, recheckMs = 250) {
    this.file = new LockedJsonFile<TeamRecord>(dataDir, 'teams.json', 'teams', recheckMs);
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
      if (teams.some((team) => team.name === record.name)) throw conflict(`A team named '${record.name}' exists already`);
      return [...teams, record];
    });
    return record;
  }

  async list(): Promise<TeamRecord[]> {
    return [...this.file.read(true)];
  }

  /** Looks at the file each time (one stat): callers cache in front of it (the authenticator for seconds). */
  async get(name: string): Promise<TeamRecord | undefined> {
    return this.file.read(true).find((team) => team.name === name);
  }

  async update(name: string, changes: TeamChanges): Promise<TeamRecord | undefined> {
    let updated: TeamRecord | undefined;
    await this.file.write((teams) => {
      const index = teams.findIndex((team) => team.name === name);
      if (index < 0) return undefined;
      const changed = applyTeamChanges(teams[index]!, changes);
      updated = changed;
      return teams.map((team, at) => (at === index ? changed : team));
    });
    return updated;
  }

  async remove(name: string): Promise<boolean> {
    let found = false;
    await this.file.write((teams) => {
      found = teams.some((team) => team.name === name);
      return found ? teams.filter((team) => team.name !== name) : undefined;
    });
    return found;
  }

  async close(): Promise<void> {}
}
