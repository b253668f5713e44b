import { EVENTS } from '../../core/diagnostics.ts';
import type { UsageAccounting } from '../../core/exchange.ts';
import type { CachedAnswer } from '../../core/response-cache.ts';
import type { ResolvedModel } from '../../core/model-registry.ts';
import {
  AnswerCapture,
  forwardedHeaderValues,
  hitHeaders,
  lookUp,
  openTicket,
  type CacheTicket,
  type ResponseCaching,
} from '../cache/response-caching.ts';
import { endForClient } from '../http/client-connection.ts';
import type { CompatibleCall } from '../upstream/upstream-client.ts';
import type { Exchange, Next, Stage } from './exchange.ts';

/**
 * What the cache stage uses: the cache and its settings in force, prices for what a hit saved, the client write bound.
 */
export interface CacheParts {
  readonly caching: ResponseCaching;
  readonly usage: Pick<UsageAccounting, 'charge'>;
  readonly clientWriteTimeoutMs: number;
}

/**
 * The cache stage, after the request guardrails and before any reservation (a hit uses no tokens,
 * quota or budget): a stored answer for the same tenant, model and forwarded bytes answers at once,
 * exactly as the first client received it; otherwise the rest of the pipeline runs and its answer is
 * stored when it came whole (a complete 200 with usage, no error in it) and every guardrail in force
 * passed it (none let through unchecked by a webhook that did not answer). A `no-cache` refresh whose
 * answer a guardrail now blocks drops the stored one. Not in a route's list while the cache is off.
 */
export function cache(parts: CacheParts): Stage {
  const { caching } = parts;
  return function cache(exchange, next) {
    const ticket = openTicket(caching, exchange.caller, exchange.headers, exchange.res, material, exchange);
    if (ticket) return cached(parts, exchange, next, ticket);
    // A bypass goes on at once, with no frame of this stage left waiting.
    tell(exchange);
    return next(exchange);
  };
}

/** Answers from the stored answer, or runs the rest of the pipeline and stores what it answered. */
async function cached(parts: CacheParts, exchange: Exchange, next: Next, ticket: CacheTicket): Promise<void> {
  const hit = await lookUp(parts.caching, ticket, exchange.res);
  tell(exchange);
  if (hit) return replay(parts, exchange, exchange.call!, hit);
  const capture = (exchange.capture = new AnswerCapture(ticket, parts.caching));
  try {
    await next(exchange);
  } finally {
    settle(exchange, ticket, capture, parts);
  }
}

/** The cache's part as the `exchange:cache` event, when the answer says one in `x-gateway-cache`. */
function tell(exchange: Exchange): void {
  const { res } = exchange;
  if (EVENTS.cache.activeFor(exchange) && res.hasHeader('x-gateway-cache')) {
    EVENTS.cache.publish({ exchange, result: res.getHeader('x-gateway-cache') as 'hit' | 'miss' | 'bypass' });
  }
}

function material(exchange: Exchange) {
  const call = exchange.call!;
  return {
    route: exchange.route.id,
    model: call.requested.canonicalId,
    forwarded: call.forwarded,
    headers: forwardedHeaderValues(call.upstreamRoute, exchange.headers),
    guardrails: exchange.guardrails?.selection.responseFingerprint,
  };
}

/** Stores a whole answer every guardrail passed; drops the stored one when a refresh was blocked. */
function settle(exchange: Exchange, ticket: CacheTicket, capture: AnswerCapture, parts: CacheParts): void {
  const ending = exchange.ending;
  if (ending?.outcome === 'guardrail_blocked') {
    if (!ticket.read) parts.caching.store.delete(ticket.tenant, ticket.key);
    return;
  }
  if (ending?.outcome !== 'complete' || ending.status !== 200 || !ending.usage || exchange.guardrails?.unchecked)
    return;
  capture.store({
    contentType: capture.contentType,
    stream: exchange.call!.stream,
    model: exchange.model!.canonicalId,
    usage: ending.usage,
  });
}

/**
 * Answers from the cache: the stored bytes exactly as the first client received them (JSON or a whole
 * SSE stream), with `x-gateway-cache: hit` and `Age`. The usage record is one more request with the
 * stored token counts, costing nothing (`savedUsd`: what it would have cost).
 */
async function replay(parts: CacheParts, exchange: Exchange, call: CompatibleCall, hit: CachedAnswer): Promise<void> {
  const served = servedModel(call, hit.model);
  const { res } = exchange;
  exchange.model = served;
  exchange.cacheHit = { savedUsd: parts.usage.charge(hit.usage, served).costUsd };
  if (served !== call.requested) res.setHeader('x-gateway-model', served.canonicalId);
  exchange.firstByteAt = performance.now();
  res.writeHead(hit.status, hitHeaders(hit, Date.now()));
  exchange.endAsRead(await endForClient(res, hit.body, parts.clientWriteTimeoutMs), hit.status, hit.usage, false);
}

/** The model a stored answer came from: the one requested, else the fallback that served it (if it still exists). */
function servedModel(call: CompatibleCall, canonicalId: string): ResolvedModel {
  if (canonicalId === call.requested.canonicalId) return call.requested;
  try {
    return { ...call.registry.resolve(call.route, canonicalId), requestedId: call.requested.requestedId };
  } catch {
    return call.requested;
  }
}
