import type { EndUserLimits } from '../core/limits.ts';

/** The `--end-user-*` flags of `keys` and `teams`: the limits each end user gets (`end_user`). */
export const END_USER_OPTIONS = {
  'end-user-rpm': { type: 'string' },
  'end-user-tpm': { type: 'string' },
  'end-user-daily-tokens': { type: 'string' },
  'end-user-monthly-tokens': { type: 'string' },
  'end-user-daily-usd': { type: 'string' },
  'end-user-monthly-usd': { type: 'string' },
} as const;

export type EndUserFlag = keyof typeof END_USER_OPTIONS;
type EndUserValues = Partial<Record<EndUserFlag, string>>;

export const END_USER_SYNOPSIS =
  '[--end-user-rpm N] [--end-user-tpm N] [--end-user-daily-tokens N] [--end-user-monthly-tokens N] ' +
  '[--end-user-daily-usd X] [--end-user-monthly-usd Y]';

/** Each flag's place in `end_user`: a limit, or one side of its `quota` / `budget`. */
const PLACE_OF: Record<EndUserFlag, readonly [field: keyof EndUserLimits, side?: string]> = {
  'end-user-rpm': ['rpm'],
  'end-user-tpm': ['tpm'],
  'end-user-daily-tokens': ['quota', 'daily'],
  'end-user-monthly-tokens': ['quota', 'monthly'],
  'end-user-daily-usd': ['budget', 'daily_usd'],
  'end-user-monthly-usd': ['budget', 'monthly_usd'],
};

/** What `--clear` takes of `end_user`: the whole of it, or one flag's limit. */
export const END_USER_CLEARABLE = ['end-user', ...Object.keys(PLACE_OF)] as const;

/** The flag of each `end_user` field, for error messages. */
export const END_USER_FLAGS: Record<string, string> = {
  end_user: '--end-user-*',
  'end_user.quota': '--end-user-daily-tokens/--end-user-monthly-tokens',
  'end_user.budget': '--end-user-daily-usd/--end-user-monthly-usd',
  ...Object.fromEntries(Object.entries(PLACE_OF).map(([flag, place]) => [`end_user.${place.join('.')}`, `--${flag}`])),
};

/** A flag's number as given (`NaN` when it is not one), so that validation names the flag's field. */
const numberOf = (value: string) => (value.trim() === '' ? Number.NaN : Number(value));

/** `end_user` as the flags give it, or undefined when none is given. */
export function endUserOfFlags(values: EndUserValues): Record<string, unknown> | undefined {
  return endUserChangeOf(values, new Set(), undefined) ?? undefined;
}

/**
 * `end_user` of a change: the current limits with the flags given set and those cleared removed (a
 * `quota` or `budget` left with neither side goes); null when nothing is left, undefined when no flag
 * touches it.
 */
export function endUserChangeOf(
  values: EndUserValues,
  cleared: ReadonlySet<string>,
  current: EndUserLimits | undefined,
): Record<string, unknown> | null | undefined {
  const flags = Object.keys(PLACE_OF) as EndUserFlag[];
  if (!cleared.has('end-user') && !flags.some((flag) => cleared.has(flag) || values[flag] !== undefined))
    return undefined;
  const merged: Record<string, unknown> = cleared.has('end-user') ? {} : structuredClone({ ...current });
  for (const flag of flags) {
    const [field, side] = PLACE_OF[flag];
    const given = values[flag];
    if (!cleared.has(flag) && given === undefined) continue;
    if (!side) {
      if (given === undefined) delete merged[field];
      else merged[field] = numberOf(given);
      continue;
    }
    const pair: Record<string, unknown> = { ...(merged[field] as object | undefined) };
    if (given === undefined) delete pair[side];
    else pair[side] = numberOf(given);
    if (Object.keys(pair).length) merged[field] = pair;
    else delete merged[field];
  }
  return Object.keys(merged).length ? merged : null;
}

/** The flag given alongside `--clear <field>` that contradicts it, if any. */
export function endUserContradiction(field: string, values: EndUserValues): string | undefined {
  const flags = Object.keys(PLACE_OF) as EndUserFlag[];
  return flags.find((flag) => values[flag] !== undefined && (field === 'end-user' || field === flag));
}

/** The end-user limits in words, for the CLI's messages and tables (`-` when none). */
export function describeEndUser(limits: EndUserLimits | undefined): string {
  if (!limits) return '-';
  const parts = [
    limits.rpm !== undefined && `rpm ${limits.rpm}`,
    limits.tpm !== undefined && `tpm ${limits.tpm}`,
    limits.quota?.daily !== undefined && `${limits.quota.daily} tokens a day`,
    limits.quota?.monthly !== undefined && `${limits.quota.monthly} tokens a month`,
    limits.budget?.daily_usd !== undefined && `$${limits.budget.daily_usd} a day`,
    limits.budget?.monthly_usd !== undefined && `$${limits.budget.monthly_usd} a month`,
  ].filter(Boolean);
  return parts.join(', ') || '-';
}
