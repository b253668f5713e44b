import { EVENTS, type AttemptStartMessage } from '../../core/diagnostics.ts';
import {
  type AttemptSignal,
  awaitDispatchedStreamStart,
  UpstreamTransportError,
  type UpstreamClient,
  type UpstreamRequest,
  type UpstreamResponse,
  type CompatibleCall,
} from '../upstream/upstream-client.ts';
import { WIRE_FORMATS } from '../../core/formats/index.ts';
import { isGatewayError, upstreamFailure, upstreamResting } from '../../core/gateway-errors.ts';
import {
  attemptUpstream,
  type AttemptResult,
  type FailoverPlan,
  ClientWatch,
  attemptStart,
  attemptTraceparent,
  endpointFailed,
  type AttemptSide,
  type EndpointPool,
  type PooledEndpoint,
  type ProviderEndpoints,
} from '../upstream/endpoint-pool.ts';
import { isRetryableStatus, retryAfterMs } from '../upstream/failover/retry-policy.ts';
import { requestSession, type RoutingSession } from '../upstream/session-affinity.ts';
import type { CompatibleAnswer, CompatibleFailure, UpstreamBounds } from '../routes/compatible-answer.ts';
import type { Exchange, Stage } from './exchange.ts';

/** What the attempt stage uses: the upstream client, the endpoints in force and the bounds of every wait. */
export interface AttemptParts {
  readonly upstream: UpstreamClient;
  readonly endpoints: ProviderEndpoints;
  readonly bounds: UpstreamBounds;
}

/**
 * The attempt stage of the compatible routes: tries the requested model's endpoints, then each
 * fallback's, until one answers (one round of failover per model, no waits: the client's SDK owns
 * retries); hands the answer to the relay, or ends the exchange with the last failure (the upstream's
 * own retryable answer goes back as it came, as with one endpoint).
 */
export function attempt(parts: AttemptParts): Stage {
  return async function attempt(exchange, next) {
    const client = (exchange.client = new ClientWatch(exchange.res));
    const call = exchange.call!;
    const side = attemptStart(exchange, call.stream, WIRE_FORMATS[call.format].genAi.inputMessages);
    const session = routingSession(exchange, call, exchange.pool!);
    let pool = exchange.pool!;
    let last: CompatibleFailure | undefined;
    let restingMs: number | undefined;
    for (;;) {
      const plan: FailoverPlan = {
        maxAttempts: pool.maxAttempts,
        caller: exchange.caller?.id,
        session,
        onFailure: endpointFailed(exchange),
      };
      const outcome = await attemptUpstream(pool, plan, client, exchange.upstream.tally, (member, signal) =>
        attemptOnce(parts, exchange, call, member, signal, side),
      );
      if (outcome.kind === 'answer') {
        exchange.answer = outcome;
        return next(exchange);
      }
      if (outcome.kind === 'client-gone') return exchange.end(499, undefined, exchange.upstream.tally.abandoned);
      if (outcome.kind === 'failed') last = outcome.failure;
      // Every endpoint of this model rested: the 503's Retry-After is the soonest any of them is back.
      else restingMs = Math.min(restingMs ?? Infinity, pool.retryAfterMs());
      if (client.gone) return exchange.end(499, undefined, exchange.upstream.tally.abandoned);
      if (!call.nextFallback(exchange.caller)) break;
      exchange.model = call.model;
      pool = parts.endpoints.pool(call.model.plugin.vendor)!;
    }
    if (last === undefined)
      throw exchange.fail(upstreamResting(call.model.plugin.vendor, restingMs ?? pool.retryAfterMs()));
    if (isGatewayError(last)) throw exchange.fail(last);
    exchange.answer = { kind: 'upstream-error', answer: last };
    return next(exchange);
  };
}

/**
 * The request's routing session (`x-session-id`, `prompt_cache_key`, else its stable prefix), read
 * from the parsed body. Only when the requested model's pool has affinity and more than one endpoint to
 * choose from, or fallbacks whose pools might: else nothing is hashed.
 */
function routingSession(exchange: Exchange, call: CompatibleCall, pool: EndpointPool): RoutingSession | undefined {
  if (!pool.affinity || (pool.endpoints.length === 1 && !call.hasFallbacks)) return undefined;
  return requestSession(exchange.headers, exchange.body!.body, WIRE_FORMATS[call.format].stablePrefix);
}

/** One attempt at one endpoint: the answer's status and headers, and for a stream its first content event. */
async function attemptOnce(
  parts: AttemptParts,
  exchange: Exchange,
  call: CompatibleCall,
  member: PooledEndpoint,
  signal: AttemptSignal,
  side: AttemptSide | undefined,
): Promise<AttemptResult<CompatibleAnswer, CompatibleFailure>> {
  const { endpoint } = member;
  const { bounds } = parts;
  const times = exchange.upstream;
  if (call.model !== call.requested) exchange.res.setHeader('x-gateway-model', call.model.canonicalId);
  times.attemptAt = performance.now();
  if (times.startedAt === 0) times.startedAt = times.attemptAt;
  const started: AttemptStartMessage | undefined = side?.(member, call.upstreamModel, call.model.canonicalId);
  let response: UpstreamResponse;
  try {
    response = await parts.upstream.open(upstreamRequest(bounds, exchange, call, endpoint, signal, started));
  } catch (error) {
    if (error instanceof UpstreamTransportError) return retry(exchange, endpoint, error.reason, error, error.timedOut);
    throw error;
  }
  const { status, headers } = response;
  if (EVENTS.attemptHeaders.activeFor(exchange)) EVENTS.attemptHeaders.publish({ exchange, status });
  times.status = status;
  if (status === 401 || status === 403) {
    response.discard();
    return { kind: 'answer', answer: { kind: 'auth-rejected', status, provider: endpoint.provider } };
  }
  const contentType = headers['content-type'];
  if (status >= 200 && status < 300 && typeof contentType === 'string' && contentType.startsWith('text/event-stream')) {
    return streamStart(bounds, exchange, call, response, signal, endpoint);
  }
  let bytes: Buffer;
  try {
    bytes = await response.whole(bounds.bodyLimitBytes);
  } catch (error) {
    return retry(exchange, endpoint, 'the answer broke off or was too large', error, true);
  }
  const answer = { kind: 'json', status, headers, bytes, apiKey: endpoint.apiKey } as const;
  if (isRetryableStatus(status)) {
    attemptError(exchange, `answered ${status}`, status);
    return { kind: 'retry', failure: answer, status, waitMs: retryAfterMs(headers) };
  }
  times.doneAt = performance.now();
  return { kind: 'answer', answer };
}

/** The upstream call of one attempt: the call's body to one endpoint, within the waits its kind of answer allows. */
function upstreamRequest(
  bounds: UpstreamBounds,
  exchange: Exchange,
  call: CompatibleCall,
  endpoint: PooledEndpoint['endpoint'],
  signal: AttemptSignal,
  started: AttemptStartMessage | undefined,
): UpstreamRequest {
  return {
    endpoint,
    route: call.upstreamRoute,
    method: call.method,
    body: call.forwarded,
    clientHeaders: exchange.headers,
    requestId: exchange.requestId,
    signal,
    // A JSON answer comes when the whole generation is done, however long it asked for: it is not
    // judged by the first-byte timeout, only by the upstream timeout (a stream's first content is).
    timeoutMs: call.stream ? bounds.firstByteTimeoutMs : bounds.timeoutMs,
    bodyTimeoutMs: bounds.idleTimeoutMs,
    traceparent: attemptTraceparent(exchange, started),
  };
}

/** An attempt that got no usable answer from its endpoint; `reached`: the upstream had the request. */
function retry(
  exchange: Exchange,
  endpoint: PooledEndpoint['endpoint'],
  reason: string,
  cause: unknown,
  reached: boolean,
): AttemptResult<CompatibleAnswer, CompatibleFailure> {
  attemptError(exchange, reason);
  return { kind: 'retry', failure: upstreamFailure(endpoint.provider, reason, cause), reached };
}

/** Holds a stream's opening events until its first content event, within the first-byte timeout. */
async function streamStart(
  bounds: UpstreamBounds,
  exchange: Exchange,
  call: CompatibleCall,
  response: UpstreamResponse,
  signal: AttemptSignal,
  endpoint: PooledEndpoint['endpoint'],
): Promise<AttemptResult<CompatibleAnswer, CompatibleFailure>> {
  const timer = setTimeout(() => signal.abort(), bounds.firstByteTimeoutMs);
  const start = await awaitDispatchedStreamStart(response, call.earlyEvents, bounds.maxSseEventBytes);
  clearTimeout(timer);
  if (start.kind === 'content') {
    exchange.upstream.firstContentAt = performance.now();
    if (EVENTS.attemptFirstContent.activeFor(exchange)) EVENTS.attemptFirstContent.publish({ exchange });
    return {
      kind: 'answer',
      answer: {
        kind: 'stream',
        status: response.status,
        headers: response.headers,
        body: start.body,
        apiKey: endpoint.apiKey,
      },
    };
  }
  const reason =
    start.kind === 'error'
      ? start.reason
      : signal.aborted
        ? `no content within ${bounds.firstByteTimeoutMs} ms`
        : 'the stream broke off before any content';
  // The upstream began a stream: it had the request, whatever came of it.
  return retry(exchange, endpoint, reason, undefined, true);
}

function attemptError(exchange: Exchange, reason: string, status?: number): void {
  if (EVENTS.attemptError.activeFor(exchange)) EVENTS.attemptError.publish({ exchange, reason, status });
}
