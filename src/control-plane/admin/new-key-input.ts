import * as yup from 'yup';
import { fieldError, validationError } from '../../core/gateway-errors.ts';
import type { NewKeyInput } from '../../core/api-keys.ts';
import { isTeamName, TEAM_NAME, TEAM_NAME_RULE } from '../../core/team-name.ts';
import { cacheSetting, guardrailList, moneyBudget, positiveInteger, tokenQuota, unknownGuardrails } from './limit-fields.ts';

const newKeySchema = yup
  .object({
    name: yup.string().strict().typeError('must be a string').required('is required').max(200, 'must be at most 200 characters'),
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
      .test('date-time', 'must be an ISO 8601 date-time such as 2030-01-31T00:00:00Z', (value) => value === undefined || isDateTime(value))
      .test('future', 'must be in the future', (value) => value === undefined || !isDateTime(value) || Date.parse(value) > Date.now()),
    quota: tokenQuota(),
    tpm: positiveInteger(),
    budget: moneyBudget(),
    team: yup.string().strict().typeError('must be a team name').matches(TEAM_NAME, TEAM_NAME_RULE),
    cache: cacheSetting(),
    guardrails: guardrailList(),
  })
  .strict()
  .noUnknown('has unknown fields (name, rpm, concurrency, models, expires_at, quota, tpm, budget, team, cache, guardrails)');

function isDateTime(value: string): boolean {
  return /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$/.test(value) && !Number.isNaN(Date.parse(value));
}

export interface NewKeyCheck {
  /** Canonical model IDs of the gateway; `models` is checked against them when given. */
  readonly knownModels?: ReadonlySet<string>;
  /**
   * The teams a key's `team` may name (the caller looks the named one up in the team store first);
   * when absent, naming a team is refused.
   */
  readonly knownTeams?: ReadonlySet<string>;
  /** The guardrails the configuration in force holds; `guardrails` is checked against them when given. */
  readonly knownGuardrails?: readonly string[];
  /** How an error names a field (the CLI names its flags); the body's field path by default. */
  readonly fieldLabel?: (path: string) => string;
}

/**
 * A new key's settings from the admin API's body (or the CLI's flags): `name`, and optionally `rpm`,
 * `concurrency`, `models` (canonical IDs), `expires_at` (ISO date-time in the future) and `quota` (`daily`,
 * `monthly`), `tpm`, `budget` (`daily_usd`, `monthly_usd`), `team` (an existing team's name), `cache` (a boolean;
 * `false` keeps the key's requests out of the response cache) and `guardrails` (names of configured guardrails the key's
 * requests get, over its team's; `[]`: none). Throws the 400 ValidationError listing every bad field.
 */
export function parseNewKey(body: unknown, check: NewKeyCheck = {}): NewKeyInput {
  const label = check.fieldLabel ?? ((path: string) => path);
  const errors: string[] = [];
  let value: yup.InferType<typeof newKeySchema> | undefined;
  try {
    value = newKeySchema.validateSync(body, { abortEarly: false });
  } catch (error) {
    if (!(error instanceof yup.ValidationError)) throw error;
    errors.push(...error.inner.map((problem) => fieldError(label(problem.path || 'body'), problem.message)));
  }
  const models = (body as { models?: unknown } | null)?.models;
  if (check.knownModels && Array.isArray(models)) {
    for (const model of models) {
      if (typeof model === 'string' && !check.knownModels.has(model)) {
        errors.push(fieldError(label('models'), `'${model}' is not a canonical model ID of this gateway (name concrete models such as vendor/model, not aliases)`));
      }
    }
  }
  errors.push(...unknownGuardrails((body as { guardrails?: unknown } | null)?.guardrails, check.knownGuardrails, label('guardrails')));
  const team = (body as { team?: unknown } | null)?.team;
  if (isTeamName(team) && !check.knownTeams?.has(team)) {
    errors.push(fieldError(label('team'), check.knownTeams ? `no team is named '${team}' (create it first)` : 'cannot be set here'));
  }
  if (errors.length > 0 || !value) throw validationError(errors);
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
    cache: value.cache,
    guardrails: value.guardrails,
  };
}
