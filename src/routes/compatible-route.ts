import type { Request, RequestHandler, Response } from 'express';
import type { Dispatcher } from 'undici';
import { assertModelAllowed } from '../auth/authenticate.ts';
import {
  isGatewayError,
  streamEventTooLarge,
  upstreamAuthRejected,
  upstreamFailure,
  upstreamNotConfigured,
  usageMissing,
  type GatewayError,
} from '../errors/gateway-errors.ts';
import { readJsonRequestBody } from '../http/json-body.ts';
import type { ResolvedModel } from '../plugins/model-registry.ts';
import type { TokenUsage, UpstreamRouteId } from '../plugins/plugin-contract.ts';
import { inBandError } from '../sse/in-band-error.ts';
import { relaySse } from '../sse/sse-relay.ts';
import { requestIdOf } from '../ops/request-id.ts';
import { redactCredential } from '../upstream/redact-credential.ts';
import { readBody, RELAYED_RESPONSE_HEADERS, UpstreamTransportError, type UpstreamEndpoint } from '../upstream/upstream-client.ts';
import { isTerminalEvent, type UsageOutcome } from '../usage/stream-outcome.ts';
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
export async function admitCaller(services: RouteServices, res: Response, resolved: ResolvedModel): Promise<CallerKey | undefined> {
  const caller = res.locals.apiKey as CallerKey | undefined;
  assertModelAllowed(caller, resolved.canonicalId);
  await services.usage.checkQuota(caller);
  return caller;
}

export function endpointFor(services: RouteServices, resolved: ResolvedModel): UpstreamEndpoint {
  const vendor = resolved.plugin.vendor;
  const endpoint = services.endpoints.get(vendor);
  if (!endpoint) throw upstreamNotConfigured(vendor, services.endpoints.envPrefix(vendor));
  return endpoint;
}

/** Aborts the upstream call the moment the client goes away. */
export function abortOnClientClose(res: Response): AbortController {
  const controller = new AbortController();
  res.once('close', () => {
    if (!res.writableFinished) controller.abort();
  });
  return controller;
}

function relayedHeaders(upstreamHeaders: Dispatcher.ResponseData['headers']): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const name of RELAYED_RESPONSE_HEADERS) {
    const value = upstreamHeaders[name];
    // The gateway's own request id answers the client; the upstream's stays visible beside it.
    if (typeof value === 'string') headers[name === 'x-request-id' ? 'x-upstream-request-id' : name] = value;
  }
  return headers;
}

/**
 * One of the compatible routes (Chat Completions, Messages, count_tokens, Responses): validate, resolve
 * the model, forward the client's bytes with only `model` replaced (and `include_usage` set on Chat
 * Completions streams), and return the upstream's JSON or SSE unchanged (apart from the model's
 * declared stream fixups), recording usage on the way.
 */
export function compatibleRoute(route: UpstreamRouteId, services: RouteServices): RequestHandler {
  return async function handleCompatibleRequest(req: Request, res: Response) {
    const startedAt = performance.now();
    // Closures below keep only the bytes: the parsed body is dropped once validated.
    const { bytes: clientBytes, body, members, end } = await readJsonRequestBody(req, services.bodyLimitBytes);
    assertReadKeysOnce(members);
    const resolved = resolveRequest(services, route, body);
    const caller = await admitCaller(services, res, resolved);
    const endpoint = endpointFor(services, resolved);
    const registry = services.registry();
    const upstreamRoute = registry.upstreamRoute(resolved, route);
    const format = upstreamRoute.format;
    const stream = body.stream === true;
    const forwarded = upstreamBody(clientBytes, members, end, {
      model: registry.upstreamModel(resolved, route),
      withIncludeUsage: stream && format === 'chat-completions',
    });

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
        resolved,
        status,
        stream,
        latencyMs: performance.now() - startedAt,
        requestId,
        upstreamMs: upstreamAt === 0 ? 0 : (upstreamDoneAt || performance.now()) - upstreamAt,
        firstByteMs: firstByteAt === 0 ? undefined : firstByteAt - startedAt,
        usage,
        consumed,
        outcome,
        requestBody: () => JSON.parse(clientBytes.toString('utf8')) as Record<string, unknown>,
        responseText: () => streamed.value(),
      };
      res.locals.recorded = true;
      services.usage.record(exchange);
    };
    const fail = (status: number, error: GatewayError, consumed = false): never => {
      record(status, undefined, consumed);
      throw error;
    };

    const abort = abortOnClientClose(res);
    let response: Dispatcher.ResponseData;
    upstreamAt = performance.now();
    try {
      response = await services.upstream.post({ endpoint, route: upstreamRoute, body: forwarded, clientHeaders: req.headers, requestId, signal: abort.signal });
    } catch (error) {
      if (abort.signal.aborted) return record(499, undefined, true);
      if (error instanceof UpstreamTransportError) return fail(502, upstreamFailure(endpoint.provider, error.reason, error));
      throw error;
    }

    const { statusCode, headers } = response;
    if (statusCode === 401 || statusCode === 403) {
      response.body.dump().catch(() => {});
      return fail(502, upstreamAuthRejected(endpoint.provider, statusCode));
    }
    const ok = statusCode >= 200 && statusCode < 300;
    const extractor = services.usage.extractor(format, route, resolved);
    const contentType = headers['content-type'];

    if (ok && typeof contentType === 'string' && contentType.startsWith('text/event-stream')) {
      firstByteAt = performance.now();
      res.writeHead(statusCode, { ...relayedHeaders(headers), 'cache-control': 'no-cache', 'x-accel-buffering': 'no' });
      services.openStreams?.opened();
      let usage: TokenUsage | undefined;
      let terminal = false;
      try {
        const outcome = await relaySse(response.body, res, {
          fixups: registry.streamFixups(route, resolved.canonicalId),
          onEvent: (event) => {
            usage = extractor.fromStreamEvent(usage, event);
            streamed.add(event.data);
            if (!terminal) terminal = isTerminalEvent(format, event);
          },
          maxEventBytes: services.maxSseEventBytes,
          rewrite: (bytes) => redactCredential(bytes, endpoint.apiKey),
        });
        if (outcome.clientClosed) return record(499, usage, true);
        if (outcome.eventTooLarge) {
          res.end(inBandError(format, streamEventTooLarge(endpoint.provider, services.maxSseEventBytes)));
          return record(statusCode, usage, true, 'upstream_cut');
        }
        res.end();
        return record(statusCode, usage, true, terminal ? 'complete' : 'upstream_cut');
      } catch (error) {
        // The status is already sent: all that is left is to cut the stream so the client sees it broke.
        res.destroy();
        return record(statusCode, usage, true, 'upstream_cut');
      } finally {
        services.openStreams?.closed();
      }
    }

    let bytes: Buffer;
    try {
      bytes = await readBody(response.body, services.upstreamBodyLimitBytes);
      upstreamDoneAt = performance.now();
    } catch (error) {
      if (abort.signal.aborted) return record(499, undefined, true);
      record(502, undefined, ok, 'upstream_cut');
      throw upstreamFailure(endpoint.provider, 'the answer broke off or was too large', error);
    }
    let usage: TokenUsage | undefined;
    if (ok) {
      usage = usageOf(bytes, extractor.fromBody);
      if (usage === undefined && format === 'chat-completions') return fail(502, usageMissing(endpoint.provider), true);
    }
    const relayed = redactCredential(bytes, endpoint.apiKey);
    firstByteAt = performance.now();
    res.writeHead(statusCode, { ...relayedHeaders(headers), 'content-length': String(relayed.length) });
    res.end(relayed);
    record(statusCode, usage, ok && format !== 'count-tokens');
  };
}

function usageOf(bytes: Buffer, fromBody: (body: unknown) => TokenUsage | undefined): TokenUsage | undefined {
  try {
    return fromBody(JSON.parse(bytes.toString('utf8')));
  } catch {
    return undefined;
  }
}
