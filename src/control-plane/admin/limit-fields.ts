import * as yup from 'yup';
import { fieldError } from '../../core/gateway-errors.ts';
import { GUARDRAIL_NAME, GUARDRAIL_NAME_RULE } from '../../guardrails/guardrail-settings.ts';

/** The largest money budget accepted, in USD (well inside the nano-USD counters' safe integers). */
export const MAX_USD = 1_000_000_000;

/** A whole number from 1 up to the largest safe integer; anything else is said once, whichever rules it breaks. */
export const positiveInteger = () =>
  yup
    .number()
    .strict()
    .typeError('must be a positive integer')
    .test(
      'positive-integer',
      'must be a positive integer',
      (value) => value == null || (Number.isSafeInteger(value) && value >= 1),
    );

/**
 * Refuses the fields an object does not have, each by its own path (`Field 'rmp': unknown field ...`), not
 * the object as a whole. `hints` word the refusal of a field a caller may mean (a team's `name` in a change).
 */
export function knownFields<T extends yup.AnyObject>(
  schema: yup.ObjectSchema<T>,
  fields: readonly string[],
  hints: Readonly<Record<string, string>> = {},
) {
  const message = `unknown field (the fields are ${fields.join(', ')})`;
  return schema.test('known-fields', function knownOnly(value) {
    if (value === null || value === undefined || typeof value !== 'object' || Array.isArray(value)) return true;
    const unknown = Object.keys(value).filter((field) => !fields.includes(field));
    if (unknown.length === 0) return true;
    const at = (field: string) => (this.path ? `${this.path}.${field}` : field);
    const errors = unknown.map((field) => this.createError({ path: at(field), message: hints[field] ?? message }));
    return new yup.ValidationError(errors);
  });
}

/** USD with at most 6 decimals (the ledger counts nano-USD; finer amounts would be rounded away silently). */
export const usdAmount = () =>
  yup
    .number()
    .strict()
    .typeError('must be a positive number of USD')
    .moreThan(0, 'must be a positive number of USD')
    .max(MAX_USD, `must be at most ${MAX_USD} USD`)
    .test(
      'decimals',
      'must have at most 6 decimals',
      (value) => value === undefined || !(value > 0 && value <= MAX_USD) || /^\d+(\.\d{1,6})?$/.test(String(value)),
    );

/** `quota`: charged tokens per UTC day and/or month. */
export const tokenQuota = () =>
  knownFields(
    yup
      .object({ daily: positiveInteger(), monthly: positiveInteger() })
      .strict()
      .typeError('must be an object with daily and/or monthly token counts'),
    ['daily', 'monthly'],
  ).default(undefined);

/** `budget`: USD per UTC day and/or month, at least one of them. */
export const moneyBudget = () =>
  knownFields(
    yup
      .object({ daily_usd: usdAmount(), monthly_usd: usdAmount() })
      .strict()
      .typeError('must be an object with daily_usd and/or monthly_usd'),
    ['daily_usd', 'monthly_usd'],
  )
    .test(
      'some',
      'must give daily_usd and/or monthly_usd',
      (value) =>
        value === undefined || value === null || value.daily_usd !== undefined || value.monthly_usd !== undefined,
    )
    .default(undefined);

/** The fields of `end_user`. */
export const END_USER_FIELDS = ['rpm', 'tpm', 'quota', 'budget'] as const;

/** `end_user`: the limits each end user of the owner gets separately (rpm, tpm, quota, budget), at least one. */
export const endUserLimits = () =>
  knownFields(
    yup
      .object({ rpm: positiveInteger(), tpm: positiveInteger(), quota: tokenQuota(), budget: moneyBudget() })
      .strict()
      .typeError('must be an object with rpm, tpm, quota and/or budget'),
    END_USER_FIELDS,
  )
    .test('some', 'must give rpm, tpm, quota and/or budget', (value) => value == null || Object.keys(value).length > 0)
    .default(undefined);

/**
 * `cache`: `false` keeps the owner's requests out of the response cache; `true` is kept as given (the gateway's setting
 * applies).
 */
export const cacheSetting = () =>
  yup.boolean().strict().typeError('must be true or false').nonNullable('must be true or false');

/** `guardrails`: the names of configured guardrails the owner's requests get; `[]`: none. */
export const guardrailList = () =>
  yup
    .array(
      yup
        .string()
        .strict()
        .typeError(GUARDRAIL_NAME_RULE)
        .required(GUARDRAIL_NAME_RULE)
        .matches(GUARDRAIL_NAME, GUARDRAIL_NAME_RULE),
    )
    .strict()
    .typeError('must be a list of guardrail names ([] for none)')
    .default(undefined);

const ALERT_RULE = 'must be a list of whole percents from 1 to 100 in ascending order, each once ([] for none)';

const percent = () => yup.number().strict().typeError(ALERT_RULE).required(ALERT_RULE).integer(ALERT_RULE);

/** `alerts`: the percents of the owner's money budgets and token quotas at which alerts fire; `[]`: none. */
export const alertList = () =>
  yup
    .array(percent().min(1, ALERT_RULE).max(100, ALERT_RULE))
    .strict()
    .typeError(ALERT_RULE)
    .test(
      'ascending',
      ALERT_RULE,
      (value) => !value || value.every((each, index) => index === 0 || each > value[index - 1]!),
    )
    .default(undefined);

/**
 * The errors of a `guardrails` list naming a guardrail the configuration in force does not hold (each
 * named once); none when the list is not a list of strings (the schema says so) or `known` is absent.
 */
export function unknownGuardrails(value: unknown, known: readonly string[] | undefined, label: string): string[] {
  if (!known || !Array.isArray(value)) return [];
  const missing = [
    ...new Set(
      value.filter(
        (name): name is string => typeof name === 'string' && GUARDRAIL_NAME.test(name) && !known.includes(name),
      ),
    ),
  ];
  return missing.map((name) =>
    fieldError(
      label,
      `no guardrail is named '${name}' in the configuration (configured: ${known.length ? known.join(', ') : 'none'})`,
    ),
  );
}

/** The value without its undefined members (so stored records carry only the limits set). */
export function definedOnly<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, entry]) => entry !== undefined)) as T;
}
