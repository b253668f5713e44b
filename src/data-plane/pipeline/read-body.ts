import { payloadTooLarge } from '../../core/gateway-errors.ts';
import { assertReadKeysOnce, parseJsonRequestBody, readJsonRequestBody } from '../http/json-body.ts';

import type { Stage } from './exchange.ts';

/**
 * The read-body stage: the body read once, up to `limitBytes`, checked as UTF-8 and bounded JSON, and
 * parsed as one object; on a route that forwards the client's bytes, each top-level key only once (the
 * upstream could read a repeated one otherwise than the gateway did). A body a WebSocket message brought
 * (`exchange.message`) is checked the same way.
 */
export function readBody(limitBytes: number, forwardsBytes: boolean): Stage {
  return async function readBody(exchange, next) {
    const { message } = exchange;
    if (message !== undefined && message.length > limitBytes) throw payloadTooLarge(limitBytes);
    const read = message ? parseJsonRequestBody(message) : await readJsonRequestBody(exchange.req, limitBytes);
    if (forwardsBytes) assertReadKeysOnce(read.members);
    exchange.body = read;
    return next(exchange);
  };
}
