import type { TeamInput, TeamRecord } from '../../src/core/limits.ts';
import { withTeamId, type StoredTeam } from '../../src/core/team-identity.ts';
import type { TeamChanges, TeamStore } from '../../src/stores/teams/team-store.ts';

/**
 * Teams in a map, for tests of what reads teams (the file and Redis stores are tested on their own). They
 * are held without ids, as stores held teams before teams had ids: each reads with its name as its id,
 * so the counters a test looks for carry the team's name.
 */
export class MemoryTeamStore implements TeamStore {
  private readonly teams = new Map<string, StoredTeam>();
  private readonly deleted = new Map<string, string>();
  revision = 0;
  /** Makes `list` reject, as an unreachable store would. */
  failing = false;

  constructor(
    teams: readonly TeamInput[] = [],
    private readonly now = () => Date.now(),
  ) {
    for (const team of teams) this.teams.set(team.name, { ...team, createdAt: new Date(this.now()).toISOString() });
  }

  async create(input: TeamInput): Promise<TeamRecord> {
    if (this.teams.has(input.name)) throw new Error(`team ${input.name} exists`);
    const record = { ...input, createdAt: new Date(this.now()).toISOString() };
    this.teams.set(input.name, record);
    this.revision += 1;
    return withTeamId(record);
  }

  async list(): Promise<TeamRecord[]> {
    if (this.failing) throw new Error('team store unreachable');
    return [...this.teams.values()].map(withTeamId);
  }

  async get(name: string): Promise<TeamRecord | undefined> {
    const team = this.teams.get(name);
    return team && withTeamId(team);
  }

  async update(name: string, changes: TeamChanges): Promise<TeamRecord | undefined> {
    const team = this.teams.get(name);
    if (!team) return undefined;
    const next: Record<string, unknown> = { ...team };
    for (const [field, value] of Object.entries(changes)) {
      if (value === null) delete next[field];
      else if (value !== undefined) next[field] = value;
    }
    this.teams.set(name, next as unknown as StoredTeam);
    this.revision += 1;
    return withTeamId(next as unknown as StoredTeam);
  }

  async remove(name: string): Promise<boolean> {
    this.revision += 1;
    const team = this.teams.get(name);
    if (team) this.deleted.set(name, withTeamId(team).id);
    return this.teams.delete(name);
  }

  async deletedId(name: string): Promise<string | undefined> {
    return this.deleted.get(name);
  }

  async close(): Promise<void> {}
}
