import type { ServerResponse } from 'node:http';
import type { Dispatcher } from 'undici';
import { streamEventTooLarge, upstreamAuthRejected, upstreamFailure, usageMissing } from '../../core/gateway-errors.ts';
import { endForClient } from '../http/client-write-timeout.ts';
import type { TokenUsage } from '../../plugins/plugin-contract.ts';
import { WIRE_FORMATS } from '../../core/formats/index.ts';
import { relaySse, STREAM_HEADERS } from '../sse/sse-relay.ts';
import { FixupChain } from '../sse/fixup-chain.ts';
import { redactCredential, redactCredentialText, StreamRedactor } from '../upstream/redact-credential.ts';
import { isPluginFault, type PluginFault } from '../../plugins/plugin-fault.ts';
import { reportPluginFault } from './plugin-faults.ts';
import { RELAYED_RESPONSE_HEADERS } from '../upstream/upstream-client.ts';
import type { EndpointPool, PooledEndpoint } from '../upstream/endpoint-pool.ts';
import type { ClientWatch } from '../upstream/failover/client-watch.ts';
import type { CompatibleAnswer, CompatibleCall } from './compatible-upstream.ts';
import type { ExchangeRecorder } from './exchange-recorder.ts';
import type { RouteServices } from '../route-services.ts';
import type { StreamedText } from './streamed-text.ts';
import { hasInBandError, type AnswerCapture } from '../cache/response-caching.ts';
import { guardAnswer } from '../guardrails/answer-guard.ts';
import { endBlockedStream, guardStream, isGuardrailStreamBlock } from '../guardrails/guarded-stream.ts';

/** What the relay stage writes to and records with. */
export interface RelayContext {
  readonly services: RouteServices;
  readonly res: ServerResponse;
  readonly call: CompatibleCall;
  readonly recorder: ExchangeRecorder;
  readonly streamed: StreamedText;
  readonly client: ClientWatch;
  /** Collects the answer for the response cache (a miss, or `no-cache`); only a complete 200 is stored. */
  readonly capture?: AnswerCapture;
}

/** The upstream headers passed on, each value with the endpoint's credential redacted. */
export function relayedHeaders(upstreamHeaders: Dispatcher.ResponseData['headers'], apiKey: string | undefined): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const name of RELAYED_RESPONSE_HEADERS) {
    const value = upstreamHeaders[name];
    // The gateway's own request id answers the client; the upstream's stays visible beside it.
    if (typeof value === 'string') headers[name === 'x-request-id' ? 'x-upstream-request-id' : name] = redactCredentialText(value, apiKey);
  }
  return headers;
}

/** Sends an endpoint's answer: a stream as it comes, anything else whole; records it. */
export function relayAnswer(context: RelayContext, { answer, endpoint, pool }: { answer: CompatibleAnswer; endpoint: PooledEndpoint; pool: EndpointPool }): Promise<void> {
  if (answer.kind === 'stream') return relayStream(context, answer, endpoint, pool);
  if (answer.kind === 'json') return relayJson(context, answer, answer.status >= 200 && answer.status < 300);
  return context.recorder.fail(upstreamAuthRejected(answer.provider, answer.status));
}

/**
 * Sends a whole answer with the credential redacted: a success with its usage (a Chat Completions one
 * without usage is refused), or an upstream error as it came (the last one, when every attempt failed).
 */
export async function relayJson(context: RelayContext, answer: Extract<CompatibleAnswer, { kind: 'json' }>, ok: boolean): Promise<void> {
  const { services, res, call, recorder, capture } = context;
  let usage: TokenUsage | undefined;
  let body: unknown;
  if (ok) {
    body = parsed(answer.bytes);
    if (recorder.trace?.recording) readFacts(recorder, call, body, answer.apiKey);
    try {
      usage = usageOf(body, call.extractor.fromBody);
    } catch (error) {
      if (!isPluginFault(error)) throw error;
      // Nothing went out yet: a 502 naming the plugin; the upstream did answer, so usage is estimated.
      return recorder.fail(reportPluginFault(services, error, recorder.faultSite(call.route)), true, undefined, 'plugin_error');
    }
    if (usage === undefined && WIRE_FORMATS[call.format].usageRequired) return recorder.fail(usageMissing(call.model.plugin.vendor), true);
  }
  // Response guardrails on a success's texts: a block is recorded (billed as the upstream billed it) and thrown.
  const guarding = ok ? guardAnswer(services, recorder, call.route, answer.bytes, body, usage) : answer.bytes;
  const guarded = guarding instanceof Promise ? await guarding : guarding;
  const relayed = redactCredential(guarded, answer.apiKey);
  const headers = relayedHeaders(answer.headers, answer.apiKey);
  recorder.firstByteAt = performance.now();
  res.writeHead(answer.status, { ...headers, 'content-length': String(relayed.length) });
  const read = await endForClient(res, relayed, services.clientWriteTimeoutMs);
  recorder.recordEnd(read, answer.status, usage, ok && WIRE_FORMATS[call.format].consumesTokens);
  if (capture && read === 'taken' && answer.status === 200 && usage && !hasInBandError(body)) {
    capture.add(relayed);
    capture.store({ contentType: headers['content-type'] ?? 'application/json', stream: false, model: call.model.canonicalId, usage });
  }
}

/**
 * Relays a stream whose first content event came. There is no failover past this point: a cut or
 * stall ends the stream with an in-band error in its format (and counts against the endpoint). The
 * status goes out with the first bytes, at the latest once the held opening events went through the
 * fixups and the usage tap, so that a plugin fault on them can still be answered as a 502.
 */
async function relayStream(context: RelayContext, answer: Extract<CompatibleAnswer, { kind: 'stream' }>, endpoint: PooledEndpoint, pool: EndpointPool): Promise<void> {
  const { services, res, call, recorder, streamed, capture } = context;
  const { format, extractor } = call;
  const rules = WIRE_FORMATS[format];
  const status = answer.status;
  const headers = relayedHeaders(answer.headers, answer.apiKey);
  const head = () => {
    recorder.firstByteAt = performance.now();
    res.writeHead(status, { ...headers, ...STREAM_HEADERS });
  };
  services.openStreams?.opened();
  let usage: TokenUsage | undefined;
  let terminal = false;
  // Read only while the trace records: the model, id and finish reasons the events carry.
  const facts = recorder.trace?.recording ? (recorder.facts = {}) : undefined;
  if (recorder.trace?.capturesContent) recorder.outputText = () => redactCredentialText(streamed.value().text, answer.apiKey);
  // The credential whole in an event, and split across the text deltas of several (events held meanwhile).
  const redactor = new StreamRedactor(answer.apiKey);
  try {
    const outcome = await relaySse(guardStream(recorder, answer.body, services.maxSseEventBytes, (data) => streamed.add(data)), res, {
      fixups: new FixupChain(call.registry.streamFixups(call.route, call.model.canonicalId)),
      onEvent: (event) => {
        usage = extractor.fromStreamEvent(usage, event);
        streamed.add(event.data);
        recorder.streamEvents += 1;
        if (facts) rules.genAi.fromStreamEvent(event, facts);
        if (!terminal) terminal = rules.isTerminalEvent(event);
        if (capture && rules.isErrorEvent(event)) capture.spoiled = true;
      },
      maxEventBytes: services.maxSseEventBytes,
      // What the client receives is what the cache keeps.
      rewrite: capture ? (bytes) => kept(capture, redactor.rewrite(bytes)) : (bytes) => redactor.rewrite(bytes),
      flush: capture ? () => kept(capture, redactor.flush()) : () => redactor.flush(),
      clientWriteTimeoutMs: services.clientWriteTimeoutMs,
      endOnComplete: true,
      head,
    });
    if (outcome.clientStalled) return recorder.record(status, usage, true, 'client_stalled');
    if (outcome.clientClosed) return recorder.record(499, usage, true);
    if (outcome.eventTooLarge) {
      const read = await endForClient(res, rules.inBandError(streamEventTooLarge(endpoint.endpoint.provider, services.maxSseEventBytes)), services.clientWriteTimeoutMs);
      return recorder.recordEnd(read, status, usage, true, 'upstream_cut');
    }
    const read = await endForClient(res, undefined, services.clientWriteTimeoutMs);
    recorder.recordEnd(read, status, usage, true, terminal ? 'complete' : 'upstream_cut');
    if (capture && read === 'taken' && terminal && status === 200 && usage) {
      capture.store({ contentType: headers['content-type'] ?? 'text/event-stream', stream: true, model: call.model.canonicalId, usage });
    }
  } catch (error) {
    if (isPluginFault(error)) await pluginFaultInStream(context, error, status, usage);
    else if (isGuardrailStreamBlock(error)) await endBlockedStream(services, res, recorder, format, error, status, usage, context.client.gone);
    else {
      // Anything else that failed before the status went out still ends in band, as it always did.
      if (!res.headersSent && !context.client.gone) head();
      await streamBroke(context, error, status, usage, endpoint, pool);
    }
  } finally {
    services.openStreams?.closed();
  }
}

/** A stream that broke after its status went out: the client learns of it in the stream's own format. */
async function streamBroke(context: RelayContext, error: unknown, status: number, usage: TokenUsage | undefined, endpoint: PooledEndpoint, pool: EndpointPool): Promise<void> {
  const { services, res, call, recorder } = context;
  if (context.client.gone) return recorder.record(499, usage, true);
  // The stream ends without the terminal event that would make it look complete.
  pool.failed(endpoint);
  const stalled = isStall(error);
  const idleTimeoutMs = services.idleTimeoutMs ?? services.upstream.timeoutMs;
  const reason = stalled ? `the stream stalled (no data for ${idleTimeoutMs} ms)` : 'the stream broke off';
  const read = await endForClient(res, WIRE_FORMATS[call.format].inBandError(upstreamFailure(endpoint.endpoint.provider, reason, error)), services.clientWriteTimeoutMs);
  recorder.recordEnd(read, status, usage, true, stalled ? 'stalled' : 'upstream_cut');
}

/**
 * A plugin hook failed in a stream (a fixup or the usage extractor threw, or returned a wrong shape):
 * the upstream did nothing wrong, so its endpoint is not blamed. Before the status went out (the
 * fault came on events not yet written to the client), the answer is a 502 with the error in the
 * route's envelope; after it, the client's stream ends with the in-band error naming the plugin fault.
 * Either way the usage is recorded as for a cut stream, with outcome `plugin_error`.
 */
async function pluginFaultInStream(context: RelayContext, fault: PluginFault, status: number, usage: TokenUsage | undefined): Promise<void> {
  const { services, res, call, recorder } = context;
  const error = reportPluginFault(services, fault, recorder.faultSite(call.route));
  if (context.client.gone) return recorder.record(499, usage, true);
  if (!res.headersSent) return recorder.fail(error, true, usage, 'plugin_error');
  const read = await endForClient(res, WIRE_FORMATS[call.format].inBandError(error), services.clientWriteTimeoutMs);
  recorder.recordEnd(read, status, usage, true, 'plugin_error');
}

function isStall(error: unknown): boolean {
  const code = (error as { code?: string } | null)?.code ?? (error as { cause?: { code?: string } } | null)?.cause?.code;
  return code === 'UND_ERR_BODY_TIMEOUT';
}

/** What a traced JSON answer says of itself, and its text when message content is captured. */
function readFacts(recorder: ExchangeRecorder, call: CompatibleCall, body: unknown, apiKey: string | undefined): void {
  const rules = WIRE_FORMATS[call.format].genAi;
  rules.fromBody(body, (recorder.facts = {}));
  // Redacted as text: parsing has decoded any JSON escapes of the endpoint's key.
  if (recorder.trace?.capturesContent) recorder.outputText = () => redactCredentialText(rules.answerText(body), apiKey);
}

/** The answer's JSON, or undefined when it is not JSON. */
function parsed(bytes: Buffer): unknown {
  try {
    return JSON.parse(bytes.toString('utf8'));
  } catch {
    return undefined;
  }
}

function usageOf(body: unknown, fromBody: (body: unknown) => TokenUsage | undefined): TokenUsage | undefined {
  if (body === undefined) return undefined;
  try {
    return fromBody(body);
  } catch (error) {
    if (isPluginFault(error)) throw error;
    return undefined;
  }
}

function kept(capture: AnswerCapture, bytes: Buffer): Buffer {
  capture.add(bytes);
  return bytes;
}
