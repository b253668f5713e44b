import { readJsonRequestBody } from '../http/json-body.ts';
import { assertReadKeysOnce } from '../routes/upstream-body.ts';
import type { Stage } from './stage.ts';

/**
 * The read-body stage: the body read once, up to `limitBytes`, checked as UTF-8 and bounded JSON, and
 * parsed as one object; on a route that forwards the client's bytes, each top-level key only once (the
 * upstream could read a repeated one otherwise than the gateway did).
 */
export function readBody(limitBytes: number, forwardsBytes: boolean): Stage {
  return async function readBody(exchange, next) {
    const read = await readJsonRequestBody(exchange.req, limitBytes);
    if (forwardsBytes) assertReadKeysOnce(read.members);
    exchange.body = read;
    return next(exchange);
  };
}
