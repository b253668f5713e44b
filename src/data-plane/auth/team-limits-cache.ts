import type { TeamRecord } from '../../core/limits.ts';
import type { TeamStore } from '../../stores/teams/team-store.ts';

interface Entry {
  /** Undefined when no team has the name (remembered too, so an orphaned key costs no read per request). */
  readonly team: TeamRecord | undefined;
  readonly readAt: number;
  readonly revision: number | undefined;
}

export interface TeamLimitsCacheOptions {
  /** How long a team read from the store is trusted (5 s); it is read again in the background after half of it. */
  readonly trustMs: number;
  /** Most teams remembered; when full, the one read longest ago is forgotten. */
  readonly maxEntries?: number;
  /** Called when the store fails and a team read before is answered instead (the failure is not thrown). */
  readonly onStale?: (name: string, error: unknown) => void;
}

/**
 * Team name → its record, so that a key's team costs no store read per request: answered
 * synchronously while trusted (`trustMs`, or until the store's revision grows), read again in the
 * background once half of that has passed, so a PATCH reaches every instance within `trustMs` and a
 * busy team never waits. While the store fails, a team read before keeps its last state (limits
 * change rarely; refusing every key of the team would be worse); one never read fails.
 */
export class TeamLimitsCache {
  private readonly entries = new Map<string, Entry>();
  private readonly loading = new Map<string, Promise<TeamRecord | undefined>>();

  constructor(
    private readonly store: TeamStore,
    private readonly options: TeamLimitsCacheOptions,
  ) {}

  /** The team (synchronously while trusted), a promise of it when the store must be read, undefined when none has the name. */
  get(name: string): TeamRecord | undefined | Promise<TeamRecord | undefined> {
    const entry = this.entries.get(name);
    if (entry && entry.revision === this.store.revision) {
      const age = Date.now() - entry.readAt;
      if (age < this.options.trustMs) {
        if (age >= this.options.trustMs / 2 && !this.loading.has(name)) this.refresh(name).catch(() => {});
        return entry.team;
      }
    }
    return this.loading.get(name) ?? this.refresh(name);
  }

  private refresh(name: string): Promise<TeamRecord | undefined> {
    const readAt = Date.now();
    const revision = this.store.revision;
    const loaded = this.store.get(name).then(
      (team) => {
        this.loading.delete(name);
        this.remember(name, { team, readAt, revision });
        return team;
      },
      (error: unknown) => {
        this.loading.delete(name);
        const last = this.entries.get(name);
        if (!last) throw error;
        this.options.onStale?.(name, error);
        // Trusted for another while, so a store that is away is not asked on every request.
        this.remember(name, { team: last.team, readAt: Date.now(), revision: this.store.revision });
        return last.team;
      },
    );
    this.loading.set(name, loaded);
    return loaded;
  }

  private remember(name: string, entry: Entry): void {
    this.entries.delete(name);
    if (this.entries.size >= (this.options.maxEntries ?? 10_000)) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(name, entry);
  }
}
