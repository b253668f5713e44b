import type { RequestHandler } from 'express';
import * as yup from 'yup';
import { fieldError, serviceUnavailable, validationError } from '../core/gateway-errors.ts';
import {
  GUARDRAIL_ACTIONS_KEPT,
  type GuardrailActionEntry,
  type GuardrailActionLog,
} from '../stores/guardrail-actions/guardrail-action-log.ts';

/** How many actions `data` holds when the query does not say. */
export const DEFAULT_ACTIONS_LIMIT = 100;

/** One guardrail's actions of one kind among those kept: how many, and when the newest was. */
export interface GuardrailActionCount {
  readonly guardrail: string;
  readonly phase: GuardrailActionEntry['phase'];
  readonly action: GuardrailActionEntry['action'];
  readonly count: number;
  readonly last_at: string;
}

/** The answer of `GET /guardrails/actions`. */
export interface GuardrailActionsView {
  readonly object: 'list';
  /** Every action kept, counted by guardrail, phase and action, sorted by those. */
  readonly by_guardrail: readonly GuardrailActionCount[];
  /** The newest actions, newest first, `limit` at most. */
  readonly data: readonly GuardrailActionEntry[];
}

const LIMIT_MESSAGE = `must be a whole number from 1 to ${GUARDRAIL_ACTIONS_KEPT}`;
const querySchema = yup.object({
  limit: yup
    .string()
    .matches(/^[0-9]{1,7}$/, LIMIT_MESSAGE)
    .test(
      'range',
      LIMIT_MESSAGE,
      (value) => value === undefined || (Number(value) >= 1 && Number(value) <= GUARDRAIL_ACTIONS_KEPT),
    ),
});

/**
 * Reads `limit` (1 to {@link GUARDRAIL_ACTIONS_KEPT}, {@link DEFAULT_ACTIONS_LIMIT} when absent) from a query string;
 * any other parameter is a 400.
 */
export function parseActionsLimit(query: unknown): number {
  const raw = { ...(query as Record<string, unknown>) };
  const errors: string[] = [];
  for (const [name, value] of Object.entries(raw)) {
    if (name !== 'limit') errors.push(fieldError(`query.${name}`, 'is not a parameter of this route'));
    else if (typeof value !== 'string') errors.push(fieldError(`query.${name}`, 'must be given once'));
  }
  if (errors.length) throw validationError(errors, 'limit');
  try {
    const { limit } = querySchema.validateSync(raw, { abortEarly: false, strict: true });
    return limit === undefined ? DEFAULT_ACTIONS_LIMIT : Number(limit);
  } catch (error) {
    if (error instanceof yup.ValidationError)
      throw validationError([fieldError('query.limit', LIMIT_MESSAGE)], 'limit');
    throw error;
  }
}

const byName = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** The view of the actions kept (newest first): all of them counted, the newest `limit` listed. */
export function guardrailActionsView(kept: readonly GuardrailActionEntry[], limit: number): GuardrailActionsView {
  const counts = new Map<
    string,
    {
      guardrail: string;
      phase: GuardrailActionEntry['phase'];
      action: GuardrailActionEntry['action'];
      count: number;
      last_at: string;
    }
  >();
  for (const entry of kept) {
    const key = `${entry.guardrail}\u0000${entry.phase}\u0000${entry.action}`;
    const count = counts.get(key);
    if (!count)
      counts.set(key, {
        guardrail: entry.guardrail,
        phase: entry.phase,
        action: entry.action,
        count: 1,
        last_at: entry.at,
      });
    else {
      count.count += 1;
      if (entry.at > count.last_at) count.last_at = entry.at;
    }
  }
  const by_guardrail = [...counts.values()].sort(
    (a, b) => byName(a.guardrail, b.guardrail) || byName(a.phase, b.phase) || byName(a.action, b.action),
  );
  return { object: 'list', by_guardrail, data: kept.slice(0, limit) };
}

/**
 * `GET /guardrails/actions` behind whatever guard mounts it (the admin token at `/admin`, the session at
 * `/account/api`): the newest guardrail actions, `?limit=` of them (see {@link parseActionsLimit}), and
 * every action kept counted by guardrail (see {@link guardrailActionsView}). 503 when the log cannot be read.
 */
export function guardrailActionsRoute(log: Pick<GuardrailActionLog, 'recent'>): RequestHandler {
  return async function handleGuardrailActions(req, res) {
    const limit = parseActionsLimit(req.query);
    let kept: GuardrailActionEntry[];
    try {
      kept = await log.recent(GUARDRAIL_ACTIONS_KEPT);
    } catch (error) {
      // The message only: an ioredis error object may carry the connection options, password included.
      throw serviceUnavailable(
        'Guardrail actions cannot be read right now (their store is unavailable); please retry shortly',
        new Error((error as Error).message),
      );
    }
    res.json(guardrailActionsView(kept, limit));
  };
}
