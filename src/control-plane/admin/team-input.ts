import * as yup from 'yup';
import type { TeamInput } from '../../core/limits.ts';
import { TEAM_NAME, TEAM_NAME_RULE } from '../../core/team-name.ts';
import type { TeamChanges } from '../../stores/teams/team-store.ts';
import { groupName, unknownGroup } from './group-input.ts';
import {
  cacheSetting,
  endUserLimits,
  alertList,
  guardrailList,
  moneyBudget,
  positiveInteger,
  tokenQuota,
  unknownGuardrails,
} from './limit-fields.ts';
import { changedFields, givenFields, namedRecordSchemas, validateBody, type FieldLabel } from './named-record-input.ts';

const { changeable: CHANGEABLE_FIELDS, ...schemas } = namedRecordSchemas(
  'team',
  { pattern: TEAM_NAME, rule: TEAM_NAME_RULE },
  {
    rpm: positiveInteger,
    tpm: positiveInteger,
    quota: tokenQuota,
    budget: moneyBudget,
    concurrency: positiveInteger,
    cache: cacheSetting,
    guardrails: guardrailList,
    group: groupName,
    end_user: endUserLimits,
    alerts: alertList,
  },
);

/**
 * The body through the schema, its `guardrails` against the configured ones (when known) and its `group`
 * against the groups that exist: one 400 listing every problem.
 */
function validate(
  schema: yup.Schema,
  body: unknown,
  label: FieldLabel = (path) => path,
  knownGuardrails?: readonly string[],
  knownGroups?: ReadonlySet<string>,
): unknown {
  const given = body as { guardrails?: unknown; group?: unknown } | null;
  return validateBody(schema, body, label, [
    ...unknownGuardrails(given?.guardrails, knownGuardrails, label('guardrails')),
    ...unknownGroup(given?.group, knownGroups, label('group')),
  ]);
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
  const value = validate(schemas.newRecord, body, label, knownGuardrails, knownGroups);
  return givenFields(value, ['name', ...CHANGEABLE_FIELDS]);
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
  validate(schemas.changes, body, label, knownGuardrails, knownGroups);
  return changedFields(body, CHANGEABLE_FIELDS);
}
