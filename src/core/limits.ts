/**
 * The limits a key or a team may carry, and the counters they are kept in. Every counted limit is a
 * fixed window aligned on UTC: the minute (`rpm`, `tpm`; `rpm` may be given another window), the day
 * and the month (`quota`, `budget`). `concurrency` is held, not counted (see `KeyConcurrency`).
 */

/** Charged-token quotas (see `charge` in `usage/usage-accounting.ts`) per UTC day and per UTC month. */
export interface TokenQuota {
  readonly daily?: number;
  readonly monthly?: number;
}

/** Money budgets in USD per UTC day and per UTC month, priced from the catalog's per-model prices. */
export interface MoneyBudget {
  readonly daily_usd?: number;
  readonly monthly_usd?: number;
}

/**
 * Limits of each end user of a key (or of a team's keys), one set of counters per end user: requests and
 * tokens per UTC minute, charged tokens and money per UTC day and month.
 */
export interface EndUserLimits {
  readonly rpm?: number;
  readonly tpm?: number;
  readonly quota?: TokenQuota;
  readonly budget?: MoneyBudget;
}

/** The per-end-user limits an owner (a key or a team) sets for each of its end users. */
export interface EndUserSetting {
  /** Absent: its end users are limited only by the owner's own limits. */
  readonly end_user?: EndUserLimits;
}

/** The limits one key or one team carries; each is off when absent. */
export interface Limits {
  /** Requests per rate-limit window (a UTC-aligned minute by default). */
  readonly rpm?: number;
  /** Requests in flight at once, per gateway instance. */
  readonly concurrency?: number;
  /** Tokens (input + output) per UTC minute. */
  readonly tpm?: number;
  readonly quota?: TokenQuota;
  readonly budget?: MoneyBudget;
}

/** Whether an owner's requests may use the response cache (not a limit: nothing is counted). */
export interface CacheSetting {
  /**
   * `false`: never read or written for the owner's requests. Absent or `true` (kept as set): the
   * gateway's setting applies.
   */
  readonly cache?: boolean;
}

/** Which guardrails an owner's requests get (not a limit: nothing is counted). */
export interface GuardrailSetting {
  /**
   * The names of the configured guardrails (`guardrails:` of the config file) the owner's requests get.
   * Absent: a key gets its team's, a team every configured one. `[]`: none.
   */
  readonly guardrails?: readonly string[];
}

/** At which percents of its money budgets and token quotas (day and month) an owner's limit alerts fire. */
export interface AlertSetting {
  /**
   * Percents, whole numbers from 1 to 100, sorted and unique; `[]`: none. Absent: the gateway's
   * (`GATEWAY_LIMIT_ALERTS`, default 50, 80 and 100).
   */
  readonly alerts?: readonly number[];
}

/** A team: a name keys can name, the limits its keys share, whether their answers are cached, and their guardrails. */
export interface TeamRecord extends Limits, CacheSetting, GuardrailSetting, EndUserSetting, AlertSetting {
  /**
   * Made when the team is created and never changed (see `core/team-identity.ts`): what its limit counters,
   * response cache entries and usage are kept under, so a team created later under the same name starts clean.
   */
  readonly id: string;
  /** Unique among the teams that exist, 1 to 64 characters of letters, digits, `.`, `_` and `-`. */
  readonly name: string;
  /** ISO date-time. */
  readonly createdAt: string;
  /** The name of the budget group the team's keys draw from (unless a key names its own). */
  readonly group?: string;
}

export type TeamInput = Omit<TeamRecord, 'id' | 'createdAt'>;

/** Every field of a team a change may set or remove (all but its id, name and creation time), in the order shown. */
export const TEAM_FIELDS = [
  'rpm',
  'tpm',
  'quota',
  'budget',
  'concurrency',
  'cache',
  'guardrails',
  'group',
  'end_user',
  'alerts',
] as const satisfies readonly (keyof TeamInput)[];

/**
 * A budget group: a named budget (tokens per minute, token quotas and money per day and month) that the
 * teams and keys naming it draw from together, besides their own limits.
 */
export interface GroupRecord {
  /** Made when the group is created and never changed: what its limit counters are kept under. */
  readonly id: string;
  /** Unique among the groups that exist, 1 to 64 characters of letters, digits, `.`, `_` and `-`. */
  readonly name: string;
  /** ISO date-time. */
  readonly createdAt: string;
  readonly tpm?: number;
  readonly quota?: TokenQuota;
  readonly budget?: MoneyBudget;
  /** Alert thresholds in percent of each budget and quota (see BUDGETS.md, helper ALERTS); absent: the gateway's. */
  readonly alerts?: readonly number[];
}

export type GroupInput = Omit<GroupRecord, 'id' | 'createdAt'>;

/** Every field of a group a change may set or remove, in the order shown. */
export const GROUP_FIELDS = ['tpm', 'quota', 'budget', 'alerts'] as const satisfies readonly (keyof GroupInput)[];

/** The limits of a group a request draws from, as the authenticator joins them (`CallerKey.group`). */
export type CallerGroup = Pick<GroupRecord, 'id' | 'name' | 'tpm' | 'quota' | 'budget' | 'alerts'>;

/** What a limit counts. */
export type LimitKind = 'rpm' | 'tpm' | 'quota' | 'budget';
/**
 * Whose limit it is: a key's, a team's, a budget group's, one end user's (of a key, or of a team's keys), or (the
 * public catalog's request rate) a client address's.
 */
export type LimitScope = 'key' | 'team' | 'group' | 'address' | 'end_user';
export type LimitPeriod = 'minute' | 'day' | 'month';

/** The gateway's request limit: `max` requests per `windowMs` (a key's or team's own `rpm` replaces `max`). */
export interface RateSettings {
  readonly max: number;
  readonly windowMs: number;
}

/**
 * One counter a request is measured against: a limit of a key or a team over a UTC window, in the
 * limit's unit (requests for `rpm`, tokens for `tpm`, charged tokens for `quota`, nano-USD for `budget`).
 */
export interface Meter {
  readonly scope: LimitScope;
  /**
   * The key id, the team or group name, the end user (the key id for a request that names none) or the client
   * address (what refusals and logs name).
   */
  readonly owner: string;
  /** An end user's meter: whose end-user limit it is (the key's id or the team's name). */
  readonly endUserOf?: { readonly scope: 'key' | 'team'; readonly owner: string };
  readonly kind: LimitKind;
  readonly period: LimitPeriod;
  readonly limit: number;
  /**
   * The counter's name, unique per owner, kind and window (e.g. `key:key_ab12:tpm:m:29410560`); a team's
   * and a group's counters carry their ids, not their names.
   */
  readonly counter: string;
  /** When the window ends (epoch ms): the counter expires then, and a refusal's Retry-After points there. */
  readonly resetAt: number;
  /** The alert thresholds of the meter's owner (percents); absent: the gateway's. */
  readonly alerts?: readonly number[];
}
