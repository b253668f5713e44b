import * as yup from 'yup';
import { fieldError, validationError } from '../../core/gateway-errors.ts';
import { GROUP_NAME, GROUP_NAME_RULE, isGroupName } from '../../core/group-identity.ts';
import type { GroupInput } from '../../core/limits.ts';
import type { GroupChanges } from '../../stores/groups/group-store.ts';
import { alertList, definedOnly, knownFields, moneyBudget, positiveInteger, tokenQuota } from './limit-fields.ts';

/** How an error names a field (the CLI names its flags); the body's field path by default. */
type FieldLabel = (path: string) => string;

// The fields a PATCH may set or remove: the limits and the alert thresholds.
const CHANGEABLE_FIELDS = ['tpm', 'quota', 'budget', 'alerts'] as const;

const newGroupSchema = knownFields(
  yup
    .object({
      name: yup
        .string()
        .strict()
        .typeError('must be a string')
        .required('is required')
        .matches(GROUP_NAME, GROUP_NAME_RULE),
      tpm: positiveInteger(),
      quota: tokenQuota(),
      budget: moneyBudget(),
      alerts: alertList(),
    })
    .strict(),
  ['name', ...CHANGEABLE_FIELDS],
);

const groupChangesSchema = knownFields(
  yup
    .object({
      tpm: positiveInteger().nullable(),
      quota: tokenQuota().nullable(),
      budget: moneyBudget().nullable(),
      alerts: alertList().nullable(),
    })
    .strict(),
  CHANGEABLE_FIELDS,
  { name: `cannot be changed: a group keeps its name (the fields a change sets are ${CHANGEABLE_FIELDS.join(', ')})` },
);

function validate<T>(schema: yup.Schema<T>, body: unknown, label: FieldLabel, errors: string[] = []): T {
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
 * A new budget group from the admin API's body (or the CLI's flags): `name` and optionally `tpm`, `quota`
 * ({daily, monthly}), `budget` ({daily_usd, monthly_usd}) and `alerts` (percents). Throws the 400 listing
 * every bad field.
 */
export function parseNewGroup(body: unknown, label: FieldLabel = (path) => path): GroupInput {
  const value = validate(newGroupSchema, body, label);
  return definedOnly({
    name: value.name,
    tpm: value.tpm,
    quota: value.quota,
    budget: value.budget,
    alerts: value.alerts,
  });
}

/**
 * A PATCH of a group: each of `tpm`, `quota`, `budget` and `alerts` set (an object replaces the whole
 * limit), `null` to remove it, or absent to keep it. Throws the 400 listing every bad field; a body
 * changing nothing is one of them.
 */
export function parseGroupChanges(body: unknown, label: FieldLabel = (path) => path): GroupChanges {
  const empty = body !== null && typeof body === 'object' && !Array.isArray(body) && Object.keys(body).length === 0;
  validate(
    groupChangesSchema,
    body,
    label,
    empty ? [fieldError(label('body'), `must change at least one of ${CHANGEABLE_FIELDS.join(', ')}`)] : [],
  );
  const given = body as Record<string, unknown>;
  return Object.fromEntries(
    CHANGEABLE_FIELDS.filter((field) => Object.hasOwn(given, field)).map((field) => [field, given[field]]),
  ) as GroupChanges;
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
