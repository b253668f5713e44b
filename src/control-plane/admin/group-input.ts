import * as yup from 'yup';
import { fieldError } from '../../core/gateway-errors.ts';
import { GROUP_NAME, GROUP_NAME_RULE, isGroupName } from '../../core/group-identity.ts';
import type { GroupInput } from '../../core/limits.ts';
import type { GroupChanges } from '../../stores/groups/group-store.ts';
import { alertList, moneyBudget, positiveInteger, tokenQuota } from './limit-fields.ts';
import { changedFields, givenFields, namedRecordSchemas, validateBody, type FieldLabel } from './named-record-input.ts';

const { changeable: CHANGEABLE_FIELDS, ...schemas } = namedRecordSchemas(
  'group',
  { pattern: GROUP_NAME, rule: GROUP_NAME_RULE },
  { tpm: positiveInteger, quota: tokenQuota, budget: moneyBudget, alerts: alertList },
);

/**
 * A new budget group from the admin API's body (or the CLI's flags): `name` and optionally `tpm`, `quota`
 * ({daily, monthly}), `budget` ({daily_usd, monthly_usd}) and `alerts` (percents). Throws the 400 listing
 * every bad field.
 */
export function parseNewGroup(body: unknown, label: FieldLabel = (path) => path): GroupInput {
  return givenFields(validateBody(schemas.newRecord, body, label), ['name', ...CHANGEABLE_FIELDS]);
}

/**
 * A PATCH of a group: each of `tpm`, `quota`, `budget` and `alerts` set (an object replaces the whole
 * limit), `null` to remove it, or absent to keep it. Throws the 400 listing every bad field; a body
 * changing nothing is one of them.
 */
export function parseGroupChanges(body: unknown, label: FieldLabel = (path) => path): GroupChanges {
  const empty = body !== null && typeof body === 'object' && !Array.isArray(body) && Object.keys(body).length === 0;
  validateBody(
    schemas.changes,
    body,
    label,
    empty ? [fieldError(label('body'), `must change at least one of ${CHANGEABLE_FIELDS.join(', ')}`)] : [],
  );
  return changedFields(body, CHANGEABLE_FIELDS);
}

/**
 * The error of a key's or team's `group` naming no group that exists (`known`: the names found; the
 * caller looks the named one up first), or none. `null` (clearing it) and a malformed name (the schema
 * says so) are no error here.
 */
export function unknownGroup(value: unknown, known: ReadonlySet<string> | undefined, label: string): string[] {
  if (!isGroupName(value) || known?.has(value)) return [];
  return [fieldError(label, known ? `no group is named '${value}' (create it first)` : 'cannot be set here')];
}

/** `group` of a key or a team: a group's name. */
export const groupName = () =>
  yup.string().strict().typeError('must be a group name').matches(GROUP_NAME, GROUP_NAME_RULE);
