import { EVENTS } from '../../core/diagnostics.ts';
import { WIRE_FORMATS } from '../../core/formats/index.ts';
import { streamEventTooLarge, upstreamAuthRejected, upstreamFailure, usageMissing } from '../../core/gateway-errors.ts';
import type { SseEvent, TokenUsage } from '../../plugins/plugin-contract.ts';
import { isPluginFault, type PluginFault } from '../../plugins/plugin-fault.ts';
import { hasInBandError } from '../cache/response-caching.ts';
import { guardAnswer } from '../guardrails/answer-guard.ts';
import { guardStream, isGuardrailStreamBlock, type GuardrailStreamBlock } from '../guardrails/guardrail-run.ts';
import { endForClient } from '../http/client-connection.ts';
import type { CompatibleAnswer, UpstreamBounds } from '../routes/compatible-answer.ts';
import { faultOf } from '../routes/plugin-faults.ts';
import { standardBodyUsage, standardEventUsage } from '../routes/standard-usage.ts';
import { StreamedText, FixupChain, relaySse, STREAM_HEADERS } from '../sse/sse-relay.ts';
import type { EndpointPool, PooledEndpoint } from '../upstream/endpoint-pool.ts';
import { redactCredential, redactCredentialText, StreamRedactor } from '../upstream/redact-credential.ts';
import { relayedHeaders } from '../upstream/upstream-client.ts';
import type { UsageAccounting } from '../../core/exchange.ts';
import type { Exchange, Stage } from './exchange.ts';

/** What the relay stage uses: the stream text reader for estimates, the bounds, the client write bound. */
export interface RelayParts {
  readonly usage: Pick<UsageAccounting, 'streamedText'>;
  readonly bounds: UpstreamBounds;
  readonly clientWriteTimeoutMs: number;
}

type JsonAnswer = Extract<CompatibleAnswer, { kind: 'json' }>;
type StreamAnswer = Extract<CompatibleAnswer, { kind: 'stream' }>;

/**
 * The relay stage of the compatible routes: sends the endpoint's answer, a stream as it comes and
 * anything else whole, with the endpoint's credential redacted, and ends the exchange with its usage.
 * The last endpoint's own error (every attempt failed) goes back as it came.
 */
export function relay(parts: RelayParts): Stage {
  return async function relay(exchange) {
    const attempted = exchange.answer!;
    if (attempted.kind === 'upstream-error') return relayJson(parts, exchange, attempted.answer, false);
    const { answer, endpoint, pool } = attempted;
    if (answer.kind === 'stream') return relayStream(parts, exchange, answer, endpoint, pool);
    if (answer.kind === 'json') return relayJson(parts, exchange, answer, answer.status >= 200 && answer.status < 300);
    throw exchange.fail(upstreamAuthRejected(answer.provider, answer.status));
  };
}

/**
 * Sends a whole answer with the credential redacted: a success with its usage (a Chat Completions one
 * without usage is refused), or an upstream error as it came (the last one, when every attempt failed).
 */
async function relayJson(parts: RelayParts, exchange: Exchange, answer: JsonAnswer, ok: boolean): Promise<void> {
  const call = exchange.call!;
  const { res, capture } = exchange;
  let usage: TokenUsage | undefined;
  let body: unknown;
  if (ok) {
    body = parsed(answer.bytes);
    if (exchange.watch.answer) WIRE_FORMATS[call.format].genAi.fromBody(body, (exchange.facts = {}));
    try {
      usage = usageOf(body, call.extractor.fromBody);
    } catch (error) {
      if (!isPluginFault(error)) throw error;
      // Nothing went out yet: a 502 naming the plugin. The upstream did answer: the figures its format
      // carries stand, else usage is estimated.
      const fault = faultOf(exchange, error, call.model.canonicalId);
      throw exchange.fail(fault, true, standardBodyUsage(call.format, body), 'plugin_error');
    }
    if (usage === undefined && WIRE_FORMATS[call.format].usageRequired)
      throw exchange.fail(usageMissing(call.model.plugin.vendor), true);
  }
  // Response guardrails on a success's texts: a block ends the exchange (billed as the upstream billed it) and is
  // thrown.
  const guarding = ok ? guardAnswer(exchange, answer.bytes, body, usage) : answer.bytes;
  const guarded = guarding instanceof Promise ? await guarding : guarding;
  const relayed = redactCredential(guarded, answer.apiKey);
  // The text the client got (after the guardrails, the credential redacted), for a trace that captures content.
  if (ok && exchange.watch.content) {
    // Redacted as text too: parsing decodes any JSON escapes of the endpoint's key.
    exchange.outputText = () =>
      redactCredentialText(WIRE_FORMATS[call.format].genAi.answerText(parsed(relayed)), answer.apiKey);
  }
  const headers = relayedHeaders(answer.headers, answer.apiKey);
  exchange.firstByteAt = performance.now();
  res.writeHead(answer.status, { ...headers, 'content-length': String(relayed.length) });
  const read = await endForClient(res, relayed, parts.clientWriteTimeoutMs);
  exchange.endAsRead(read, answer.status, usage, ok && WIRE_FORMATS[call.format].consumesTokens);
  if (capture) {
    capture.contentType = headers['content-type'] ?? 'application/json';
    if (hasInBandError(body)) capture.spoiled = true;
    else capture.add(relayed);
  }
}

/**
 * Relays a stream whose first content event came. There is no failover past this point: a cut or
 * stall ends the stream with an in-band error in its format (and counts against the endpoint). The
 * status goes out with the first bytes, at the latest once the held opening events went through the
 * fixups and the usage tap, so that a plugin fault on them can still be answered as a 502.
 */
async function relayStream(
  parts: RelayParts,
  exchange: Exchange,
  answer: StreamAnswer,
  endpoint: PooledEndpoint,
  pool: EndpointPool,
): Promise<void> {
  const call = exchange.call!;
  const { res, capture } = exchange;
  const { format, extractor } = call;
  const rules = WIRE_FORMATS[format];
  const status = answer.status;
  const headers = relayedHeaders(answer.headers, answer.apiKey);
  const streamed = (exchange.streamed = new StreamedText((data) => parts.usage.streamedText(format, data)));
  const head = () => {
    exchange.firstByteAt = performance.now();
    res.writeHead(status, { ...headers, ...STREAM_HEADERS });
  };
  if (EVENTS.streamOpened.active) EVENTS.streamOpened.publish(exchange);
  let usage: TokenUsage | undefined;
  let terminal = false;
  // Read only while a subscriber asked: the model, id and finish reasons the events carry.
  const facts = exchange.watch.answer ? (exchange.facts = {}) : undefined;
  // The text the client gets: the tap's (as the upstream sent it) unless guardrails may change it.
  const shown =
    exchange.watch.content && exchange.guardrails?.selection.response
      ? new StreamedText((data) => parts.usage.streamedText(format, data))
      : undefined;
  if (exchange.watch.content)
    exchange.outputText = () => redactCredentialText((shown ?? streamed).value().text, answer.apiKey);
  // The credential whole in an event, and split across the text deltas of several (events held meanwhile).
  const redactor = new StreamRedactor(answer.apiKey);
  if (capture) capture.contentType = headers['content-type'] ?? 'text/event-stream';
  const { maxSseEventBytes } = parts.bounds;
  const fixups = new FixupChain(call.registry.streamFixups(call.route, call.model.canonicalId));
  // The usage tap: every event as the upstream sent it (its usage is what the upstream billed).
  const tap = (event: SseEvent) => {
    try {
      usage = extractor.fromStreamEvent(usage, event);
    } catch (error) {
      // A plugin's extractor failed: the figures the event carries where its format keeps them still count.
      if (isPluginFault(error)) usage = standardEventUsage(format, usage, event);
      throw error;
    }
    streamed.add(event.data);
    exchange.streamEvents += 1;
    if (facts) rules.genAi.fromStreamEvent(event, facts);
    if (!terminal) terminal = rules.isTerminalEvent(event);
    if (capture && rules.isErrorEvent(event)) capture.spoiled = true;
  };
  // Response guardrails read each event as the fixups leave it (what the client gets): both then run before them.
  const run = exchange.guardrails?.selection.response ? exchange.guardrails : undefined;
  const body = run
    ? guardStream(run, answer.body, maxSseEventBytes, { tap, fixups: fixups.empty ? undefined : fixups })
    : answer.body;
  try {
    const outcome = await relaySse(body, res, {
      fixups: run ? undefined : fixups,
      onEvent: run ? (shown ? (event) => shown.add(event.data) : untapped) : tap,
      maxEventBytes: maxSseEventBytes,
      // What the client receives is what the cache keeps.
      rewrite: capture ? (bytes) => kept(capture, redactor.rewrite(bytes)) : (bytes) => redactor.rewrite(bytes),
      flush: capture ? () => kept(capture, redactor.flush()) : () => redactor.flush(),
      clientWriteTimeoutMs: parts.clientWriteTimeoutMs,
      endOnComplete: true,
      head,
    });
    if (outcome.clientStalled) return exchange.end(status, usage, true, 'client_stalled');
    if (outcome.clientClosed) return exchange.end(499, usage, true);
    if (outcome.eventTooLarge) {
      const error = streamEventTooLarge(endpoint.endpoint.provider, maxSseEventBytes);
      const read = await endForClient(res, rules.inBandError(error), parts.clientWriteTimeoutMs);
      return exchange.endAsRead(read, status, usage, true, 'upstream_cut');
    }
    const read = await endForClient(res, undefined, parts.clientWriteTimeoutMs);
    exchange.endAsRead(read, status, usage, true, terminal ? 'complete' : 'upstream_cut');
  } catch (error) {
    if (isPluginFault(error)) await pluginFaultInStream(parts, exchange, error, status, usage);
    else if (isGuardrailStreamBlock(error)) await blockedStream(parts, exchange, error, status, usage);
    else {
      // Anything else that failed before the status went out still ends in band, as it always did.
      if (!res.headersSent && !exchange.client!.gone) head();
      await streamBroke(parts, exchange, error, status, usage, endpoint, pool);
    }
  } finally {
    if (EVENTS.streamClosed.active) EVENTS.streamClosed.publish(exchange);
  }
}

/** A stream that broke after its status went out: the client learns of it in the stream's own format. */
async function streamBroke(
  parts: RelayParts,
  exchange: Exchange,
  error: unknown,
  status: number,
  usage: TokenUsage | undefined,
  endpoint: PooledEndpoint,
  pool: EndpointPool,
): Promise<void> {
  if (exchange.client!.gone) return exchange.end(499, usage, true);
  // The stream ends without the terminal event that would make it look complete.
  pool.failed(endpoint);
  const stalled = isStall(error);
  const reason = stalled ? `the stream stalled (no data for ${parts.bounds.idleTimeoutMs} ms)` : 'the stream broke off';
  const inBand = WIRE_FORMATS[exchange.call!.format].inBandError(
    upstreamFailure(endpoint.endpoint.provider, reason, error),
  );
  const read = await endForClient(exchange.res, inBand, parts.clientWriteTimeoutMs);
  exchange.endAsRead(read, status, usage, true, stalled ? 'stalled' : 'upstream_cut');
}

/**
 * A plugin hook failed in a stream (a fixup or the usage extractor threw, or returned a wrong shape):
 * the upstream did nothing wrong, so its endpoint is not blamed. Before the status went out (the
 * fault came on events not yet written to the client), the answer is a 502 with the error in the
 * route's envelope; after it, the client's stream ends with the in-band error naming the plugin fault.
 * Either way the usage is recorded as for a cut stream, with outcome `plugin_error`.
 */
async function pluginFaultInStream(
  parts: RelayParts,
  exchange: Exchange,
  fault: PluginFault,
  status: number,
  usage: TokenUsage | undefined,
): Promise<void> {
  const error = faultOf(exchange, fault, exchange.call!.model.canonicalId);
  if (exchange.client!.gone) return exchange.end(499, usage, true);
  if (!exchange.res.headersSent) throw exchange.fail(error, true, usage, 'plugin_error');
  const read = await endForClient(
    exchange.res,
    WIRE_FORMATS[exchange.call!.format].inBandError(error),
    parts.clientWriteTimeoutMs,
  );
  exchange.endAsRead(read, status, usage, true, 'plugin_error');
}

/**
 * A guardrail ended a stream whose status went out: the client gets every event released before it,
 * then the refusal in the stream's format, and nothing after. The upstream answered (and was dropped):
 * its usage so far is recorded, estimated where it reported none, with outcome `guardrail_blocked`.
 */
async function blockedStream(
  parts: RelayParts,
  exchange: Exchange,
  block: GuardrailStreamBlock,
  status: number,
  usage: TokenUsage | undefined,
): Promise<void> {
  if (exchange.client!.gone) return exchange.end(499, usage, true);
  const read = await endForClient(
    exchange.res,
    WIRE_FORMATS[exchange.call!.format].inBandError(block.refusal),
    parts.clientWriteTimeoutMs,
  );
  exchange.endAsRead(read, status, usage, true, 'guardrail_blocked');
}

function isStall(error: unknown): boolean {
  const code =
    (error as { code?: string } | null)?.code ?? (error as { cause?: { code?: string } } | null)?.cause?.code;
  return code === 'UND_ERR_BODY_TIMEOUT';
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

const untapped = (): void => {};

function kept(capture: NonNullable<Exchange['capture']>, bytes: Buffer): Buffer {
  capture.add(bytes);
  return bytes;
}
