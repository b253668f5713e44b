import type { IncomingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';
import { mayUseModel } from '../auth/authenticate.ts';
import { upstreamFailure, type GatewayError } from '../../core/gateway-errors.ts';
import type { JsonMember } from '../http/json-scan.ts';
import type { ModelRegistry, ResolvedModel } from '../../core/model-registry.ts';
import type { UpstreamRoute, UpstreamRouteId, UsageExtractor, WireFormat } from '../../plugins/plugin-contract.ts';
import type { AttemptSignal } from '../upstream/attempt-signal.ts';
import type { EndpointPool, PooledEndpoint } from '../upstream/endpoint-pool.ts';
import { attemptUpstream, type AttemptResult, type FailoverOutcome } from '../upstream/failover/attempt-upstream.ts';
import type { ClientWatch } from '../upstream/failover/client-watch.ts';
import { isRetryableStatus, retryAfterMs } from '../upstream/failover/retry-policy.ts';
import { requestSession, type RoutingSession } from '../upstream/session-affinity.ts';
import { awaitDispatchedStreamStart } from '../upstream/stream-start.ts';
import { UpstreamTransportError, type UpstreamResponse } from '../upstream/upstream-client.ts';
import type { UpstreamBody } from '../sse/upstream-body.ts';
import type { ExchangeRecorder } from './exchange-recorder.ts';
import { nextFallback } from './model-fallbacks.ts';
import type { CallerKey } from '../../core/exchange.ts';
import { failoverWarning, type RouteServices } from '../route-services.ts';
import { upstreamBody } from './upstream-body.ts';
import { WIRE_FORMATS } from '../../core/formats/index.ts';
import type { AttemptTrace } from '../../ops/tracing/request-trace.ts';
import { traceAttempt, type TracedRequest } from './attempt-tracing.ts';

type Headers = Dispatcher.ResponseData['headers'];

/** The client's request body: its bytes, its top-level members and where its object ends. */
export interface ClientBody {
  readonly bytes: Buffer;
  readonly members: readonly JsonMember[];
  readonly end: number;
}

/** An upstream's answer as read so far, with the credential of the endpoint it came from (to redact). */
export type CompatibleAnswer =
  | { readonly kind: 'stream'; readonly status: number; readonly headers: Headers; readonly body: UpstreamBody; readonly apiKey?: string }
  | { readonly kind: 'json'; readonly status: number; readonly headers: Headers; readonly bytes: Buffer; readonly apiKey?: string }
  | { readonly kind: 'auth-rejected'; readonly status: number; readonly provider: string };

/** A failed attempt: the upstream's own retryable answer (returned as it came if it is the last), or the gateway's error. */
export type CompatibleFailure = Extract<CompatibleAnswer, { kind: 'json' }> | GatewayError;

/**
 * One compatible request as forwarded upstream: the client's bytes with only `model` replaced, for the
 * model being tried (the one requested, then its fallbacks, all of the same wire format).
 */
export class CompatibleCall {
  model: ResolvedModel;
  upstreamRoute: UpstreamRoute;
  /** The model ID the provider is sent (`gen_ai.request.model`). */
  upstreamModel: string;
  forwarded: Buffer;
  extractor: UsageExtractor;
  readonly format: WireFormat;
  private fallbackIndex = 0;

  constructor(
    private readonly services: RouteServices,
    readonly registry: ModelRegistry,
    readonly route: UpstreamRouteId,
    readonly requested: ResolvedModel,
    readonly stream: boolean,
    private readonly client: ClientBody,
  ) {
    this.model = requested;
    this.upstreamRoute = registry.upstreamRoute(requested, route);
    this.format = this.upstreamRoute.format;
    this.upstreamModel = registry.upstreamModel(requested, route);
    this.forwarded = this.forwardedFor(requested);
    this.extractor = services.usage.extractor(this.format, route, requested);
  }

  /** Moves on to the model's next fallback the caller may use and has an endpoint; false when none is left. */
  nextFallback(caller: CallerKey | undefined): boolean {
    const { services, registry } = this;
    const fallbacks = services.fallbacks?.get(this.requested.canonicalId);
    const allowed = (target: ResolvedModel) => mayUseModel(caller, target.canonicalId) && services.endpoints.pool(target.plugin.vendor) !== undefined;
    const next = fallbacks && nextFallback(registry, fallbacks, this.fallbackIndex, this.route, this.requested, allowed);
    if (!next) return false;
    this.fallbackIndex = next.index;
    this.model = next.resolved;
    this.upstreamRoute = registry.upstreamRoute(next.resolved, this.route);
    this.upstreamModel = registry.upstreamModel(next.resolved, this.route);
    this.forwarded = this.forwardedFor(next.resolved);
    this.extractor = services.usage.extractor(this.format, this.route, next.resolved);
    return true;
  }

  private forwardedFor(target: ResolvedModel): Buffer {
    const { bytes, members, end } = this.client;
    return upstreamBody(bytes, members, end, { model: target === this.model ? this.upstreamModel : this.registry.upstreamModel(target, this.route), withIncludeUsage: this.stream && WIRE_FORMATS[this.format].asksForStreamUsage });
  }
}

/** What a request's attempts came to, over the requested model and its fallbacks. */
export type CompatibleOutcome = Exclude<FailoverOutcome<CompatibleAnswer, CompatibleFailure>, { kind: 'resting' }> | { readonly kind: 'resting'; readonly retryAfterMs: number };

/**
 * Tries the requested model's endpoints, then each fallback's, until one answers. Each model gets one
 * round of failover (no waits: the client's SDK owns retries). The last failure stands when all fail.
 */
export async function attemptModels(services: RouteServices, call: CompatibleCall, pool: EndpointPool, client: ClientWatch, recorder: ExchangeRecorder, context: AttemptContext, caller: CallerKey | undefined): Promise<CompatibleOutcome> {
  let last: CompatibleFailure | undefined;
  let restingMs: number | undefined;
  for (;;) {
    const plan = { maxAttempts: pool.maxAttempts, caller: caller?.id, session: context.session, onFailure: failoverWarning(services, context.requestId) };
    const outcome = await attemptUpstream(pool, plan, client, recorder.tally, (member, signal) => attemptCompatible(services, call, member, signal, context));
    if (outcome.kind === 'answer' || outcome.kind === 'client-gone') return outcome;
    if (outcome.kind === 'failed') last = outcome.failure;
    // Every endpoint of this model rested: the 503's Retry-After is the soonest any of them is back.
    else restingMs = Math.min(restingMs ?? Infinity, pool.retryAfterMs());
    if (client.gone) return { kind: 'client-gone' };
    if (!call.nextFallback(caller)) break;
    recorder.model = call.model;
    pool = services.endpoints.pool(call.model.plugin.vendor)!;
  }
  if (last) return { kind: 'failed', failure: last };
  return { kind: 'resting', retryAfterMs: restingMs ?? pool.retryAfterMs() };
}

/** What an attempt needs of the request beyond the call: its headers and id, its timings, the response to name a fallback on. */
export interface AttemptContext {
  readonly clientHeaders: IncomingHttpHeaders;
  readonly requestId: string | undefined;
  readonly recorder: ExchangeRecorder;
  readonly setHeader: (name: string, value: string) => void;
  /** The request's routing session (see {@link routingSession}), when its pool keeps sessions on one endpoint. */
  readonly session?: RoutingSession;
  /** The request's side of its attempt spans, when it is traced and sampled. */
  readonly traced?: TracedRequest;
}

/**
 * The request's routing session (`x-session-id`, `prompt_cache_key`, else its stable prefix), read
 * from the parsed body before it is dropped. Only when the requested model's pool has affinity and
 * more than one endpoint to choose from, or fallbacks whose pools might: else nothing is hashed.
 */
export function routingSession(services: RouteServices, call: CompatibleCall, pool: EndpointPool, headers: IncomingHttpHeaders, body: Record<string, unknown>): RoutingSession | undefined {
  if (!pool.affinity || (pool.endpoints.length === 1 && !services.fallbacks?.has(call.requested.canonicalId))) return undefined;
  return requestSession(headers, body, WIRE_FORMATS[call.format].stablePrefix);
}

/** One attempt at one endpoint: the answer's status and headers, and for a stream its first content event. */
export async function attemptCompatible(services: RouteServices, call: CompatibleCall, member: PooledEndpoint, signal: AttemptSignal, context: AttemptContext): Promise<AttemptResult<CompatibleAnswer, CompatibleFailure>> {
  const { endpoint } = member;
  const { recorder } = context;
  if (call.model !== call.requested) context.setHeader('x-gateway-model', call.model.canonicalId);
  recorder.attemptAt = performance.now();
  if (recorder.upstreamAt === 0) recorder.upstreamAt = recorder.attemptAt;
  const span = traceAttempt(recorder.trace, context.traced, member, call.upstreamModel, call.model.canonicalId);
  let response: UpstreamResponse;
  try {
    response = await services.upstream.open({
      endpoint,
      route: call.upstreamRoute,
      body: call.forwarded,
      clientHeaders: context.clientHeaders,
      requestId: context.requestId,
      signal,
      // A JSON answer comes when the whole generation is done, however long it asked for: it is not
      // judged by the first-byte timeout, only by the upstream timeout (a stream's first content is).
      timeoutMs: call.stream ? (services.firstByteTimeoutMs ?? services.upstream.timeoutMs) : services.upstream.timeoutMs,
      bodyTimeoutMs: services.idleTimeoutMs ?? services.upstream.timeoutMs,
      traceparent: span?.traceparent,
      tracestate: span?.tracestate,
    });
  } catch (error) {
    if (error instanceof UpstreamTransportError) {
      span?.failed(error.reason);
      return { kind: 'retry', failure: upstreamFailure(endpoint.provider, error.reason, error), reached: error.timedOut };
    }
    throw error;
  }
  const { status, headers } = response;
  span?.responded(status);
  recorder.upstreamStatus = status;
  if (status === 401 || status === 403) {
    response.discard();
    return { kind: 'answer', answer: { kind: 'auth-rejected', status, provider: endpoint.provider } };
  }
  const contentType = headers['content-type'];
  if (status >= 200 && status < 300 && typeof contentType === 'string' && contentType.startsWith('text/event-stream')) {
    return streamStart(services, call, response, signal, endpoint, recorder, span);
  }
  let bytes: Buffer;
  try {
    bytes = await response.whole(services.upstreamBodyLimitBytes);
  } catch (error) {
    span?.failed('the answer broke off or was too large');
    return { kind: 'retry', failure: upstreamFailure(endpoint.provider, 'the answer broke off or was too large', error), reached: true };
  }
  const answer = { kind: 'json', status, headers, bytes, apiKey: endpoint.apiKey } as const;
  if (isRetryableStatus(status)) {
    span?.failed(`answered ${status}`, status);
    return { kind: 'retry', failure: answer, status, waitMs: retryAfterMs(headers) };
  }
  recorder.upstreamDoneAt = performance.now();
  return { kind: 'answer', answer };
}

/** Holds a stream's opening events until its first content event, within the first-byte timeout. */
async function streamStart(
  services: RouteServices,
  call: CompatibleCall,
  response: UpstreamResponse,
  signal: AttemptSignal,
  endpoint: PooledEndpoint['endpoint'],
  recorder: ExchangeRecorder,
  span: AttemptTrace | undefined,
): Promise<AttemptResult<CompatibleAnswer, CompatibleFailure>> {
  const firstByteTimeoutMs = services.firstByteTimeoutMs ?? services.upstream.timeoutMs;
  const timer = setTimeout(() => signal.abort(), firstByteTimeoutMs);
  const start = await awaitDispatchedStreamStart(response, call.format, services.maxSseEventBytes);
  clearTimeout(timer);
  if (start.kind === 'content') {
    recorder.firstContentAt = performance.now();
    span?.firstContent();
    return { kind: 'answer', answer: { kind: 'stream', status: response.status, headers: response.headers, body: start.body, apiKey: endpoint.apiKey } };
  }
  const reason = start.kind === 'error' ? start.reason : signal.aborted ? `no content within ${firstByteTimeoutMs} ms` : 'the stream broke off before any content';
  span?.failed(reason);
  // The upstream began a stream: it had the request, whatever came of it.
  return { kind: 'retry', failure: upstreamFailure(endpoint.provider, reason), reached: true };
}
