import type { ServerResponse } from 'node:http';
import type { Dispatcher } from 'undici';
import { assertModelAllowed, mayUseModel } from '../auth/authenticate.ts';
import { WIRE_FORMATS } from '../core/formats/index.ts';
import {
  isGatewayError,
  streamEventTooLarge,
  upstreamAuthRejected,
  upstreamFailure,
  upstreamNotConfigured,
  upstreamResting,
  usageMissing,
  type GatewayError,
} from '../errors/gateway-errors.ts';
import { endForClient, type ClientRead } from '../http/client-write-timeout.ts';
import { readJsonRequestBody } from '../http/json-body.ts';
import type { ModelHandler, RequestContext } from '../data-plane/request-context.ts';
import type { ResolvedModel } from '../plugins/model-registry.ts';
import type { TokenUsage, UpstreamRouteId } from '../plugins/plugin-contract.ts';
import { requestIdOf } from '../ops/request-id.ts';
import { relaySse } from '../sse/sse-relay.ts';
import { AttemptSignal } from '../upstream/attempt-signal.ts';
import { retryAfterMs, type EndpointPool, type PooledEndpoint } from '../upstream/endpoint-pool.ts';
import { redactCredential, redactCredentialText } from '../upstream/redact-credential.ts';
import { awaitStreamStart } from '../upstream/stream-start.ts';
import { readBody, RELAYED_RESPONSE_HEADERS, UpstreamTransportError, type UpstreamEndpoint } from '../upstream/upstream-client.ts';
import type { UsageOutcome } from '../usage/stream-outcome.ts';
import { nextFallback } from './model-fallbacks.ts';
import { FAST_CHECKS, REQUEST_SCHEMAS } from './request-schemas.ts';
import type { CallerKey, Exchange, RouteServices } from './route-services.ts';
import { StreamedText } from './streamed-text.ts';
import { assertReadKeysOnce, upstreamBody } from './upstream-body.ts';
import { validateRequest } from './validate-request.ts';

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

/** The caller's key, its model permission checked, and its quota. */
export async function admitCaller(services: RouteServices, context: RequestContext, resolved: ResolvedModel): Promise<CallerKey | undefined> {
  const caller = context.caller;
  assertModelAllowed(caller, resolved.canonicalId);
  await services.usage.checkQuota(caller);
  return caller;
}

/** The pool of endpoints serving the model's provider; 502 saying what to set when there is none. */
export function poolFor(services: RouteServices, resolved: ResolvedModel): EndpointPool {
  const vendor = resolved.plugin.vendor;
  const pool = services.endpoints.pool(vendor);
  if (!pool) throw upstreamNotConfigured(vendor, services.endpoints.envPrefix(vendor));
  return pool;
}

/** Aborts the upstream call the moment the client goes away. */
export function abortOnClientClose(res: ServerResponse): AbortController {
  const controller = new AbortController();
  res.once('close', () => {
    if (!res.writableFinished) controller.abort();
  });
  return controller;
}

/** The upstream headers passed on, each value with the endpoint's credential redacted. */
function relayedHeaders(upstreamHeaders: Dispatcher.ResponseData['headers'], apiKey: string | undefined): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const name of RELAYED_RESPONSE_HEADERS) {
    const value = upstreamHeaders[name];
    // The gateway's own request id answers the client; the upstream's stays visible beside it.
    if (typeof value === 'string') headers[name === 'x-request-id' ? 'x-upstream-request-id' : name] = redactCredentialText(value, apiKey);
  }
  return headers;
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
    const { bytes: clientBytes, body, members, end } = await readJsonRequestBody(req, services.bodyLimitBytes);
    assertReadKeysOnce(members);
    const resolved = resolveRequest(services, route, body);
    const caller = await admitCaller(services, context, resolved);
    // The model being tried: the one requested, then its configured fallbacks (same wire format).
    let model = resolved;
    let pool = poolFor(services, model);
    const registry = services.registry();
    let upstreamRoute = registry.upstreamRoute(model, route);
    const format = upstreamRoute.format;
    const rules = WIRE_FORMATS[format];
    const stream = body.stream === true;
    const forwardedFor = (target: ResolvedModel) =>
      upstreamBody(clientBytes, members, end, { model: registry.upstreamModel(target, route), withIncludeUsage: stream && rules.asksForStreamUsage });
    let forwarded = forwardedFor(model);

    // The endpoint of the latest attempt and how many were made, for the usage record and access logs.
    let serving: PooledEndpoint | undefined;
    let attempts = 0;
    const streamed = new StreamedText((data) => services.usage.streamedText(format, data));
    const requestId = requestIdOf(req);
    // When the upstream call started and its answer was read (0: not yet), and when the status went out.
    let upstreamAt = 0;
    let upstreamDoneAt = 0;
    let firstByteAt = 0;
    const record = (status: number, usage: TokenUsage | undefined, consumed: boolean, outcome: UsageOutcome = status === 499 ? 'client_closed' : 'complete') => {
      const exchange: Exchange = {
        keyId: caller?.id,
        route,
        resolved: model,
        status,
        stream,
        latencyMs: performance.now() - startedAt,
        requestId,
        upstreamMs: upstreamAt === 0 ? 0 : (upstreamDoneAt || performance.now()) - upstreamAt,
        firstByteMs: firstByteAt === 0 ? undefined : firstByteAt - startedAt,
        usage,
        consumed,
        outcome,
        endpoint: serving?.name,
        attempts,
        requestBody: () => JSON.parse(clientBytes.toString('utf8')) as Record<string, unknown>,
        responseText: () => streamed.value(),
      };
      context.upstreamEndpoint = serving?.name;
      context.upstreamAttempts = attempts;
      context.recorded = true;
      services.usage.record(exchange);
    };
    // An answer's end, as the client took it: a client that left is a 499, one that stopped reading is
    // `client_stalled` (the status it was sent is kept).
    const recordEnd = (read: ClientRead, status: number, usage: TokenUsage | undefined, consumed: boolean, outcome?: UsageOutcome) =>
      read === 'taken' ? record(status, usage, consumed, outcome) : read === 'closed' ? record(499, usage, consumed) : record(status, usage, consumed, 'client_stalled');
    const fail = (status: number, error: GatewayError, consumed = false): never => {
      record(status, undefined, consumed);
      throw error;
    };

    let clientGone = false;
    let attemptAbort: AttemptSignal | undefined;
    res.once('close', () => {
      if (res.writableFinished) return;
      clientGone = true;
      attemptAbort?.abort();
    });

    const firstByteTimeoutMs = services.firstByteTimeoutMs ?? services.upstream.timeoutMs;
    const idleTimeoutMs = services.idleTimeoutMs ?? services.upstream.timeoutMs;
    let extractor = services.usage.extractor(format, route, model);
    // Allocated only once an attempt failed: the healthy single-endpoint case keeps none of this.
    let tried: PooledEndpoint[] | undefined;
    let lastStatus: { statusCode: number; headers: Dispatcher.ResponseData['headers']; bytes: Buffer; apiKey?: string } | undefined;
    let lastError: GatewayError | undefined;
    const fallbacks = services.fallbacks?.get(resolved.canonicalId);
    let nextFallbackIndex = 0;
    let restingRetryAfterMs: number | undefined;

    for (;;) {
      const attemptsBefore = attempts;
      for (let attempt = 0; attempt < pool.maxAttempts; attempt++) {
        const member = pool.pick(tried);
        if (!member) break;
        serving = member;
        attempts += 1;
        if (model !== resolved) res.setHeader('x-gateway-model', model.canonicalId);
        const endpoint = member.endpoint;
        const failed = (error: GatewayError | undefined, retryAfter?: number) => {
          pool.failed(member, retryAfter);
          (tried ??= []).push(member);
          lastError = error;
          if (error) lastStatus = undefined;
        };
        const signal = (attemptAbort = new AttemptSignal());
        let response: Dispatcher.ResponseData;
        if (upstreamAt === 0) upstreamAt = performance.now();
        try {
          response = await services.upstream.post({
            endpoint,
            route: upstreamRoute,
            body: forwarded,
            clientHeaders: req.headers,
            requestId,
            signal,
            timeoutMs: firstByteTimeoutMs,
            bodyTimeoutMs: idleTimeoutMs,
          });
        } catch (error) {
          if (clientGone) {
            pool.released(member);
            return record(499, undefined, true);
          }
          if (error instanceof UpstreamTransportError) {
            failed(upstreamFailure(endpoint.provider, error.reason, error));
            continue;
          }
          pool.released(member);
          throw error;
        }

        const { statusCode, headers } = response;
        if (statusCode === 401 || statusCode === 403) {
          pool.succeeded(member);
          response.body.dump().catch(() => {});
          return fail(502, upstreamAuthRejected(endpoint.provider, statusCode));
        }
        const ok = statusCode >= 200 && statusCode < 300;
        const contentType = headers['content-type'];

        if (FAILOVER_STATUSES.has(statusCode)) {
          let bytes: Buffer;
          try {
            bytes = await readBody(response.body, services.upstreamBodyLimitBytes);
          } catch (error) {
            if (clientGone) return record(499, undefined, true);
            failed(upstreamFailure(endpoint.provider, 'the answer broke off or was too large', error));
            continue;
          }
          failed(undefined, statusCode === 429 || statusCode === 503 ? retryAfterMs(headers['retry-after']) : undefined);
          lastStatus = { statusCode, headers, bytes, apiKey: endpoint.apiKey };
          continue;
        }

        if (ok && typeof contentType === 'string' && contentType.startsWith('text/event-stream')) {
          const timer = setTimeout(() => attemptAbort!.abort(), firstByteTimeoutMs);
          const start = await awaitStreamStart(response.body, format, services.maxSseEventBytes);
          clearTimeout(timer);
          if (start.kind !== 'content') {
            if (clientGone) {
              pool.released(member);
              return record(499, undefined, true);
            }
            const reason = start.kind === 'error' ? start.reason : signal.aborted ? `no content within ${firstByteTimeoutMs} ms` : 'the stream broke off before any content';
            failed(upstreamFailure(endpoint.provider, reason));
            continue;
          }
          pool.succeeded(member);
          firstByteAt = performance.now();
          res.writeHead(statusCode, { ...relayedHeaders(headers, endpoint.apiKey), 'cache-control': 'no-cache', 'x-accel-buffering': 'no' });
          services.openStreams?.opened();
          let usage: TokenUsage | undefined;
          let terminal = false;
          try {
            const outcome = await relaySse(start.body, res, {
              fixups: registry.streamFixups(route, model.canonicalId),
              onEvent: (event) => {
                usage = extractor.fromStreamEvent(usage, event);
                streamed.add(event.data);
                if (!terminal) terminal = rules.isTerminalEvent(event);
              },
              maxEventBytes: services.maxSseEventBytes,
              rewrite: (bytes) => redactCredential(bytes, endpoint.apiKey),
              clientWriteTimeoutMs: services.clientWriteTimeoutMs,
            });
            if (outcome.clientStalled) return record(statusCode, usage, true, 'client_stalled');
            if (outcome.clientClosed) return record(499, usage, true);
            if (outcome.eventTooLarge) {
              const read = await endForClient(res, rules.inBandError(streamEventTooLarge(endpoint.provider, services.maxSseEventBytes)), services.clientWriteTimeoutMs);
              return recordEnd(read, statusCode, usage, true, 'upstream_cut');
            }
            return recordEnd(await endForClient(res, undefined, services.clientWriteTimeoutMs), statusCode, usage, true, terminal ? 'complete' : 'upstream_cut');
          } catch (error) {
            if (clientGone) return record(499, usage, true);
            // The status is already sent: the client learns of the break in the stream's own format, and
            // the stream ends without the terminal event that would make it look complete.
            pool.failed(member);
            const stalled = isStall(error);
            const reason = stalled ? `the stream stalled (no data for ${idleTimeoutMs} ms)` : 'the stream broke off';
            const read = await endForClient(res, rules.inBandError(upstreamFailure(endpoint.provider, reason, error)), services.clientWriteTimeoutMs);
            return recordEnd(read, statusCode, usage, true, stalled ? 'stalled' : 'upstream_cut');
          } finally {
            services.openStreams?.closed();
          }
        }

        let bytes: Buffer;
        try {
          bytes = await readBody(response.body, services.upstreamBodyLimitBytes);
          upstreamDoneAt = performance.now();
        } catch (error) {
          if (clientGone) {
            pool.released(member);
            return record(499, undefined, true);
          }
          failed(upstreamFailure(endpoint.provider, 'the answer broke off or was too large', error));
          continue;
        }
        pool.succeeded(member);
        let usage: TokenUsage | undefined;
        if (ok) {
          usage = usageOf(bytes, extractor.fromBody);
          if (usage === undefined && rules.usageRequired) return fail(502, usageMissing(endpoint.provider), true);
        }
        const relayed = redactCredential(bytes, endpoint.apiKey);
        firstByteAt = performance.now();
        res.writeHead(statusCode, { ...relayedHeaders(headers, endpoint.apiKey), 'content-length': String(relayed.length) });
        return recordEnd(await endForClient(res, relayed, services.clientWriteTimeoutMs), statusCode, usage, ok && rules.consumesTokens);
      }

      // Every attempt at this model failed before anything reached the client: its next fallback, if any.
      if (clientGone) return record(499, undefined, true);
      // Every endpoint of this model rested: the 503's Retry-After is the soonest any of them is back.
      if (attempts === attemptsBefore) restingRetryAfterMs = Math.min(restingRetryAfterMs ?? Infinity, pool.retryAfterMs());
      const next =
        fallbacks &&
        nextFallback(registry, fallbacks, nextFallbackIndex, route, resolved, (target) => mayUseModel(caller, target.canonicalId) && services.endpoints.pool(target.plugin.vendor) !== undefined);
      if (!next) break;
      nextFallbackIndex = next.index;
      model = next.resolved;
      pool = services.endpoints.pool(model.plugin.vendor)!;
      upstreamRoute = registry.upstreamRoute(model, route);
      forwarded = forwardedFor(model);
      extractor = services.usage.extractor(format, route, model);
      tried = undefined;
    }

    if (clientGone) return record(499, undefined, true);
    if (lastStatus) {
      // The last endpoint's own retryable answer (429, 5xx) goes back as it came, as with one endpoint.
      const relayed = redactCredential(lastStatus.bytes, lastStatus.apiKey);
      firstByteAt = performance.now();
      res.writeHead(lastStatus.statusCode, { ...relayedHeaders(lastStatus.headers, lastStatus.apiKey), 'content-length': String(relayed.length) });
      return recordEnd(await endForClient(res, relayed, services.clientWriteTimeoutMs), lastStatus.statusCode, undefined, false);
    }
    if (lastError) return fail(lastError.status, lastError);
    return fail(503, upstreamResting(model.plugin.vendor, restingRetryAfterMs ?? pool.retryAfterMs()));
  };
}

/** Upstream statuses that mean "this endpoint, not this request": the next endpoint is tried. */
const FAILOVER_STATUSES = new Set([429, 500, 502, 503, 504, 529]);

function isStall(error: unknown): boolean {
  const code = (error as { code?: string } | null)?.code ?? (error as { cause?: { code?: string } } | null)?.cause?.code;
  return code === 'UND_ERR_BODY_TIMEOUT';
}

function usageOf(bytes: Buffer, fromBody: (body: unknown) => TokenUsage | undefined): TokenUsage | undefined {
  try {
    return fromBody(JSON.parse(bytes.toString('utf8')));
  } catch {
    return undefined;
  }
}
