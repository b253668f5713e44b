import type { RequestHandler } from 'express';
import * as yup from 'yup';
import { fieldError, serviceUnavailable, validationError } from '../errors/gateway-errors.ts';
import type { CallerKey } from '../routes/route-services.ts';
import { ANONYMOUS_KEY_ID } from './usage-accounting.ts';
import type { UsageQuery, UsageStore } from './usage-store.ts';

const DATE = /^\d{4}-\d{2}-\d{2}(T[\d:.]+(Z|[+-]\d{2}:\d{2})?)?$/;
const date = () => yup.string().matches(DATE, 'must be an ISO date (YYYY-MM-DD) or date-time').test('valid', 'is not a real date', (value) => value === undefined || !DATE.test(value) || !Number.isNaN(Date.parse(value)));

const querySchema = yup
  .object({
    from: date(),
    to: date(),
    group_by: yup.string().oneOf(['model', 'day'], "must be 'model' or 'day'"),
    key_id: yup.string(),
  })
  .noUnknown('has unknown parameters');

/** Reads `from`, `to` (UTC days, inclusive; a date-time selects its day) and `group_by` from a query string. */
function parseQuery(query: unknown, allowKeyFilter: boolean): Omit<UsageQuery, 'keyId'> & { keyId?: string } {
  const raw = { ...(query as Record<string, unknown>) };
  const errors: string[] = [];
  for (const [name, value] of Object.entries(raw)) {
    if (typeof value !== 'string') errors.push(fieldError(`query.${name}`, 'must be given once'));
    if (!['from', 'to', 'group_by', ...(allowKeyFilter ? ['key_id'] : [])].includes(name)) errors.push(fieldError(`query.${name}`, 'is not a parameter of this route'));
  }
  if (errors.length) throw validationError(errors);
  try {
    const value = querySchema.validateSync(raw, { abortEarly: false, strict: true });
    const fromDay = value.from?.slice(0, 10);
    const toDay = value.to?.slice(0, 10);
    if (fromDay && toDay && fromDay > toDay) throw validationError([fieldError('query.from', "must not be after 'to'")]);
    return { fromDay, toDay, groupBy: (value.group_by ?? 'model') as 'model' | 'day', keyId: value.key_id };
  } catch (error) {
    if (error instanceof yup.ValidationError) throw validationError(error.inner.map((problem) => fieldError(`query.${problem.path}`, problem.message)));
    throw error;
  }
}

async function rowsOf(store: UsageStore, query: UsageQuery) {
  try {
    return await store.query(query);
  } catch (error) {
    throw serviceUnavailable('Usage cannot be read right now (the usage store is unreachable); please retry shortly', error);
  }
}

/** `GET /v1/usage`: the calling key's own usage. */
export function ownUsageRoute(store: UsageStore): RequestHandler {
  return async function handleOwnUsage(req, res) {
    const caller = res.locals.apiKey as CallerKey | undefined;
    const query = parseQuery(req.query, false);
    res.json({ object: 'list', data: await rowsOf(store, { ...query, keyId: caller?.id ?? ANONYMOUS_KEY_ID }) });
  };
}

/** `GET /admin/usage`: every key's usage, or one key's with `key_id`. */
export function adminUsageRoute(store: UsageStore): RequestHandler {
  return async function handleAdminUsage(req, res) {
    res.json({ object: 'list', data: await rowsOf(store, parseQuery(req.query, true)) });
  };
}
