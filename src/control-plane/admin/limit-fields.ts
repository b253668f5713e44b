import * as yup from 'yup';

/** The largest money budget accepted, in USD (well inside the nano-USD counters' safe integers). */
export const MAX_USD = 1_000_000_000;

export const positiveInteger = () =>
  yup.number().strict().typeError('must be a positive integer').integer('must be a positive integer').min(1, 'must be a positive integer').max(Number.MAX_SAFE_INTEGER, 'must be a positive integer');

/** USD with at most 6 decimals (the ledger counts nano-USD; finer amounts would be rounded away silently). */
export const usdAmount = () =>
  yup
    .number()
    .strict()
    .typeError('must be a positive number of USD')
    .moreThan(0, 'must be a positive number of USD')
    .max(MAX_USD, `must be at most ${MAX_USD} USD`)
    .test('decimals', 'must have at most 6 decimals', (value) => value === undefined || !(value > 0) || /^\d+(\.\d{1,6})?$/.test(String(value)));

/** `quota`: charged tokens per UTC day and/or month. */
export const tokenQuota = () =>
  yup
    .object({ daily: positiveInteger(), monthly: positiveInteger() })
    .strict()
    .typeError('must be an object with daily and/or monthly token counts')
    .noUnknown('has unknown fields (daily, monthly)')
    .default(undefined);

/** `budget`: USD per UTC day and/or month, at least one of them. */
export const moneyBudget = () =>
  yup
    .object({ daily_usd: usdAmount(), monthly_usd: usdAmount() })
    .strict()
    .typeError('must be an object with daily_usd and/or monthly_usd')
    .noUnknown('has unknown fields (daily_usd, monthly_usd)')
    .test('some', 'must give daily_usd and/or monthly_usd', (value) => value === undefined || value === null || value.daily_usd !== undefined || value.monthly_usd !== undefined)
    .default(undefined);

/** `cache`: `false` keeps the owner's requests out of the response cache; `true` is kept as given (the gateway's setting applies). */
export const cacheSetting = () => yup.boolean().strict().typeError('must be true or false').nonNullable('must be true or false');

/** The value without its undefined members (so stored records carry only the limits set). */
export function definedOnly<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, entry]) => entry !== undefined)) as T;
}
