import * as yup from 'yup';
import { fieldError, validationError } from '../../core/gateway-errors.ts';
import type { NewKeyInput } from '../../core/api-keys.ts';
import type { KeyChanges } from '../../stores/keys/key-store.ts';
import { isTeamName, TEAM_NAME, TEAM_NAME_RULE } from '../../core/team-name.ts';
import {
  cacheSetting,
  endUserLimits,
  alertList,
  guardrailList,
  knownFields,
  moneyBudget,
  positiveInteger,
  tokenQuota,
  unknownGuardrails,
} from './limit-fields.ts';
import { groupName, unknownGroup } from './group-input.ts';

// Each field of a key, as a new key gives it; a change may give each but `name` as null (removed).
const KEY_FIELDS = {
  rpm: positiveInteger(),
  concurrency: positiveInteger(),
  models: yup
    .array(yup.string().strict().typeError('must be a model ID').required('must be a model ID'))
    .typeError('must be a list of canonical model IDs')
    .min(1, 'must name at least one model (leave it out to allow every model)'),
  expires_at: yup
    .string()
    .strict()
    .typeError('must be an ISO 8601 date-time')
    .test(
      'date-time',
      'must be an ISO 8601 date-time such as 2030-01-31T00:00:00Z',
      (value) => value === undefined || value === null || isDateTime(value),
    )
    .test(
      'future',
      'must be in the future',
      (value) => value === undefined || value === null || !isDateTime(value) || Date.parse(value) > Date.now(),
    ),
  quota: tokenQuota(),
  tpm: positiveInteger(),
  budget: moneyBudget(),
  team: yup.string().strict().typeError('must be a team name').matches(TEAM_NAME, TEAM_NAME_RULE),
  group: groupName(),
  cache: cacheSetting(),
  guardrails: guardrailList(),
  end_user: endUserLimits(),
  alerts: alertList(),
};

const keyName = () => yup.string().strict().typeError('must be a string').max(200, 'must be at most 200 characters');

const newKeySchema = knownFields(yup.object({ name: keyName().required('is required'), ...KEY_FIELDS }).strict(), [
  'name',
  ...Object.keys(KEY_FIELDS),
]);

/** The fields a PATCH of a key may give (each but `name` may be null: removed). */
export const KEY_CHANGE_FIELDS = [
  'name',
  'rpm',
  'concurrency',
  'models',
  'expires_at',
  'quota',
  'tpm',
  'budget',
  'team',
  'group',
  'cache',
  'guardrails',
  'end_user',
  'alerts',
] as const;

const keyChangesSchema = knownFields(
  yup
    .object({
      name: keyName().min(1, 'must not be empty').nonNullable('must be a string (a key keeps a name)'),
      ...(Object.fromEntries(Object.entries(KEY_FIELDS).map(([field, schema]) => [field, schema.nullable()])) as {
        [K in keyof typeof KEY_FIELDS]: ReturnType<(typeof KEY_FIELDS)[K]['nullable']>;
      }),
    })
    .strict(),
  KEY_CHANGE_FIELDS,
);

function isDateTime(value: string): boolean {
  return (
    /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$/.test(value) &&
    !Number.isNaN(Date.parse(value))
  );
}

export interface NewKeyCheck {
  /** Canonical model IDs of the gateway; `models` is checked against them when given. */
  readonly knownModels?: ReadonlySet<string>;
  /**
   * The teams a key's `team` may name, each with its id, which the key keeps beside the name (the caller
   * looks the named one up in the team store first); when absent, naming a team is refused.
   */
  readonly knownTeams?: ReadonlyMap<string, string>;
  /** The guardrails the configuration in force holds; `guardrails` is checked against them when given. */
  readonly knownGuardrails?: readonly string[];
  /**
   * The budget groups a key's `group` may name (the caller looks the named one up first); when absent,
   * naming a group is refused.
   */
  readonly knownGroups?: ReadonlySet<string>;
  /** How an error names a field (the CLI names its flags); the body's field path by default. */
  readonly fieldLabel?: (path: string) => string;
}

/**
 * A new key's settings from the admin API's body (or the CLI's flags): `name`, and optionally `rpm`,
 * `concurrency`, `models` (canonical IDs), `expires_at` (ISO date-time in the future) and `quota` (`daily`,
 * `monthly`), `tpm`, `budget` (`daily_usd`, `monthly_usd`), `team` (an existing team's name), `group` (an existing
 * budget group's name), `cache` (a boolean; `false` keeps the key's requests out of the response cache), `guardrails`
 * (names of configured guardrails the key's requests get, over its team's; `[]`: none), `end_user` (the limits each
 * of its end users gets: `rpm`, `tpm`, `quota`, `budget`) and `alerts` (ascending percents of its budgets and quotas
 * at which alerts fire; `[]`: none). Throws the 400 ValidationError listing every bad field.
 */
export function parseNewKey(body: unknown, check: NewKeyCheck = {}): NewKeyInput {
  const value = validate(newKeySchema, body, check);
  return {
    name: value.name,
    rpm: value.rpm,
    concurrency: value.concurrency,
    models: value.models,
    expiresAt: value.expires_at === undefined ? undefined : new Date(value.expires_at).toISOString(),
    quota: value.quota,
    tpm: value.tpm,
    budget: value.budget,
    team: value.team,
    teamId: value.team === undefined ? undefined : check.knownTeams?.get(value.team),
    group: value.group,
    cache: value.cache,
    guardrails: value.guardrails,
    end_user: value.end_user,
    alerts: value.alerts,
  };
}

/**
 * A PATCH of a key: `name`, and each of `rpm`, `concurrency`, `models`, `expires_at`, `quota`, `tpm`, `budget`, `team`,
 * `group`, `cache`, `guardrails`, `end_user` and `alerts` set (checked as {@link parseNewKey} checks it; an object
 * replaces the whole limit), `null` to remove it, or absent to keep it. Throws the 400 ValidationError listing every
 * bad field; a body changing nothing is one of them.
 */
export function parseKeyChanges(body: unknown, check: NewKeyCheck = {}): KeyChanges {
  const label = check.fieldLabel ?? ((path: string) => path);
  const empty = body !== null && typeof body === 'object' && !Array.isArray(body) && Object.keys(body).length === 0;
  const value = validate(
    keyChangesSchema,
    body,
    check,
    empty ? [fieldError(label('body'), `must change at least one of ${KEY_CHANGE_FIELDS.join(', ')}`)] : [],
  );
  const given = body as Record<string, unknown>;
  const changes: Record<string, unknown> = {};
  for (const field of KEY_CHANGE_FIELDS) {
    if (!Object.hasOwn(given, field)) continue;
    const set = value[field];
    if (field === 'expires_at') changes.expiresAt = set === null ? null : new Date(set as string).toISOString();
    else changes[field] = set;
    if (field === 'team') changes.teamId = set === null ? null : check.knownTeams?.get(set as string);
  }
  return changes as KeyChanges;
}

/**
 * The body through the schema, then its `models`, `guardrails` and `team` against what exists (when known):
 * one 400 listing every problem, `errors` first.
 */
function validate<T>(schema: yup.Schema<T>, body: unknown, check: NewKeyCheck, errors: string[] = []): T {
  const label = check.fieldLabel ?? ((path: string) => path);
  let value: T | undefined;
  try {
    value = schema.validateSync(body, { abortEarly: false });
  } catch (error) {
    if (!(error instanceof yup.ValidationError)) throw error;
    errors.push(...error.inner.map((problem) => fieldError(label(problem.path || 'body'), problem.message)));
  }
  const models = (body as { models?: unknown } | null)?.models;
  if (check.knownModels && Array.isArray(models)) {
    for (const model of models) {
      if (typeof model === 'string' && !check.knownModels.has(model)) {
        errors.push(
          fieldError(
            label('models'),
            `'${model}' is not a canonical model ID of this gateway (name concrete models such as vendor/model, not aliases)`,
          ),
        );
      }
    }
  }
  errors.push(
    ...unknownGuardrails(
      (body as { guardrails?: unknown } | null)?.guardrails,
      check.knownGuardrails,
      label('guardrails'),
    ),
  );
  const team = (body as { team?: unknown } | null)?.team;
  if (isTeamName(team) && !check.knownTeams?.has(team)) {
    errors.push(
      fieldError(
        label('team'),
        check.knownTeams ? `no team is named '${team}' (create it first)` : 'cannot be set here',
      ),
    );
  }
  errors.push(...unknownGroup((body as { group?: unknown } | null)?.group, check.knownGroups, label('group')));
  if (errors.length > 0 || value === undefined) throw validationError(errors);
  return value;
}
