import { randomUUID } from 'node:crypto';
import { upstreamAuthRejected, upstreamFailure, upstreamTimeout, usageMissing, type GatewayError } from '../../core/gateway-errors.ts';
import type { ModelRegistry, ResolvedModel } from '../../core/model-registry.ts';
import type { NativeChatAdapter, TokenUsage, UpstreamRoute } from '../../plugins/plugin-contract.ts';
import type { AttemptSignal } from '../upstream/attempt-signal.ts';
import type { PooledEndpoint } from '../upstream/endpoint-pool.ts';
import type { AttemptResult, FailoverPlan } from '../upstream/failover/attempt-upstream.ts';
import { isRetryableStatus, retryAfterMs, type RetryPolicy } from '../upstream/failover/retry-policy.ts';
import { redactCredentialText } from '../upstream/redact-credential.ts';
import type { RoutingSession } from '../upstream/session-affinity.ts';
import { isPluginFault, upstreamJson } from '../../plugins/plugin-fault.ts';
import { reportPluginFault } from './plugin-faults.ts';
import { UpstreamTransportError } from '../upstream/upstream-client.ts';
import type { ExchangeRecorder } from './exchange-recorder.ts';
import { failoverWarning, type RouteServices } from '../route-services.ts';
import { traceAttempt, type TracedRequest } from './attempt-tracing.ts';
import { WIRE_FORMATS } from '../../core/formats/index.ts';

/** One `/v1/chat` request as sent upstream: the adapter's body, its route, and its time bounds. */
export interface ChatCall {
  readonly provider: string;
  readonly adapter: NativeChatAdapter;
  readonly upstreamRoute: UpstreamRoute;
  /** The model ID the provider is sent (`gen_ai.request.model`). */
  readonly upstreamModel: string;
  readonly upstreamBody: Record<string, unknown>;
  readonly payload: string;
  readonly requestId: string | undefined;
  /** Each attempt's bound: the gateway's upstream timeout, shortened by the caller's `timeout`. */
  readonly attemptTimeoutMs: number;
  /** `max_retries` + 1 attempts, waiting between rounds, all before the deadline. */
  readonly plan: FailoverPlan & { readonly retry: { readonly deadline: number } };
}

/**
 * The adapter's request for the validated body, and the retries and timeouts the caller asked for;
 * `session` picks the endpoints when the pool keeps sessions on one endpoint.
 */
export function chatCall(services: RouteServices, registry: ModelRegistry, resolved: ResolvedModel, body: Record<string, unknown>, requestId: string | undefined, policy: RetryPolicy, startedAt: number, caller?: string, session?: RoutingSession): ChatCall {
  const adapter = resolved.plugin.nativeChat!;
  const upstreamModel = registry.upstreamModel(resolved, 'chat');
  const upstreamBody = adapter.buildRequest({
    upstreamModel,
    input: body.input as string,
    temperature: body.temperature as number | undefined,
    maxOutputTokens: body.max_output_tokens as number | undefined,
    webSearch: body.web_search === true,
  });
  const gatewayTimeoutMs = services.upstream.timeoutMs;
  const maxRetries = (body.max_retries as number | undefined) ?? policy.defaultMaxRetries;
  return {
    provider: resolved.plugin.vendor,
    adapter,
    upstreamRoute: resolved.plugin.routes[adapter.route]!,
    upstreamModel,
    upstreamBody,
    payload: upstreamJson(resolved.plugin.vendor, upstreamBody),
    requestId,
    attemptTimeoutMs: body.timeout === undefined ? gatewayTimeoutMs : Math.min(gatewayTimeoutMs, Math.ceil((body.timeout as number) * 1000)),
    plan: { maxAttempts: maxRetries + 1, retry: { policy, deadline: startedAt + policy.deadlineMs }, caller, session, onFailure: failoverWarning(services, requestId) },
  };
}

/** What one endpoint answered: a 2xx body, or a failure that is final for this request. */
export type ChatAnswer = { readonly body: Buffer; readonly failure?: undefined } | { readonly failure: GatewayError };

/** One attempt at one endpoint, bounded by the attempt timeout and the deadline. */
export async function attemptChat(services: RouteServices, call: ChatCall, member: PooledEndpoint, signal: AttemptSignal, recorder: ExchangeRecorder, traced?: TracedRequest): Promise<AttemptResult<ChatAnswer, GatewayError>> {
  const { provider, plan } = call;
  const timeoutMs = Math.max(1, Math.min(call.attemptTimeoutMs, Math.ceil(plan.retry.deadline - performance.now())));
  // Shorter than the gateway's own upstream timeout: the caller's `timeout`, or the rest of its deadline.
  const callerBound = timeoutMs < services.upstream.timeoutMs;
  const timer = setTimeout(() => signal.abort(), timeoutMs);
  const attemptAt = performance.now();
  recorder.attemptAt = attemptAt;
  const span = traceAttempt(recorder.trace, traced, member, call.upstreamModel, recorder.model.canonicalId);
  try {
    const response = await services.upstream.open({ endpoint: member.endpoint, route: call.upstreamRoute, body: call.payload, requestId: call.requestId, signal, timeoutMs, traceparent: span?.traceparent, tracestate: span?.tracestate });
    span?.responded(response.status);
    recorder.upstreamStatus = response.status;
    const bytes = await response.whole(services.upstreamBodyLimitBytes);
    const status = response.status;
    if (status >= 200 && status < 300) return { kind: 'answer', answer: { body: bytes } };
    if (status === 401 || status === 403) return { kind: 'answer', answer: { failure: upstreamAuthRejected(provider, status) } };
    const failure = upstreamFailure(provider, `upstream answered ${status}${upstreamMessage(bytes, member.endpoint.apiKey)}`);
    if (isRetryableStatus(status)) {
      span?.failed(`answered ${status}`, status);
      return { kind: 'retry', failure, status, waitMs: retryAfterMs(response.headers) };
    }
    return { kind: 'answer', answer: { failure } };
  } catch (error) {
    // The client's leaving also pulls the signal: the failover layer tells the two apart.
    // The upstream had the request (a timeout, or an answer that broke off): it may have worked on it.
    let result: AttemptResult<ChatAnswer, GatewayError>;
    if (signal.aborted) result = { kind: 'retry', failure: upstreamTimeout(provider, error), callerBound, reached: true };
    else if (error instanceof UpstreamTransportError) {
      result = error.timedOut ? { kind: 'retry', failure: upstreamTimeout(provider, error), callerBound, reached: true } : { kind: 'retry', failure: upstreamFailure(provider, error.reason, error) };
    } else result = { kind: 'retry', failure: upstreamFailure(provider, 'the answer broke off', error), reached: true };
    span?.failed(result.kind === 'retry' && isGatewayErrorLike(result.failure) ? result.failure.detail : 'failed');
    return result;
  } finally {
    recorder.upstreamSpentMs = (recorder.upstreamSpentMs ?? 0) + performance.now() - attemptAt;
    clearTimeout(timer);
  }
}

const isGatewayErrorLike = (failure: unknown): failure is { detail: string } => typeof (failure as { detail?: unknown } | null)?.detail === 'string';

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

/** The route's answer from the upstream's 2xx body; throws (recorded) when it holds no JSON, usage or text. */
export function chatResult(services: RouteServices, call: ChatCall, resolved: ResolvedModel, body: Buffer, apiKey: string | undefined, recorder: ExchangeRecorder): { payload: Buffer; usage: TokenUsage } {
  let answer: unknown;
  try {
    answer = JSON.parse(body.toString('utf8'));
  } catch {
    return recorder.fail(upstreamFailure(call.provider, 'the answer was not JSON'));
  }
  let usage: TokenUsage | undefined;
  let answerText: string | undefined;
  try {
    usage = services.usage.extractor(call.upstreamRoute.format, call.adapter.route, resolved).fromBody(answer);
    if (!usage) return recorder.fail(usageMissing(call.provider));
    answerText = call.adapter.readText(answer);
  } catch (error) {
    if (!isPluginFault(error)) throw error;
    // The upstream answered: the usage read so far, or an estimate, is recorded.
    return recorder.fail(reportPluginFault(services, error, recorder.faultSite('chat')), true, usage, 'plugin_error');
  }
  if (answerText === undefined) return recorder.fail(upstreamFailure(call.provider, 'the answer held no text'), true, usage);
  // Redacted as text: parsing has decoded any JSON escapes of the key.
  const text = redactCredentialText(answerText, apiKey);
  if (recorder.trace?.recording) {
    WIRE_FORMATS[call.upstreamRoute.format].genAi.fromBody(answer, (recorder.facts = {}));
    if (recorder.trace.capturesContent) recorder.outputText = () => text;
  }
  const { totalTokens, chargedTokens } = services.usage.charge(usage, resolved);
  const result = {
    id: `chat-${randomUUID()}`,
    model: resolved.canonicalId,
    result: { text },
    usage: { input_tokens: usage.inputTokens, output_tokens: usage.outputTokens, total_tokens: totalTokens, cached_tokens: usage.cachedTokens, charged_tokens: chargedTokens },
  };
  return { payload: Buffer.from(JSON.stringify(result)), usage };
}
