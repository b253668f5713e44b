import * as yup from 'yup';
import { fieldError, validationError } from '../../core/gateway-errors.ts';
import type { TeamInput } from '../../core/limits.ts';
import { TEAM_NAME, TEAM_NAME_RULE } from '../../core/team-name.ts';
import type { TeamChanges } from '../../stores/teams/team-store.ts';
import { cacheSetting, definedOnly, moneyBudget, positiveInteger, tokenQuota } from './limit-fields.ts';

// The fields a PATCH may set or remove: the limits and the cache setting.
const CHANGEABLE_FIELDS = ['rpm', 'tpm', 'quota', 'budget', 'concurrency', 'cache'] as const;

const newTeamSchema = yup
  .object({
    name: yup.string().strict().typeError('must be a string').required('is required').matches(TEAM_NAME, TEAM_NAME_RULE),
    rpm: positiveInteger(),
    tpm: positiveInteger(),
    quota: tokenQuota(),
    budget: moneyBudget(),
    concurrency: positiveInteger(),
    cache: cacheSetting(),
  })
  .strict()
  .noUnknown('has unknown fields (name, rpm, tpm, quota, budget, concurrency, cache)');

const teamChangesSchema = yup
  .object({
    rpm: positiveInteger().nullable(),
    tpm: positiveInteger().nullable(),
    quota: tokenQuota().nullable(),
    budget: moneyBudget().nullable(),
    concurrency: positiveInteger().nullable(),
    cache: cacheSetting().nullable(),
  })
  .strict()
  .noUnknown('has unknown fields (rpm, tpm, quota, budget, concurrency, cache; the name cannot be changed)');

/** How an error names a field (the CLI names its flags); the body's field path by default. */
export type FieldLabel = (path: string) => string;

function validate<T>(schema: yup.Schema<T>, body: unknown, label: FieldLabel = (path) => path): T {
  try {
    return schema.validateSync(body, { abortEarly: false });
  } catch (error) {
    if (!(error instanceof yup.ValidationError)) throw error;
    throw validationError(error.inner.map((problem) => fieldError(label(problem.path || 'body'), problem.message)));
  }
}

/**
 * A new team from the admin API's body (or the CLI's flags): `name` and optionally `rpm`, `tpm`,
 * `quota` ({daily, monthly}), `budget` ({daily_usd, monthly_usd}), `concurrency` and `cache` (a boolean; `false`
 * keeps the team's requests out of the response cache). Throws the 400 listing every bad field.
 */
export function parseNewTeam(body: unknown, label?: FieldLabel): TeamInput {
  const value = validate(newTeamSchema, body, label);
  return definedOnly({ name: value.name, rpm: value.rpm, tpm: value.tpm, quota: value.quota, budget: value.budget, concurrency: value.concurrency, cache: value.cache });
}

/**
 * A PATCH of a team: each of `rpm`, `tpm`, `quota`, `budget`, `concurrency` and `cache` set (an object replaces
 * the whole limit), `null` to remove it (`cache: null`: the gateway's setting again), or absent to keep it. Throws
 * the 400 listing every bad field.
 */
export function parseTeamChanges(body: unknown, label?: FieldLabel): TeamChanges {
  validate(teamChangesSchema, body, label);
  const given = body as Record<string, unknown>;
  return Object.fromEntries(CHANGEABLE_FIELDS.filter((field) => Object.hasOwn(given, field)).map((field) => [field, given[field]])) as TeamChanges;
}
