import type { RequestHandler } from 'express';
import { fieldError, validationError } from '../../core/gateway-errors.ts';
import type { AuditRecord, AuditStore } from '../../stores/audit/audit-store.ts';
import { covers, scopeOf } from './permissions.ts';
import { currentScope } from './request-scope.ts';

const DEFAULT_LIMIT = 100;
const MAX_LIMIT = 1000;
const TEXT_FILTERS = ['action', 'actor', 'outcome', 'team', 'target', 'via'] as const;

/** What `GET /audit` asks for: filters (each optional), a page size and a cursor. */
export interface AuditQuery {
  /** An action (`key.create`) or its family (`key.`: every action starting so). */
  readonly action?: string;
  /** An actor's id or name. */
  readonly actor?: string;
  readonly outcome?: string;
  /** Records whose target belongs to this team. */
  readonly team?: string;
  /** A target's id (a key's or token's id, a team's name). */
  readonly target?: string;
  readonly via?: string;
  readonly from?: number;
  readonly to?: number;
  readonly limit: number;
  /** Records older than this one (its `seq`): the `next_before` of the previous page. */
  readonly before?: number;
}

/** Reads the query of `GET /audit`; every problem at once (400). */
export function parseAuditQuery(query: Record<string, unknown>): AuditQuery {
  const errors: string[] = [];
  const known = new Set<string>([...TEXT_FILTERS, 'from', 'to', 'limit', 'before']);
  const values: Record<string, string> = {};
  for (const [name, value] of Object.entries(query)) {
    if (!known.has(name)) errors.push(fieldError(`query.${name}`, 'is not a parameter of this route'));
    else if (typeof value !== 'string' || value === '')
      errors.push(fieldError(`query.${name}`, 'must be given once, with a value'));
    else values[name] = value;
  }
  const time = (name: 'from' | 'to') => {
    if (values[name] === undefined) return undefined;
    const parsed = Date.parse(values[name]!);
    if (Number.isNaN(parsed)) errors.push(fieldError(`query.${name}`, 'must be an ISO 8601 date or date-time'));
    return parsed;
  };
  const whole = (name: 'limit' | 'before', max: number) => {
    if (values[name] === undefined) return undefined;
    const parsed = /^[0-9]{1,15}$/.test(values[name]!) ? Number(values[name]) : Number.NaN;
    if (!(parsed >= 1 && parsed <= max))
      errors.push(fieldError(`query.${name}`, `must be a whole number from 1 to ${max}`));
    return parsed;
  };
  const result = {
    ...Object.fromEntries(TEXT_FILTERS.map((name) => [name, values[name]])),
    from: time('from'),
    to: time('to'),
    limit: whole('limit', MAX_LIMIT) ?? DEFAULT_LIMIT,
    before: whole('before', Number.MAX_SAFE_INTEGER),
  };
  if (errors.length) throw validationError(errors);
  return result as AuditQuery;
}

/** Whether a record passes a query's filters. */
export function auditMatches(record: AuditRecord, query: AuditQuery): boolean {
  if (
    query.action !== undefined &&
    !(query.action.endsWith('.') ? record.action.startsWith(query.action) : record.action === query.action)
  )
    return false;
  if (query.actor !== undefined && record.actor?.id !== query.actor && record.actor?.name !== query.actor) return false;
  if (query.outcome !== undefined && record.outcome !== query.outcome) return false;
  if (query.team !== undefined && record.target.team !== query.team) return false;
  if (query.target !== undefined && record.target.id !== query.target) return false;
  if (query.via !== undefined && record.via !== query.via) return false;
  const time = Date.parse(record.time);
  if (query.from !== undefined && time < query.from) return false;
  if (query.to !== undefined && time > query.to) return false;
  return true;
}

/**
 * `GET /audit`: the audit log, newest first, filtered (`action`, `actor`, `outcome`, `team`, `target`,
 * `via`, `from`, `to`) and paged (`limit`, then `before=<next_before>`). A team-scoped reader sees the
 * records of its teams' keys, teams and tokens only.
 */
export function auditRoute(store: Pick<AuditStore, 'page'>): RequestHandler {
  return async function readAudit(req, res) {
    const query = parseAuditQuery(req.query as Record<string, unknown>);
    const scope = currentScope();
    const held = scope ? scopeOf(scope.principal, 'audit.read') : 'all';
    const data = await store.page(
      (record) => covers(held, record.target.team ?? null) && auditMatches(record, query),
      query.limit,
      query.before,
    );
    res.json({ object: 'list', data, next_before: data.length === query.limit ? data[data.length - 1]!.seq : null });
  };
}
