import { Router } from 'express';
import * as yup from 'yup';
import { fieldError, serviceUnavailable, validationError } from '../core/gateway-errors.ts';
import { ALERT_DELIVERIES_KEPT, type AlertLog } from '../stores/alerts/alert-log.ts';

/** How many delivery attempts `GET /alerts/deliveries` lists when the query does not say. */
export const DEFAULT_DELIVERIES_LIMIT = 100;

const LIMIT_MESSAGE = `must be a whole number from 1 to ${ALERT_DELIVERIES_KEPT}`;
const limitSchema = yup
  .string()
  .matches(/^[0-9]{1,7}$/, LIMIT_MESSAGE)
  .test(
    'range',
    LIMIT_MESSAGE,
    (value) => value === undefined || (Number(value) >= 1 && Number(value) <= ALERT_DELIVERIES_KEPT),
  );

/** `limit` of a query (1 to {@link ALERT_DELIVERIES_KEPT}); any other parameter is a 400. */
export function parseDeliveriesLimit(query: unknown): number {
  const errors: string[] = [];
  for (const [name, value] of Object.entries(query as Record<string, unknown>)) {
    if (name !== 'limit') errors.push(fieldError(`query.${name}`, 'is not a parameter of this route'));
    else if (typeof value !== 'string') errors.push(fieldError(`query.${name}`, 'must be given once'));
    else if (!limitSchema.isValidSync(value, { strict: true })) errors.push(fieldError('query.limit', LIMIT_MESSAGE));
  }
  if (errors.length) throw validationError(errors, 'limit');
  const { limit } = query as { limit?: string };
  return limit === undefined ? DEFAULT_DELIVERIES_LIMIT : Number(limit);
}

/** No query parameter is taken. */
function noQuery(query: unknown): void {
  const errors = Object.keys(query as object).map((name) =>
    fieldError(`query.${name}`, 'is not a parameter of this route'),
  );
  if (errors.length) throw validationError(errors);
}

// The message only: an ioredis error object may carry the connection options, password included.
const unavailable = (error: unknown) =>
  serviceUnavailable(
    'Limit alerts cannot be read right now (their store is unavailable); please retry shortly',
    new Error((error as Error).message),
  );

/**
 * `GET /alerts` (each alert's last firing, newest first: an alert is a threshold of an owner's budget or
 * quota of a day or month) and `GET /alerts/deliveries` (the newest webhook delivery attempts, `?limit=`),
 * behind whatever guard mounts them; 503 when the store cannot be read.
 */
export function alertRoutes(log: Pick<AlertLog, 'lastFirings' | 'deliveries'>): Router {
  const router = Router();
  router.get('/alerts', async (req, res) => {
    noQuery(req.query);
    const data = await log.lastFirings().catch((error: unknown) => Promise.reject(unavailable(error)));
    res.json({ object: 'list', data });
  });
  router.get('/alerts/deliveries', async (req, res) => {
    const limit = parseDeliveriesLimit(req.query);
    const data = await log.deliveries(limit).catch((error: unknown) => Promise.reject(unavailable(error)));
    res.json({ object: 'list', data });
  });
  return router;
}
