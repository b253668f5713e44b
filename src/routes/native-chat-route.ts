import { randomUUID } from 'node:crypto';
import type { Request, RequestHandler, Response } from 'express';
import * as yup from 'yup';
import {
  fieldError,
  isGatewayError,
  upstreamAuthRejected,
  upstreamFailure,
  upstreamResting,
  upstreamTimeout,
  usageMissing,
  validationError,
  type GatewayError,
} from '../errors/gateway-errors.ts';
import { endForClient } from '../http/client-write-timeout.ts';
import { readJsonObject } from '../http/json-body.ts';
import { ROUTE_PATHS, type ModelRegistry, type ResolvedModel } from '../plugins/model-registry.ts';
import type { TokenUsage } from '../plugins/plugin-contract.ts';
import type { UsageOutcome } from '../usage/stream-outcome.ts';
import { requestIdOf } from '../ops/request-id.ts';
import { redactCredentialText } from '../upstream/redact-credential.ts';
import type { PooledEndpoint } from '../upstream/endpoint-pool.ts';
import { readBody, UpstreamTransportError, type UpstreamEndpoint } from '../upstream/upstream-client.ts';
import { abortOnClientClose, admitCaller, poolFor } from './compatible-route.ts';
import type { RouteServices } from './route-services.ts';
import { validateRequest } from './validate-request.ts';
import { backoffMs, DEFAULT_RETRY_POLICY, isRetryableStatus, retryAfterMs, type RetryPolicy } from '../upstream/failover/retry-policy.ts';

export { backoffMs, DEFAULT_RETRY_POLICY, retryAfterMs, type RetryPolicy };

/** The largest `max_retries` a caller may ask for; a larger value is a 400 ValidationError. */
export const MAX_RETRIES_CAP = 10;

const FIELDS = ['model', 'input', 'web_search', 'temperature', 'max_output_tokens', 'max_retries', 'timeout'];
const STREAMING_ROUTES = [ROUTE_PATHS['chat-completions'], ROUTE_PATHS.responses, ROUTE_PATHS.messages].join(', ');
/** Suffixes of the web chat's presets, which are not API model IDs. */
const PRESET_SUFFIX = /^(.+?)[-_:. ]?(thinking|think|reasoning|fast|instant)$/i;

const number = (message: string) => yup.number().typeError(message);
const schema = yup.object({
  model: yup.string().typeError('must be a string').required('is required'),
  input: yup.string().typeError('must be a string').nonNullable('must be a string').defined('is required').min(1, 'must not be empty'),
  web_search: yup.boolean().typeError('must be true or false'),
  temperature: number('must be a number').min(0, 'must be >= 0'),
  max_output_tokens: number('must be a positive integer').integer('must be a positive integer').min(1, 'must be a positive integer'),
  max_retries: number('must be an integer >= 0')
    .integer('must be an integer >= 0')
    .min(0, 'must be an integer >= 0')
    .max(MAX_RETRIES_CAP, `must be at most ${MAX_RETRIES_CAP}`),
  timeout: number('must be a number of seconds > 0').moreThan(0, 'must be a number of seconds > 0'),
});

/** Why a model ID is refused on the native route: a web-chat preset gets a pointer to the real IDs. */
function modelProblem(registry: ModelRegistry, id: string): GatewayError | undefined {
  try {
    registry.resolve('chat', id);
    return undefined;
  } catch (error) {
    if (!isGatewayError(error)) throw error;
    const preset = PRESET_SUFFIX.exec(id);
    if (!preset) return error;
    let base: ResolvedModel;
    try {
      base = registry.resolve('chat', preset[1]!);
    } catch {
      return error;
    }
    const aliases = (base.plugin.aliases ?? []).filter((alias) => alias.routes.includes('chat')).map((alias) => `'${alias.id}'`);
    const use = [...aliases, `a concrete ID such as '${base.canonicalId}'`].join(' or ');
    return validationError([fieldError('model', `'${id}' is a web chat preset, not a model ID; use ${use} (this route always uses the low reasoning preset)`)], 'model');
  }
}

function validate(registry: ModelRegistry, body: Record<string, unknown>): ResolvedModel {
  const unknown = Object.keys(body).filter((key) => !FIELDS.includes(key));
  validateRequest(schema, body, () => {
    const errors = unknown.map((key) =>
      key === 'stream'
        ? fieldError('stream', `is not accepted: ${ROUTE_PATHS.chat} never streams; use ${STREAMING_ROUTES} for SSE`)
        : fieldError(key, 'is not a field of this route'),
    );
    const model = typeof body.model === 'string' ? modelProblem(registry, body.model) : undefined;
    errors.push(...(model?.errors ?? []));
    if (body.web_search === true && typeof body.model === 'string' && !model) {
      const resolved = registry.resolve('chat', body.model);
      if (!resolved.model.webSearch) errors.push(fieldError('web_search', `the model '${resolved.canonicalId}' has no web search tool; drop the field or pick a model that has one`));
    }
    return errors.length ? validationError(errors) : undefined;
  });
  return registry.resolve('chat', body.model as string);
}

type Attempt =
  | { kind: 'answer'; status: number; body: Buffer }
  | { kind: 'retry'; failure: GatewayError; waitMs?: number; status?: number; endpointFault: boolean }
  | { kind: 'final'; failure: GatewayError };

/**
 * The upstream's error message, for the `detail` (which the error log repeats). Redacted once parsed:
 * parsing decodes the key's JSON escapes, and before the cut, which could leave a part of it.
 */
function upstreamMessage(body: Buffer, apiKey: string | undefined): string {
  try {
    const parsed = JSON.parse(body.toString('utf8')) as { error?: { message?: unknown }; message?: unknown };
    const message = parsed.error?.message ?? parsed.message;
    return typeof message === 'string' ? `: ${redactCredentialText(message, apiKey).slice(0, 300)}` : '';
  } catch {
    return '';
  }
}

/**
 * `POST /v1/chat`: plain text in, plain text out, never streamed. The core owns validation, retries,
 * timeouts and usage; the model's plugin adapter owns only the mapping to its upstream format (always
 * with the provider's low reasoning preset).
 */
export function nativeChatRoute(services: RouteServices, policy: RetryPolicy = DEFAULT_RETRY_POLICY): RequestHandler {
  return async function handleNativeChat(req: Request, res: Response) {
    const startedAt = performance.now();
    const body = await readJsonObject(req, services.bodyLimitBytes);
    const registry = services.registry();
    const resolved = validate(registry, body);
    const caller = await admitCaller(services, res, resolved);
    const pool = poolFor(services, resolved);
    const adapter = resolved.plugin.nativeChat!;
    const upstreamRoute = resolved.plugin.routes[adapter.route]!;
    const upstreamBody = adapter.buildRequest({
      upstreamModel: registry.upstreamModel(resolved, 'chat'),
      input: body.input as string,
      temperature: body.temperature as number | undefined,
      maxOutputTokens: body.max_output_tokens as number | undefined,
      webSearch: body.web_search === true,
    });
    const maxRetries = (body.max_retries as number | undefined) ?? policy.defaultMaxRetries;
    const gatewayTimeoutMs = services.upstream.timeoutMs;
    const attemptTimeoutMs = body.timeout === undefined ? gatewayTimeoutMs : Math.min(gatewayTimeoutMs, Math.ceil((body.timeout as number) * 1000));
    const deadline = startedAt + policy.deadlineMs;
    const clientGone = abortOnClientClose(res);
    const provider = resolved.plugin.vendor;
    const payload = JSON.stringify(upstreamBody);
    const requestId = requestIdOf(req);
    // Time spent waiting on upstream attempts, summed; when the status went out (0: not yet).
    let upstreamMs = 0;
    let firstByteAt = 0;

    const record = (status: number, usage: TokenUsage | undefined, outcome: UsageOutcome = status === 499 ? 'client_closed' : 'complete') => {
      res.locals.recorded = true;
      services.usage.record({
        keyId: caller?.id,
        route: 'chat',
        resolved,
        status,
        stream: false,
        latencyMs: performance.now() - startedAt,
        requestId,
        upstreamMs,
        firstByteMs: firstByteAt === 0 ? undefined : firstByteAt - startedAt,
        usage,
        consumed: usage !== undefined,
        outcome,
        endpoint: serving?.name,
        attempts,
        requestBody: () => upstreamBody,
        responseText: () => '',
      });
    };

    let serving: PooledEndpoint | undefined;
    let attempts = 0;
    const attempt = async (member: PooledEndpoint): Promise<Attempt> => {
      serving = member;
      attempts += 1;
      const outcome = await attemptOnce(member.endpoint);
      if (outcome.kind === 'retry' && outcome.endpointFault) pool.failed(member, outcome.status === 429 || outcome.status === 503 ? outcome.waitMs : undefined);
      else if (outcome.kind === 'retry') pool.released(member);
      else pool.succeeded(member);
      return outcome;
    };

    const attemptOnce = async (endpoint: UpstreamEndpoint): Promise<Attempt> => {
      const timeoutMs = Math.max(1, Math.min(attemptTimeoutMs, Math.ceil(deadline - performance.now())));
      const controller = new AbortController();
      const stop = () => controller.abort();
      clientGone.signal.addEventListener('abort', stop);
      const timer = setTimeout(stop, timeoutMs);
      const attemptAt = performance.now();
      try {
        const response = await services.upstream.post({ endpoint, route: upstreamRoute, body: payload, requestId, signal: controller.signal, timeoutMs });
        const bytes = await readBody(response.body, services.upstreamBodyLimitBytes);
        const status = response.statusCode;
        if (status >= 200 && status < 300) return { kind: 'answer', status, body: bytes };
        if (status === 401 || status === 403) return { kind: 'final', failure: upstreamAuthRejected(provider, status) };
        const failure = upstreamFailure(provider, `upstream answered ${status}${upstreamMessage(bytes, endpoint.apiKey)}`);
        if (isRetryableStatus(status)) {
          return { kind: 'retry', failure, waitMs: retryAfterMs(response.headers), status, endpointFault: status === 429 || status >= 500 };
        }
        return { kind: 'final', failure };
      } catch (error) {
        if (clientGone.signal.aborted) throw error;
        if (controller.signal.aborted) return { kind: 'retry', failure: upstreamTimeout(provider, error), endpointFault: true };
        if (error instanceof UpstreamTransportError) {
          return { kind: 'retry', failure: error.timedOut ? upstreamTimeout(provider, error) : upstreamFailure(provider, error.reason, error), endpointFault: true };
        }
        return { kind: 'retry', failure: upstreamFailure(provider, 'the answer broke off', error), endpointFault: true };
      } finally {
        upstreamMs += performance.now() - attemptAt;
        clearTimeout(timer);
        clientGone.signal.removeEventListener('abort', stop);
      }
    };

    const first = pool.pick();
    if (!first) {
      const resting = upstreamResting(provider, pool.retryAfterMs());
      record(resting.status, undefined);
      throw resting;
    }
    let member: PooledEndpoint = first;
    // Endpoints already tried since the last wait: a retry goes to another one first, without waiting.
    let tried: PooledEndpoint[] | undefined;
    let outcome: Attempt;
    for (let retry = 0; ; retry += 1) {
      try {
        outcome = await attempt(member);
      } catch (error) {
        pool.released(member);
        return record(499, undefined);
      }
      if (outcome.kind !== 'retry' || retry >= maxRetries) break;
      (tried ??= []).push(member);
      const other = pool.pick(tried);
      if (other) {
        member = other;
        continue;
      }
      tried = undefined;
      const wait = Math.max(policy.minDelayMs, outcome.waitMs ?? backoffMs(policy, retry));
      if (wait > policy.maxRetryAfterMs) break;
      // The next attempt would start at or after the deadline: answer with what the last one gave.
      if (performance.now() + wait >= deadline) break;
      await policy.sleep(wait);
      if (clientGone.signal.aborted) return record(499, undefined);
      // After waiting out a Retry-After the same endpoint may be tried again (the wait is what it asked
      // for); one whose breaker tripped is not, and with every endpoint resting the last answer stands.
      const next = pool.pick() ?? (member.tripped ? undefined : member);
      if (!next) break;
      member = next;
    }
    if (outcome.kind !== 'answer') {
      record(outcome.failure.status, undefined);
      throw outcome.failure;
    }

    let answer: unknown;
    try {
      answer = JSON.parse(outcome.body.toString('utf8'));
    } catch {
      record(502, undefined);
      throw upstreamFailure(provider, 'the answer was not JSON');
    }
    const usage = services.usage.extractor(upstreamRoute.format, adapter.route, resolved).fromBody(answer);
    if (!usage) {
      record(502, undefined);
      throw usageMissing(provider);
    }
    const answerText = adapter.readText(answer);
    if (answerText === undefined) {
      record(502, usage);
      throw upstreamFailure(provider, 'the answer held no text');
    }
    // Redacted as text: parsing has decoded any JSON escapes of the key.
    const text = redactCredentialText(answerText, serving?.endpoint.apiKey);
    const { totalTokens, chargedTokens } = services.usage.charge(usage, resolved);
    const result = {
      id: `chat-${randomUUID()}`,
      model: resolved.canonicalId,
      result: { text },
      usage: {
        input_tokens: usage.inputTokens,
        output_tokens: usage.outputTokens,
        total_tokens: totalTokens,
        cached_tokens: usage.cachedTokens,
        charged_tokens: chargedTokens,
      },
    };
    const payloadOut = Buffer.from(JSON.stringify(result));
    firstByteAt = performance.now();
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': payloadOut.length });
    const taken = await endForClient(res, payloadOut, services.clientWriteTimeoutMs);
    if (taken === 'stalled') record(200, usage, 'client_stalled');
    else record(taken === 'closed' ? 499 : 200, usage);
  };
}
