import type { MoneyBudget, TokenQuota } from '../core/limits.ts';
import { END_USER_FLAGS } from './end-user-flags.ts';

/** The flag of each limit's field, for the error messages of keys, teams and groups alike. */
export const LIMIT_FLAGS: Record<string, string> = {
  'quota.daily': '--daily-tokens',
  'quota.monthly': '--monthly-tokens',
  quota: '--daily-tokens/--monthly-tokens',
  'budget.daily_usd': '--daily-usd',
  'budget.monthly_usd': '--monthly-usd',
  budget: '--daily-usd/--monthly-usd',
  ...END_USER_FLAGS,
};

/** A flag's number as given (`NaN` when it is not one), so that validation names the flag's field. */
export const numberOf = (value: string | undefined) =>
  value === undefined ? undefined : value.trim() === '' ? Number.NaN : Number(value);

/** A flag's `true` or `false` as a boolean; anything else as given, so that validation names the flag's field. */
export const booleanOf = (value: string | undefined) => (value === 'true' ? true : value === 'false' ? false : value);

/** Comma-separated percents (`''`: an empty list); a part that is no number stays as given, for validation to name. */
export const percentsOf = (value: string): unknown[] =>
  namesOf(value).map((part) => (/^\d+$/.test(part) ? Number(part) : part));

/** A comma-separated list of names (`''`: an empty list). */
export const namesOf = (value: string) =>
  value
    .split(',')
    .map((name) => name.trim())
    .filter(Boolean);

/** `{daily?, monthly?}`-like object of the flags given, or undefined when neither is. */
export function pairOf<K extends string>(
  daily: [K, number | undefined],
  monthly: [K, number | undefined],
): Partial<Record<K, number>> | undefined {
  if (daily[1] === undefined && monthly[1] === undefined) return undefined;
  return {
    ...(daily[1] !== undefined && { [daily[0]]: daily[1] }),
    ...(monthly[1] !== undefined && { [monthly[0]]: monthly[1] }),
  } as Partial<Record<K, number>>;
}

/** The side flags of `quota` and `budget`, as `parseArgs` options. */
export const SIDE_OPTIONS = {
  'daily-tokens': { type: 'string' },
  'monthly-tokens': { type: 'string' },
  'daily-usd': { type: 'string' },
  'monthly-usd': { type: 'string' },
} as const;

/** Each side flag's place in `quota` or `budget`. */
export const SIDES = {
  'daily-tokens': ['quota', 'daily'],
  'monthly-tokens': ['quota', 'monthly'],
  'daily-usd': ['budget', 'daily_usd'],
  'monthly-usd': ['budget', 'monthly_usd'],
} as const;
export type SideFlag = keyof typeof SIDES;

/** The side flags of `quota` or `budget`. */
export const sidesOf = (field: string) => (Object.keys(SIDES) as SideFlag[]).filter((flag) => SIDES[flag][0] === field);

// A record's, or an admin answer's (where an unset limit is null).
interface QuotaAndBudget {
  readonly quota?: TokenQuota | null;
  readonly budget?: MoneyBudget | null;
}

/**
 * `quota` and `budget` of a PATCH the flags make: a side given (`--daily-usd`) or cleared
 * (`--clear monthly-tokens`) changes that side only, keeping the other as `current` has it; a limit cleared, or
 * left with neither side, is null; one no flag touches is absent.
 */
export function quotaAndBudgetChanges(
  values: Partial<Record<SideFlag, string>>,
  cleared: ReadonlySet<string>,
  current: QuotaAndBudget,
): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  for (const field of ['quota', 'budget'] as const) {
    const sides = sidesOf(field);
    if (!cleared.has(field) && !sides.some((flag) => cleared.has(flag) || values[flag] !== undefined)) continue;
    const merged: Record<string, unknown> = cleared.has(field) ? {} : { ...current[field] };
    for (const flag of sides) {
      if (cleared.has(flag)) delete merged[SIDES[flag][1]];
      else if (values[flag] !== undefined) merged[SIDES[flag][1]] = numberOf(values[flag]);
    }
    body[field] = Object.keys(merged).length ? merged : null;
  }
  return body;
}

/** `quota` and `budget` in words, each side set, for the CLI's messages. */
export function describeQuotaAndBudget(limits: QuotaAndBudget): string[] {
  return [
    limits.quota?.daily !== undefined && `${limits.quota.daily} tokens a day`,
    limits.quota?.monthly !== undefined && `${limits.quota.monthly} tokens a month`,
    limits.budget?.daily_usd !== undefined && `$${limits.budget.daily_usd} a day`,
    limits.budget?.monthly_usd !== undefined && `$${limits.budget.monthly_usd} a month`,
  ].filter((part): part is string => part !== false);
}

/** The side flags' columns of a CLI table (`-` for a side not set). */
export function quotaAndBudgetCells(limits: QuotaAndBudget): Record<SideFlag, number | string> {
  return {
    'daily-tokens': limits.quota?.daily ?? '-',
    'monthly-tokens': limits.quota?.monthly ?? '-',
    'daily-usd': limits.budget?.daily_usd ?? '-',
    'monthly-usd': limits.budget?.monthly_usd ?? '-',
  };
}
