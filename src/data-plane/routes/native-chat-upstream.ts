import { randomUUID } from 'node:crypto';
import {
  type AttemptSignal,
  UpstreamTransportError,
  type UpstreamClient,
  type UpstreamResponse,
} from '../upstream/upstream-client.ts';
import {
  upstreamAuthRejected,
  upstreamFailure,
  upstreamTimeout,
  usageMissing,
  type GatewayError,
} from '../../core/gateway-errors.ts';
import type { ResolvedModel } from '../../core/model-registry.ts';
import type { TokenUsage } from '../../plugins/plugin-contract.ts';
import {
  attemptTraceparent,
  type AttemptResult,
  type AttemptSide,
  type PooledEndpoint,
} from '../upstream/endpoint-pool.ts';
import type { ChatCall } from './chat-call.ts';
import { isRetryableStatus, retryAfterMs } from '../upstream/failover/retry-policy.ts';
import { redactCredentialText } from '../upstream/redact-credential.ts';
import { isPluginFault } from '../../plugins/plugin-fault.ts';
import { faultOf } from './plugin-faults.ts';
import { standardBodyUsage } from './standard-usage.ts';
import type { UsageAccounting } from '../../core/exchange.ts';
import { EVENTS } from '../../core/diagnostics.ts';
import { WIRE_FORMATS } from '../../core/formats/index.ts';
import type { Exchange } from '../pipeline/exchange.ts';

/** What one endpoint answered: a 2xx body, or a failure that is final for this request. */
export type ChatAnswer = { readonly body: Buffer; readonly failure?: undefined } | { readonly failure: GatewayError };

/** One attempt at one endpoint, bounded by the attempt timeout and the deadline. */
export async function attemptChat(
  upstream: UpstreamClient,
  bodyLimitBytes: number,
  call: ChatCall,
  member: PooledEndpoint,
  signal: AttemptSignal,
  exchange: Exchange,
  side: AttemptSide | undefined,
): Promise<AttemptResult<ChatAnswer, GatewayError>> {
  const { provider, plan } = call;
  const timeoutMs = Math.max(1, Math.min(call.attemptTimeoutMs, Math.ceil(plan.retry.deadline - performance.now())));
  // Shorter than the gateway's own upstream timeout: the caller's `timeout`, or the rest of its deadline.
  const callerBound = timeoutMs < upstream.timeoutMs;
  const timer = setTimeout(() => signal.abort(), timeoutMs);
  const attemptAt = performance.now();
  const times = exchange.upstream;
  times.attemptAt = attemptAt;
  const started = side?.(member, call.upstreamModel, exchange.model!.canonicalId);
  try {
    const traceparent = attemptTraceparent(exchange, started);
    const response = await upstream.open({
      endpoint: member.endpoint,
      route: call.upstreamRoute,
      body: call.payload,
      requestId: call.requestId,
      signal,
      timeoutMs,
      traceparent,
    });
    if (EVENTS.attemptHeaders.activeFor(exchange)) EVENTS.attemptHeaders.publish({ exchange, status: response.status });
    times.status = response.status;
    const bytes = await response.whole(bodyLimitBytes);
    return answered(exchange, provider, member, response, bytes);
  } catch (error) {
    return unanswered(exchange, provider, signal, callerBound, error);
  } finally {
    times.spentMs = (times.spentMs ?? 0) + performance.now() - attemptAt;
    clearTimeout(timer);
  }
}

/** What the endpoint's whole answer comes to: the 2xx body, a final failure, or a failure worth a retry. */
function answered(
  exchange: Exchange,
  provider: ChatCall['provider'],
  member: PooledEndpoint,
  response: UpstreamResponse,
  bytes: Buffer,
): AttemptResult<ChatAnswer, GatewayError> {
  const status = response.status;
  if (status >= 200 && status < 300) return { kind: 'answer', answer: { body: bytes } };
  if (status === 401 || status === 403)
    return { kind: 'answer', answer: { failure: upstreamAuthRejected(provider, status) } };
  const failure = upstreamFailure(
    provider,
    `upstream answered ${status}${upstreamMessage(bytes, member.endpoint.apiKey)}`,
  );
  if (isRetryableStatus(status)) {
    attemptFailed(exchange, `answered ${status}`, status);
    return { kind: 'retry', failure, status, waitMs: retryAfterMs(response.headers) };
  }
  return { kind: 'answer', answer: { failure } };
}

/** An attempt that got no whole answer: always worth a retry, and told as an attempt error. */
function unanswered(
  exchange: Exchange,
  provider: ChatCall['provider'],
  signal: AttemptSignal,
  callerBound: boolean,
  error: unknown,
): AttemptResult<ChatAnswer, GatewayError> {
  // The client's leaving also pulls the signal: the failover layer tells the two apart.
  // The upstream had the request (a timeout, or an answer that broke off): it may have worked on it.
  let result: AttemptResult<ChatAnswer, GatewayError>;
  if (signal.aborted) result = { kind: 'retry', failure: upstreamTimeout(provider, error), callerBound, reached: true };
  else if (error instanceof UpstreamTransportError) {
    result = error.timedOut
      ? { kind: 'retry', failure: upstreamTimeout(provider, error), callerBound, reached: true }
      : { kind: 'retry', failure: upstreamFailure(provider, error.reason, error) };
  } else result = { kind: 'retry', failure: upstreamFailure(provider, 'the answer broke off', error), reached: true };
  attemptFailed(
    exchange,
    result.kind === 'retry' && isGatewayErrorLike(result.failure) ? result.failure.detail : 'failed',
  );
  return result;
}

/** Tells the diagnostics subscribers, when there are any, why the attempt failed. */
function attemptFailed(exchange: Exchange, reason: string, status?: number): void {
  if (EVENTS.attemptError.activeFor(exchange)) EVENTS.attemptError.publish({ exchange, reason, status });
}

const isGatewayErrorLike = (failure: unknown): failure is { detail: string } =>
  typeof (failure as { detail?: unknown } | null)?.detail === 'string';

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
export function chatResult(
  usageAccounting: UsageAccounting,
  call: ChatCall,
  resolved: ResolvedModel,
  body: Buffer,
  apiKey: string | undefined,
  exchange: Exchange,
): { payload: Buffer; usage: TokenUsage } {
  let answer: unknown;
  try {
    answer = JSON.parse(body.toString('utf8'));
  } catch {
    throw exchange.fail(upstreamFailure(call.provider, 'the answer was not JSON'));
  }
  let usage: TokenUsage | undefined;
  let answerText: string | undefined;
  try {
    usage = usageAccounting.extractor(call.upstreamRoute.format, call.adapter.route, resolved).fromBody(answer);
    if (!usage) throw exchange.fail(usageMissing(call.provider));
    answerText = call.adapter.readText(answer);
  } catch (error) {
    if (!isPluginFault(error)) throw error;
    // The upstream answered: the usage read so far (else what its format carries, else an estimate) is recorded.
    const read = usage ?? standardBodyUsage(call.upstreamRoute.format, answer);
    throw exchange.fail(faultOf(exchange, error, resolved.canonicalId), true, read, 'plugin_error');
  }
  if (answerText === undefined)
    throw exchange.fail(upstreamFailure(call.provider, 'the answer held no text'), true, usage);
  // Redacted as text: parsing has decoded any JSON escapes of the key.
  const text = redactCredentialText(answerText, apiKey);
  if (exchange.watch.answer) {
    WIRE_FORMATS[call.upstreamRoute.format].genAi.fromBody(answer, (exchange.facts = {}));
    if (exchange.watch.content) exchange.outputText = () => text;
  }
  const { totalTokens, chargedTokens } = usageAccounting.charge(usage, resolved);
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
  return { payload: Buffer.from(JSON.stringify(result)), usage };
}
