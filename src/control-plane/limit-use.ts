import type { RequestHandler } from 'express';
import { keyStatus, type ApiKeyRecord } from '../core/api-keys.ts';
import { serviceUnavailable } from '../core/gateway-errors.ts';
import type { KeyStore } from '../stores/keys/key-store.ts';
import type { TeamStore } from '../stores/teams/team-store.ts';
import type { Limits, LimitPeriod, Meter, MoneyBudget, RateSettings, TeamRecord, TokenQuota } from '../core/limits.ts';
import type { LimitLedger } from '../usage/limit-ledger.ts';
import { metersOfLimits, requestMeter } from '../usage/limit-meters.ts';
import { keyInTeam } from '../core/team-identity.ts';

/** One request, token or money limit and its use in the window open now. */
export interface LimitUse {
  readonly kind: Meter['kind'];
  readonly period: LimitPeriod;
  /** `requests` for `rpm`, `tokens` (integers) for `tpm` and `quota`, `usd` for `budget`. */
  readonly unit: 'requests' | 'tokens' | 'usd';
  readonly limit: number;
  /** Null when no ledger counts use (the view then shows the limits only). */
  readonly used: number | null;
  /** What is left of the limit (never below 0: settlement may overshoot it); null as `used`. */
  readonly remaining: number | null;
  /** When the window ends and the counter starts again from 0 (ISO date-time). */
  readonly resets_at: string;
}

/** The limits an owner carries as configured (null: off; a key's null `rpm` means the gateway's default). */
export interface LimitSettings {
  readonly rpm: number | null;
  readonly tpm: number | null;
  readonly quota: TokenQuota | null;
  readonly budget: MoneyBudget | null;
}

export interface KeyLimitView extends LimitSettings {
  readonly id: string;
  readonly name: string;
  readonly status: 'active' | 'expired';
  /** The team whose limits the key shares as well; null when none. */
  readonly team: string | null;
  /**
   * The key's limits, in the order rpm (always: its own `rpm` or the gateway's default), tpm, daily and
   * monthly quota, daily and monthly budget.
   */
  readonly use: readonly LimitUse[];
}

export interface TeamLimitView extends LimitSettings {
  readonly name: string;
  /** The ids of the (non-revoked) keys naming the team. */
  readonly key_ids: readonly string[];
  /** The team's response cache setting as set (not a limit: shown beside them); null when unset. */
  readonly cache: boolean | null;
  /** The team's limits, in the key's order; rpm only when the team has one. */
  readonly use: readonly LimitUse[];
}

/** `GET /account/api/limits`: every non-revoked key and every team with its limits and their use now. */
export interface LimitUseView {
  readonly object: 'limits';
  /** False when no ledger is given: limits are listed, `used` and `remaining` are null. */
  readonly metered: boolean;
  readonly generated_at: string;
  readonly keys: readonly KeyLimitView[];
  readonly teams: readonly TeamLimitView[];
}

export interface LimitUseInput {
  readonly keys: readonly ApiKeyRecord[];
  readonly teams: readonly TeamRecord[];
  /** Where the counters are read; without it no use is shown. */
  readonly ledger?: Pick<LimitLedger, 'peek'>;
  /**
   * The request limit in force (`config.rateLimit`): a key without an `rpm` of its own has `max`; the gateway's default
   * when absent.
   */
  readonly rate?: RateSettings;
  /** Epoch ms. */
  readonly now: number;
}

/** The gateway's request limit when none is configured (`config.rateLimit`'s defaults). */
export const DEFAULT_RATE: RateSettings = { max: 100, windowMs: 60_000 };

const UNIT = { rpm: 'requests', tpm: 'tokens', quota: 'tokens', budget: 'usd' } as const;

const nanoToUsd = (nano: number): number => Math.round(nano) / 1e9;

function settings(limits: Limits): LimitSettings {
  return {
    rpm: limits.rpm ?? null,
    tpm: limits.tpm ?? null,
    quota: limits.quota ?? null,
    budget: limits.budget ?? null,
  };
}

function limitUse(meter: Meter, value: number | undefined): LimitUse {
  const money = meter.kind === 'budget';
  const convert = money ? nanoToUsd : Math.round;
  return {
    kind: meter.kind,
    period: meter.period,
    unit: UNIT[meter.kind],
    limit: convert(meter.limit),
    used: value === undefined ? null : convert(value),
    remaining: value === undefined ? null : convert(Math.max(0, meter.limit - value)),
    resets_at: new Date(meter.resetAt).toISOString(),
  };
}

/**
 * The limits of every non-revoked key (expired ones included, marked so) and every team, each request,
 * token and money limit with its use in the window open at `now`, read with one `peek` of every counter
 * (the request counters are the rate limiter's: {@link requestMeter}). Money is in USD (the counters hold
 * nano-USD), tokens and requests are integers. Keys come by name, teams by name.
 */
export async function limitUseView(input: LimitUseInput): Promise<LimitUseView> {
  const keys = input.keys
    .filter((key) => !key.revoked)
    .sort((a, b) => a.name.localeCompare(b.name) || a.id.localeCompare(b.id));
  const teams = [...input.teams].sort((a, b) => a.name.localeCompare(b.name));
  const rate = input.rate ?? DEFAULT_RATE;
  const keyMeters = keys.map((key) => [
    requestMeter('key', key.id, key.rpm ?? rate.max, rate.windowMs, input.now),
    ...metersOfLimits('key', key.id, key, input.now),
  ]);
  const teamMeters = teams.map((team) => [
    ...(team.rpm === undefined ? [] : [requestMeter('team', team.name, team.rpm, rate.windowMs, input.now, team.id)]),
    ...metersOfLimits('team', team.name, team, input.now, team.id),
  ]);
  const counters = [...keyMeters, ...teamMeters].flat().map((meter) => meter.counter);
  const values = input.ledger && counters.length > 0 ? await input.ledger.peek(counters) : [];
  const valueOf = new Map(counters.map((counter, index) => [counter, values[index]]));
  const useOf = (meters: Meter[]) =>
    meters.map((meter) => limitUse(meter, input.ledger ? (valueOf.get(meter.counter) ?? 0) : undefined));
  return {
    object: 'limits',
    metered: input.ledger !== undefined,
    generated_at: new Date(input.now).toISOString(),
    keys: keys.map((key, index) => ({
      id: key.id,
      name: key.name,
      status: keyStatus(key, input.now) === 'expired' ? 'expired' : 'active',
      team: key.team ?? null,
      ...settings(key),
      use: useOf(keyMeters[index]!),
    })),
    teams: teams.map((team, index) => ({
      name: team.name,
      key_ids: keys.filter((key) => keyInTeam(key, team)).map((key) => key.id),
      ...settings(team),
      cache: team.cache ?? null,
      use: useOf(teamMeters[index]!),
    })),
  };
}

export interface LimitsRouteOptions {
  readonly keys: Pick<KeyStore, 'list'>;
  /** The teams listed; none when absent. */
  readonly teams?: Pick<TeamStore, 'list'>;
  /** Where use is read; without it the limits are listed with no use figures. */
  readonly limits?: Pick<LimitLedger, 'peek'>;
  /** The request limit in force, read per request (a reload changes it); the gateway's default when absent. */
  readonly rate?: () => RateSettings;
  readonly now?: () => number;
}

/**
 * `GET /limits` behind whatever guard mounts it (the admin token at `/admin/limits`, the account
 * page's session at `/account/api/limits`): {@link limitUseView} of every key and team, or a 503 when a
 * store or the counters cannot be read.
 */
export function limitsRoute(options: LimitsRouteOptions): RequestHandler {
  return async (_req, res) => {
    let view: LimitUseView;
    try {
      const [keys, teams] = await Promise.all([options.keys.list(), options.teams?.list() ?? []]);
      view = await limitUseView({
        keys,
        teams,
        ledger: options.limits,
        rate: options.rate?.(),
        now: (options.now ?? Date.now)(),
      });
    } catch (error) {
      throw serviceUnavailable(
        'Limits cannot be read right now (a store or the limit counters are unreachable); please retry shortly',
        error,
      );
    }
    res.json(view);
  };
}
