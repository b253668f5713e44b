import * as yup from 'yup';
import { fieldError, validationError } from '../../core/gateway-errors.ts';
import type { TeamInput } from '../../core/limits.ts';
import { TEAM_NAME, TEAM_NAME_RULE } from '../../core/team-name.ts';
import type { TeamChanges } from '../../stores/teams/team-store.ts';
import { groupName, unknownGroup } from './group-input.ts';
import {
  cacheSetting,
  definedOnly,
  endUserLimits,
  alertList,
  guardrailList,
  knownFields,
  moneyBudget,
  positiveInteger,
  tokenQuota,
  unknownGuardrails,
} from './limit-fields.ts';

// The fields a PATCH may set or remove: the limits, the cache setting, the guardrails, the budget group, the end
// users' limits and the alerts.
const CHANGEABLE_FIELDS = [
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
] as const;

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
      group: groupName(),
      end_user: endUserLimits(),
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
      group: groupName().nullable(),
      end_user: endUserLimits().nullable(),
      alerts: alertList().nullable(),
    })
    .strict(),
  CHANGEABLE_FIELDS,
  { name: `cannot be changed: a team keeps its name (the fields a change sets are ${CHANGEABLE_FIELDS.join(', ')})` },
);

/** How an error names a field (the CLI names its flags); the body's field path by default. */
export type FieldLabel = (path: string) => string;

/**
 * The body through the schema, its `guardrails` against the configured ones (when known) and its `group`
 * against the groups that exist: one 400 listing every problem.
 */
function validate<T>(
  schema: yup.Schema<T>,
  body: unknown,
  label: FieldLabel = (path) => path,
  knownGuardrails?: readonly string[],
  knownGroups?: ReadonlySet<string>,
): T {
  const given = body as { guardrails?: unknown; group?: unknown } | null;
  const errors = [
    ...unknownGuardrails(given?.guardrails, knownGuardrails, label('guardrails')),
    ...unknownGroup(given?.group, knownGroups, label('group')),
  ];
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
 * keeps the team's requests out of the response cache), `guardrails` (names of configured guardrails its keys get;
 * `[]`: none), checked against `knownGuardrails` when given, `group` (the budget group its keys draw from), one
 * of `knownGroups` (naming a group is refused without them), and `end_user` (the limits each end user of its keys
 * gets: `rpm`, `tpm`, `quota`, `budget`). Throws the 400 listing every bad field.
 */
export function parseNewTeam(
  body: unknown,
  label?: FieldLabel,
  knownGuardrails?: readonly string[],
  knownGroups?: ReadonlySet<string>,
): TeamInput {
  const value = validate(newTeamSchema, body, label, knownGuardrails, knownGroups);
  const { name, rpm, tpm, quota, budget, concurrency, cache, guardrails, group, end_user: endUser, alerts } = value;
  return definedOnly({
    name,
    rpm,
    tpm,
    quota,
    budget,
    concurrency,
    cache,
    guardrails,
    group,
    end_user: endUser,
    alerts,
  });
}

/**
 * A PATCH of a team: each of `rpm`, `tpm`, `quota`, `budget`, `concurrency`, `cache`, `guardrails`, `group`,
 * `end_user` and `alerts` set (an object replaces the whole limit), `null` to remove it (`cache: null`: the gateway's
 * setting again), or absent to keep it. Throws the 400 listing every bad field.
 */
export function parseTeamChanges(
  body: unknown,
  label?: FieldLabel,
  knownGuardrails?: readonly string[],
  knownGroups?: ReadonlySet<string>,
): TeamChanges {
  validate(teamChangesSchema, body, label, knownGuardrails, knownGroups);
  const given = body as Record<string, unknown>;
  return Object.fromEntries(
    CHANGEABLE_FIELDS.filter((field) => Object.hasOwn(given, field)).map((field) => [field, given[field]]),
  ) as TeamChanges;
}
