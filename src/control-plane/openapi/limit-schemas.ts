/** The JSON schemas of the limits keys, teams and groups share. */

export const positiveInteger = { type: 'integer', minimum: 1 };
export const usd = {
  type: 'number',
  exclusiveMinimum: 0,
  maximum: 1_000_000_000,
  description: 'USD, at most 6 decimals',
};

/** `quota`: charged tokens per UTC day and/or month. */
export const TOKEN_QUOTA = {
  type: 'object',
  additionalProperties: false,
  properties: { daily: positiveInteger, monthly: positiveInteger },
};

/** `budget`: USD per UTC day and/or month. */
export const MONEY_BUDGET = {
  type: 'object',
  additionalProperties: false,
  minProperties: 1,
  properties: { daily_usd: usd, monthly_usd: usd },
};

export const nullable = (schema: object) => ({ anyOf: [schema, { type: 'null' }] });

/** Each of the fields, `null` allowed too (a change removing it, or a record without it). */
export const nullableFields = (fields: object) =>
  Object.fromEntries(Object.entries(fields).map(([field, schema]) => [field, nullable(schema as object)]));
