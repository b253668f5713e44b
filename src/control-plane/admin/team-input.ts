import * as yup from 'yup';
import { fieldError, validationError } from '../../core/gateway-errors.ts';
import type { TeamInput } from '../../core/limits.ts';
import { TEAM_NAME, TEAM_NAME_RULE } from '../../core/team-name.ts';
import type { TeamChanges } from '../../stores/teams/team-store.ts';
import {
  alertList,
  cacheSetting,
  definedOnly,
  guardrailList,
  knownFields,
  moneyBudget,
  positiveInteger,
  tokenQuota,
  unknownGuardrails,
} from './limit-fields.ts';

// The fields a PATCH may set or remove: the limits and the cache setting.
const CHANGEABLE_FIELDS = ['rpm', 'tpm', 'quota', 'budget', 'concurrency', 'cache', 'guardrails', 'alerts'] as const;

const newTeamSchema = knownFields(
  yup
    .object({
      name: yup
        .string()
        .strict()
        .typeError('must be a string')
        .required('is required')
        .matches(TEAM_NAME, TEAM_NAME_RULE),
      rpm: positiveInteger(),
      tpm: positiveInteger(),
      quota: tokenQuota(),
      budget: moneyBudget(),
      concurrency: positiveInteger(),
      cache: cacheSetting(),
      guardrails: guardrailList(),
      alerts: alertList(),
    })
    .strict(),
  ['name', ...CHANGEABLE_FIELDS],
);

const teamChangesSchema = knownFields(
  yup
    .object({
      rpm: positiveInteger().nullable(),
      tpm: positiveInteger().nullable(),
      quota: tokenQuota().nullable(),
      budget: moneyBudget().nullable(),
      concurrency: positiveInteger().nullable(),
      cache: cacheSetting().nullable(),
      guardrails: guardrailList().nullable(),
      alerts: alertList().nullable(),
    })
    .strict(),
  CHANGEABLE_FIELDS,
  { name: `cannot be changed: a team keeps its name (the fields a change sets are ${CHANGEABLE_FIELDS.join(', ')})` },
);

/** How an error names a field (the CLI names its flags); the body's field path by default. */
export type FieldLabel = (path: string) => string;

/**
 * The body through the schema, and its `guardrails` against the configured ones (when known): one 400 listing every
 * problem.
 */
function validate<T>(
  schema: yup.Schema<T>,
  body: unknown,
  label: FieldLabel = (path) => path,
  knownGuardrails?: readonly string[],
): T {
  const errors = unknownGuardrails(
    (body as { guardrails?: unknown } | null)?.guardrails,
    knownGuardrails,
    label('guardrails'),
  );
  let value: T | undefined;
  try {
    value = schema.validateSync(body, { abortEarly: false });
  } catch (error) {
    if (!(error instanceof yup.ValidationError)) throw error;
    errors.unshift(...error.inner.map((problem) => fieldError(label(problem.path || 'body'), problem.message)));
  }
  if (errors.length > 0) throw validationError(errors);
  return value!;
}

/**
 * A new team from the admin API's body (or the CLI's flags): `name` and optionally `rpm`, `tpm`,
 * `quota` ({daily, monthly}), `budget` ({daily_usd, monthly_usd}), `concurrency`, `cache` (a boolean; `false`
 * keeps the team's requests out of the response cache) and `guardrails` (names of configured guardrails its keys get;
 * `[]`: none), checked against `knownGuardrails` when given. Throws the 400 listing every bad field.
 */
export function parseNewTeam(body: unknown, label?: FieldLabel, knownGuardrails?: readonly string[]): TeamInput {
  const value = validate(newTeamSchema, body, label, knownGuardrails);
  return definedOnly({
    name: value.name,
    rpm: value.rpm,
    tpm: value.tpm,
    quota: value.quota,
    budget: value.budget,
    concurrency: value.concurrency,
    cache: value.cache,
    guardrails: value.guardrails,
    alerts: value.alerts,
  });
}

/**
 * A PATCH of a team: each of `rpm`, `tpm`, `quota`, `budget`, `concurrency`, `cache` and `guardrails` set (an object
 * replaces the whole limit), `null` to remove it (`cache: null`: the gateway's setting again), or absent to keep it.
 * Throws the 400 listing every bad field.
 */
export function parseTeamChanges(body: unknown, label?: FieldLabel, knownGuardrails?: readonly string[]): TeamChanges {
  validate(teamChangesSchema, body, label, knownGuardrails);
  const given = body as Record<string, unknown>;
  return Object.fromEntries(
    CHANGEABLE_FIELDS.filter((field) => Object.hasOwn(given, field)).map((field) => [field, given[field]]),
  ) as TeamChanges;
}
