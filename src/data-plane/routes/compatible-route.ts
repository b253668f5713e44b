import { assertModelAllowed } from '../auth/authenticate.ts';
import { isGatewayError, upstreamNotConfigured, upstreamResting } from '../../core/gateway-errors.ts';
import { readJsonRequestBody } from '../http/json-body.ts';
import { guardRequest } from '../guardrails/request-guard.ts';
import type { ResolvedModel } from '../../core/model-registry.ts';
import type { UpstreamRouteId } from '../../plugins/plugin-contract.ts';
import type { EndpointPool } from '../upstream/endpoint-pool.ts';
import { ClientWatch } from '../upstream/failover/client-watch.ts';
import { relayAnswer, relayJson, type RelayContext } from './compatible-relay.ts';
import { attemptModels, CompatibleCall, routingSession } from './compatible-upstream.ts';
import { ExchangeRecorder, type ExchangeBasis } from './exchange-recorder.ts';
import { FAST_CHECKS, REQUEST_SCHEMAS } from './request-schemas.ts';
import type { CallerKey } from '../../core/exchange.ts';
import type { RouteServices } from '../route-services.ts';
import { StreamedText } from './streamed-text.ts';
import { assertReadKeysOnce } from './upstream-body.ts';
import { validateRequest } from './validate-request.ts';
import { reserveBudget } from './reserve-budget.ts';
import type { ModelHandler, RequestContext } from '../request-context.ts';
import { AnswerCapture, forwardedHeaderValues, lookUp, openTicket } from '../cache/response-caching.ts';
import { replayCachedAnswer } from './cached-answer.ts';
import { WIRE_FORMATS } from '../../core/formats/index.ts';
import { ATTR, EVENT } from '../../ops/tracing/span-names.ts';
import { tracedRequest } from './attempt-tracing.ts';

/** Validates the body and resolves its model; one 400 lists every bad field, the model included. */
export function resolveRequest(services: RouteServices, route: UpstreamRouteId, body: Record<string, unknown>): ResolvedModel {
  let resolved: ResolvedModel | undefined;
  validateRequest(REQUEST_SCHEMAS[route], body, () => {
    if (typeof body.model !== 'string') return undefined;
    try {
      resolved = services.registry().resolve(route, body.model);
      return undefined;
    } catch (error) {
      if (isGatewayError(error)) return error;
      throw error;
    }
  }, FAST_CHECKS[route]);
  return resolved!;
}

/** The caller's key, its model permission checked. */
export function admitCaller(context: RequestContext, resolved: ResolvedModel): CallerKey | undefined {
  const caller = context.caller;
  assertModelAllowed(caller, resolved.canonicalId);
  return caller;
}

/** The pool of endpoints serving the model's provider; 502 saying what to set when there is none. */
export function poolFor(services: RouteServices, resolved: ResolvedModel): EndpointPool {
  const vendor = resolved.plugin.vendor;
  const pool = services.endpoints.pool(vendor);
  if (!pool) throw upstreamNotConfigured(vendor, services.endpoints.envPrefix(vendor));
  return pool;
}

/**
 * One of the compatible routes (Chat Completions, Messages, count_tokens, Responses): validate, resolve
 * the model, forward the client's bytes with only `model` replaced (and `include_usage` set on Chat
 * Completions streams), and return the upstream's JSON or SSE unchanged (apart from the model's
 * declared stream fixups), recording usage on the way.
 */
export function compatibleRoute(route: UpstreamRouteId, services: RouteServices): ModelHandler {
  return async function handleCompatibleRequest(req, res, context) {
    const startedAt = performance.now();
    // Closures below keep only the bytes: the parsed body is dropped once validated.
    const read = await readJsonRequestBody(req, services.bodyLimitBytes);
    assertReadKeysOnce(read.members);
    const resolved = resolveRequest(services, route, read.body);
    const caller = admitCaller(context, resolved);
    const pool = poolFor(services, resolved);
    // Request guardrails: before the cache, any reservation or upstream call; a redaction rewrites the bytes forwarded.
    const guarding = guardRequest(services, context, route, resolved, read, startedAt);
    const { bytes, body, members, end } = guarding instanceof Promise ? await guarding : guarding;
    const call = new CompatibleCall(services, services.registry(), route, resolved, body.stream === true, { bytes, members, end });
    const streamed = new StreamedText((data) => services.usage.streamedText(call.format, data));
    const { requestId } = context;
    const recorder = new ExchangeRecorder(services, context, compatibleBasis(caller?.id, call, requestId, startedAt, bytes, streamed), resolved);
    // A hit answers before any reservation: it uses no tokens, quota or budget.
    const { caching } = services;
    const ticket = route === 'count-tokens' ? undefined : openTicket(caching, caller, () => ({ route, model: resolved.canonicalId, forwarded: call.forwarded, headers: forwardedHeaderValues(call.upstreamRoute, req.headers), guardrails: context.guardrails?.selection.responseFingerprint }), req.headers, res);
    const hit = ticket && (await lookUp(caching!, ticket, res));
    // The result as the answer's `x-gateway-cache` header says it (none: the cache is off).
    if (context.trace?.recording && res.hasHeader('x-gateway-cache')) context.trace.event(EVENT.cacheLookup, { [ATTR.cacheResult]: String(res.getHeader('x-gateway-cache')) });
    if (hit) return replayCachedAnswer(services, res, call, recorder, hit);
    const reserving = reserveBudget(services, context, res, resolved, body);
    if (reserving) await reserving;
    const client = new ClientWatch(res);
    const traced = tracedRequest(context.trace, context.route, body, call.stream, WIRE_FORMATS[call.format].genAi.inputMessages);
    const attempt = { clientHeaders: req.headers, requestId, recorder, setHeader: (name: string, value: string) => res.setHeader(name, value), session: routingSession(services, call, pool, req.headers, body), traced };
    const outcome = await attemptModels(services, call, pool, client, recorder, attempt, caller);
    const capture = ticket && new AnswerCapture(ticket, caching!);
    const relay: RelayContext = { services, res, call, recorder, streamed, client, capture };
    if (outcome.kind === 'answer') return relayAnswer(relay, outcome);
    if (outcome.kind === 'client-gone') return recorder.record(499, undefined, recorder.tally.abandoned);
    // The last endpoint's own retryable answer (429, 5xx) goes back as it came, as with one endpoint.
    if (outcome.kind === 'failed') return isGatewayError(outcome.failure) ? recorder.fail(outcome.failure) : relayJson(relay, outcome.failure, false);
    return recorder.fail(upstreamResting(call.model.plugin.vendor, outcome.retryAfterMs));
  };
}

function compatibleBasis(keyId: string | undefined, call: CompatibleCall, requestId: string | undefined, startedAt: number, bytes: Buffer, streamed: StreamedText): ExchangeBasis {
  return {
    keyId,
    route: call.route,
    stream: call.stream,
    requestId,
    startedAt,
    requestBody: () => JSON.parse(bytes.toString('utf8')) as Record<string, unknown>,
    responseText: () => streamed.value(),
  };
}
