import type { RequestHandler } from 'express';
import * as yup from 'yup';
import { fieldError, serviceUnavailable, validationError } from '../core/gateway-errors.ts';
import type { CallerKey } from '../core/exchange.ts';
import { ANONYMOUS_KEY_ID } from '../usage/usage-accounting.ts';
import { dayOf } from '../usage/usage-record.ts';
import type { UsageQuery, UsageStore } from '../usage/usage-store.ts';

/** The calendar day exists (no 30 February) and the time, if any, is valid. */
function isRealDate(text: string): boolean {
  const day = new Date(`${text.slice(0, 10)}T00:00:00Z`);
  return !Number.isNaN(day.getTime()) && day.toISOString().startsWith(text.slice(0, 10)) && !Number.isNaN(utcDate(text).getTime());
}

const DATE = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})?)?$/;
const date = () =>
  yup
    .string()
    .matches(DATE, 'must be an ISO date (YYYY-MM-DD) or date-time')
    .test('valid', 'is not a real date', (value) => value === undefined || !DATE.test(value) || isRealDate(value));

const querySchema = yup.object({
  from: date(),
  to: date(),
  group_by: yup.string().oneOf(['model', 'day'], "must be 'model' or 'day'"),
  key_id: yup.string(),
});

/** A date or date-time; one without a zone is read as UTC. */
const utcDate = (text: string): Date => new Date(text.length === 10 ? `${text}T00:00:00Z` : /(Z|[+-]\d{2}:\d{2})$/.test(text) ? text : `${text}Z`);

/**
 * Reads `from`, `to` and `group_by` (and `key_id` on the admin route) from a query string. Usage is
 * summed per UTC day, so `from` and `to` select UTC days, both included; a date-time selects its UTC
 * day. Every problem is reported at once, as a 400 ValidationError.
 */
export function parseUsageQuery(query: unknown, allowKeyFilter: boolean): UsageQuery {
  const raw = { ...(query as Record<string, unknown>) };
  const allowed = ['from', 'to', 'group_by', ...(allowKeyFilter ? ['key_id'] : [])];
  const errors: string[] = [];
  for (const [name, value] of Object.entries(raw)) {
    if (!allowed.includes(name)) errors.push(fieldError(`query.${name}`, 'is not a parameter of this route'));
    else if (typeof value !== 'string') errors.push(fieldError(`query.${name}`, 'must be given once'));
  }
  if (errors.length) throw validationError(errors);
  let value;
  try {
    value = querySchema.validateSync(raw, { abortEarly: false, strict: true });
  } catch (error) {
    if (error instanceof yup.ValidationError) throw validationError(error.inner.map((problem) => fieldError(`query.${problem.path}`, problem.message)));
    throw error;
  }
  const from = value.from === undefined ? undefined : utcDate(value.from);
  const to = value.to === undefined ? undefined : utcDate(value.to);
  if (from && to && dayOf(from) > dayOf(to)) throw validationError([fieldError('query.from', "must not be after 'to'")]);
  return { from, to, groupBy: (value.group_by ?? 'model') as 'model' | 'day', keyId: allowKeyFilter ? value.key_id : undefined };
}

async function rowsOf(store: UsageStore, query: UsageQuery) {
  try {
    return await store.query(query);
  } catch (error) {
    throw serviceUnavailable('Usage cannot be read right now (the usage store is unreachable); please retry shortly', error);
  }
}

/**
 * `GET /v1/usage`: the calling key's own usage (`res.locals.apiKey.id`).
 *
 * Query: `from`, `to` (ISO date or date-time; UTC days, inclusive), `group_by=model|day` (default
 * `model`). Answer: `{"object":"list","data":[row...]}`, each row
 * `{model | day, requests, input_tokens, output_tokens, cached_tokens, total_tokens, charged_tokens, cost_usd, cache_hits, saved_usd}`:
 * with `group_by=model` one row per concrete model (carrying `model`), with `group_by=day` one row
 * per UTC day `YYYY-MM-DD` over all models (carrying `day`), sorted by that field.
 */
export function ownUsageRoute(store: UsageStore): RequestHandler {
  return async function handleOwnUsage(req, res) {
    const caller = res.locals.apiKey as CallerKey | undefined;
    const query = parseUsageQuery(req.query, false);
    res.json({ object: 'list', data: await rowsOf(store, { ...query, keyId: caller?.id ?? ANONYMOUS_KEY_ID }) });
  };
}

/** `GET /admin/usage`: every key's usage summed, or one key's with `key_id`; otherwise as `GET /v1/usage`. */
export function adminUsageRoute(store: UsageStore): RequestHandler {
  return async function handleAdminUsage(req, res) {
    res.json({ object: 'list', data: await rowsOf(store, parseUsageQuery(req.query, true)) });
  };
}
