import type { RequestHandler } from 'express';
import * as yup from 'yup';
import { fieldError, serviceUnavailable, validationError } from '../core/gateway-errors.ts';
import type { CallerKey } from '../core/exchange.ts';
import { ANONYMOUS_KEY_ID, dayOf, type UsageQuery, type UsageRow, type UsageStore } from '../usage/usage-accounting.ts';
import type { KeyStore } from '../stores/keys/key-store.ts';
import type { TeamStore } from '../stores/teams/team-store.ts';
import { usageByTeam } from './usage-by-team.ts';

/** A usage read-back as asked: a store query, or per team (`team`), which is summed here from the rows per key. */
export type UsageRequest = Omit<UsageQuery, 'groupBy'> & { readonly groupBy: UsageQuery['groupBy'] | 'team' };

/** The calendar day exists (no 30 February) and the time, if any, is valid. */
function isRealDate(text: string): boolean {
  const day = new Date(`${text.slice(0, 10)}T00:00:00Z`);
  return (
    !Number.isNaN(day.getTime()) &&
    day.toISOString().startsWith(text.slice(0, 10)) &&
    !Number.isNaN(utcDate(text).getTime())
  );
}

const DATE = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})?)?$/;
const date = () =>
  yup
    .string()
    .matches(DATE, 'must be an ISO date (YYYY-MM-DD) or date-time')
    .test('valid', 'is not a real date', (value) => value === undefined || !DATE.test(value) || isRealDate(value));

const ownQuerySchema = yup.object({
  from: date(),
  to: date(),
  group_by: yup.string().test('own-grouping', "must be 'model' or 'day'", function ownGrouping(value) {
    if (value === undefined || value === 'model' || value === 'day') return true;
    // A clearer refusal for the groupings only the admin API and the account page have.
    if (value !== 'key' && value !== 'team' && value !== 'end_user') return false;
    const where = 'per key, per team and per end user only on the admin API';
    return this.createError({
      message: `cannot be '${value}' here: a key's own usage is grouped by 'model' or 'day' (${where})`,
    });
  }),
});

const everyKeyQuerySchema = yup.object({
  from: date(),
  to: date(),
  group_by: yup
    .string()
    .oneOf(['model', 'day', 'key', 'team', 'end_user'], "must be 'model', 'day', 'key', 'team' or 'end_user'"),
  key_id: yup.string(),
});

/** A date or date-time; one without a zone is read as UTC. */
const utcDate = (text: string): Date =>
  new Date(text.length === 10 ? `${text}T00:00:00Z` : /(Z|[+-]\d{2}:\d{2})$/.test(text) ? text : `${text}Z`);

/**
 * Reads `from`, `to` and `group_by` from a query string; where every key's usage is read (`everyKey`:
 * the admin API, the account page, the CLI) also `key_id`, and `group_by` may be `key`, `team` or
 * `end_user` too.
 * Usage is summed per UTC day, so `from` and `to` select UTC days, both included; a date-time selects
 * its UTC day. Every problem is reported at once, as a 400 ValidationError.
 */
export function parseUsageQuery(query: unknown, everyKey: boolean): UsageRequest {
  const raw = { ...(query as Record<string, unknown>) };
  const allowed = ['from', 'to', 'group_by', ...(everyKey ? ['key_id'] : [])];
  const errors: string[] = [];
  for (const [name, value] of Object.entries(raw)) {
    if (!allowed.includes(name)) errors.push(fieldError(`query.${name}`, 'is not a parameter of this route'));
    else if (typeof value !== 'string') errors.push(fieldError(`query.${name}`, 'must be given once'));
  }
  if (errors.length) throw validationError(errors);
  let value;
  try {
    value = (everyKey ? everyKeyQuerySchema : ownQuerySchema).validateSync(raw, {
      abortEarly: false,
      strict: true,
    }) as { from?: string; to?: string; group_by?: string; key_id?: string };
  } catch (error) {
    if (error instanceof yup.ValidationError)
      throw validationError(error.inner.map((problem) => fieldError(`query.${problem.path}`, problem.message)));
    throw error;
  }
  const from = value.from === undefined ? undefined : utcDate(value.from);
  const to = value.to === undefined ? undefined : utcDate(value.to);
  if (from && to && dayOf(from) > dayOf(to))
    throw validationError([fieldError('query.from', "must not be after 'to'")]);
  return {
    from,
    to,
    groupBy: (value.group_by ?? 'model') as UsageRequest['groupBy'],
    keyId: everyKey ? value.key_id : undefined,
  };
}

async function rowsOf(store: UsageStore, query: UsageQuery): Promise<UsageRow[]> {
  try {
    return await store.query(query);
  } catch (error) {
    throw serviceUnavailable(
      'Usage cannot be read right now (the usage store is unreachable); please retry shortly',
      error,
    );
  }
}

/**
 * The rows a usage request asks for. Per team, the rows per key are summed under the team each key's
 * record names now (see {@link usageByTeam}), which needs the key store, and the team store to tell a
 * team from an earlier one of the same name.
 */
export async function readUsage(
  store: UsageStore,
  keys: Pick<KeyStore, 'list'> | undefined,
  request: UsageRequest,
  teams?: Pick<TeamStore, 'list'>,
): Promise<UsageRow[]> {
  if (request.groupBy !== 'team') return rowsOf(store, { ...request, groupBy: request.groupBy });
  if (!keys) throw new Error('Usage per team needs the key store');
  const perKey = rowsOf(store, { ...request, groupBy: 'key' });
  const [rows, records, teamRecords] = await Promise.all([perKey, keys.list(), teams?.list()]);
  return usageByTeam(rows, records, teamRecords);
}

/**
 * `GET /v1/usage`: the calling key's own usage (`res.locals.apiKey.id`).
 *
 * Query: `from`, `to` (ISO date or date-time; UTC days, inclusive), `group_by=model|day` (default
 * `model`). Answer: `{"object":"list","data":[row...]}`, each row
 * `{model | day, requests, input_tokens, output_tokens, cached_tokens, total_tokens, charged_tokens, cost_usd,
 * cache_hits, saved_usd}`: with `group_by=model` one row per concrete model (carrying `model`), with `group_by=day` one
 * row per UTC day `YYYY-MM-DD` over all models (carrying `day`), sorted by that field.
 */
export function ownUsageRoute(store: UsageStore): RequestHandler {
  return async function handleOwnUsage(req, res) {
    const caller = res.locals.apiKey as CallerKey | undefined;
    const query = parseUsageQuery(req.query, false);
    res.json({
      object: 'list',
      data: await readUsage(store, undefined, { ...query, keyId: caller?.id ?? ANONYMOUS_KEY_ID }),
    });
  };
}

/**
 * `GET /admin/usage`: every key's usage summed, or one key's with `key_id`; otherwise as `GET /v1/usage`,
 * and also `group_by=key` (rows carry `key_id`, sorted by it), `group_by=end_user` (rows carry `key_id`
 * and `end_user`, null for the requests that named none, sorted by both) or `group_by=team` (rows carry `team`,
 * each key's usage under the team it names now, null for keys in no team or of an earlier team whose name a
 * later team took; sorted by team, null last).
 */
export function adminUsageRoute(
  store: UsageStore,
  keys: Pick<KeyStore, 'list'>,
  teams?: Pick<TeamStore, 'list'>,
): RequestHandler {
  return async function handleAdminUsage(req, res) {
    res.json({ object: 'list', data: await readUsage(store, keys, parseUsageQuery(req.query, true), teams) });
  };
}
