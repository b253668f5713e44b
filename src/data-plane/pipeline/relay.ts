import { EVENTS } from '../../core/diagnostics.ts';
import { WIRE_FORMATS } from '../../core/formats/index.ts';
import type { AnswerFacts } from '../../core/formats/format-reading.ts';
import type { WireFormatRules } from '../../core/formats/wire-format.ts';
import { streamEventTooLarge, upstreamAuthRejected, upstreamFailure, usageMissing } from '../../core/gateway-errors.ts';
import type { SseEvent, TokenUsage, UsageExtractor, WireFormat } from '../../plugins/plugin-contract.ts';
import { isPluginFault, type PluginFault } from '../../plugins/plugin-fault.ts';
import { hasInBandError } from '../cache/response-caching.ts';
import { guardAnswer } from '../guardrails/answer-guard.ts';
import { guardStream, isGuardrailStreamBlock, type GuardrailStreamBlock } from '../guardrails/guardrail-run.ts';
import { endForClient } from '../http/client-connection.ts';
import type { CompatibleAnswer, UpstreamBounds } from '../routes/compatible-answer.ts';
import { faultOf } from '../routes/plugin-faults.ts';
import { standardBodyUsage, standardEventUsage } from '../routes/standard-usage.ts';
import { StreamedText, FixupChain, relaySse, STREAM_HEADERS, type RelayOptions } from '../sse/sse-relay.ts';
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
  headers['content-length'] = String(relayed.length);
  res.writeHead(answer.status, headers);
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
  const { format } = call;
  const status = answer.status;
  const headers = relayedHeaders(answer.headers, answer.apiKey);
  const textOf = (data: string) => parts.usage.streamedText(format, data);
  const streamed = (exchange.streamed = new StreamedText(textOf));
  if (EVENTS.streamOpened.activeFor(exchange)) EVENTS.streamOpened.publish(exchange);
  // Read only while a subscriber asked: the model, id and finish reasons the events carry.
  const facts = exchange.watch.answer ? (exchange.facts = {}) : undefined;
  // The text the client gets: the tap's (as the upstream sent it) unless guardrails may change it.
  const shown =
    exchange.watch.content && exchange.guardrails?.selection.response ? new StreamedText(textOf) : undefined;
  if (exchange.watch.content)
    exchange.outputText = () => redactCredentialText((shown ?? streamed).value().text, answer.apiKey);
  if (capture) capture.contentType = headers['content-type'] ?? 'text/event-stream';
  const fixups = new FixupChain(call.registry.streamFixups(call.route, call.model.canonicalId));
  // Response guardrails read each event as the fixups leave it (what the client gets): both then run before them.
  const run = exchange.guardrails?.selection.response ? exchange.guardrails : undefined;
  const shownOnly = run ? (shown ? (event: SseEvent) => shown.add(event.data) : untapped) : undefined;
  const relayed = new RelayedStream(parts, exchange, answer, headers, facts, run ? undefined : fixups, shownOnly);
  const { maxSseEventBytes } = parts.bounds;
  const body = run
    ? guardStream(run, answer.body, maxSseEventBytes, { tap: relayed.tap, fixups: fixups.empty ? undefined : fixups })
    : answer.body;
  try {
    const outcome = await relaySse(body, res, relayed);
    if (outcome.clientStalled) return exchange.end(status, relayed.usage, true, 'client_stalled');
    if (outcome.clientClosed) return exchange.end(499, relayed.usage, true);
    if (outcome.eventTooLarge) {
      const error = streamEventTooLarge(endpoint.endpoint.provider, maxSseEventBytes);
      const read = await endForClient(res, WIRE_FORMATS[format].inBandError(error), parts.clientWriteTimeoutMs);
      return exchange.endAsRead(read, status, relayed.usage, true, 'upstream_cut');
    }
    const read = await endForClient(res, undefined, parts.clientWriteTimeoutMs);
    exchange.endAsRead(read, status, relayed.usage, true, relayed.terminal ? 'complete' : 'upstream_cut');
  } catch (error) {
    await streamFailed(parts, exchange, relayed, error, status, endpoint, pool);
  } finally {
    if (EVENTS.streamClosed.activeFor(exchange)) EVENTS.streamClosed.publish(exchange);
  }
}

/**
 * One stream of a compatible route as the options of its relay: the usage tap, the fixups, the
 * credential's redaction and the status line, made once per stream; and what the tap read on the way
 * (the usage, whether the terminal event came), for the end of the exchange.
 */
class RelayedStream implements RelayOptions {
  /** What the upstream billed, as the events so far report it. */
  usage: TokenUsage | undefined = undefined;
  /** The upstream sent the event that ends its stream. */
  terminal = false;
  readonly onEvent: (event: SseEvent) => void;
  readonly maxEventBytes: number;
  readonly rewrite: (bytes: Buffer) => Buffer;
  readonly flush: () => Buffer;
  readonly clientWriteTimeoutMs: number;
  readonly endOnComplete = true;
  private readonly exchange: Exchange;
  private readonly status: number;
  private readonly format: WireFormat;
  private readonly extractor: UsageExtractor;
  private readonly rules: WireFormatRules;
  private readonly streamed: StreamedText;

  /**
   * `fixups`: none when the response guardrails apply them. `onEvent`: what sees each event in place of
   * the tap, when the response guardrails tap the events.
   */
  constructor(
    parts: RelayParts,
    exchange: Exchange,
    answer: StreamAnswer,
    private readonly headers: Record<string, string>,
    /** Read only while a subscriber asked: the model, id and finish reasons the events carry. */
    private readonly facts: AnswerFacts | undefined,
    readonly fixups: FixupChain | undefined,
    onEvent: ((event: SseEvent) => void) | undefined,
  ) {
    const { format, extractor } = exchange.call!;
    this.exchange = exchange;
    this.status = answer.status;
    this.format = format;
    this.extractor = extractor;
    this.rules = WIRE_FORMATS[format];
    this.streamed = exchange.streamed!;
    this.onEvent = onEvent ?? this.tap;
    this.maxEventBytes = parts.bounds.maxSseEventBytes;
    // The credential whole in an event, and split across the text deltas of several (events held meanwhile).
    const redactor = new StreamRedactor(answer.apiKey);
    // What the client receives is what the cache keeps.
    const { capture } = exchange;
    this.rewrite = capture ? (bytes) => kept(capture, redactor.rewrite(bytes)) : (bytes) => redactor.rewrite(bytes);
    this.flush = capture ? () => kept(capture, redactor.flush()) : () => redactor.flush();
    this.clientWriteTimeoutMs = parts.clientWriteTimeoutMs;
  }

  /** Writes the status line, with the first bytes. */
  readonly head = (): void => {
    this.exchange.firstByteAt = performance.now();
    this.exchange.res.writeHead(this.status, { ...this.headers, ...STREAM_HEADERS });
  };

  /** The usage tap: every event as the upstream sent it (its usage is what the upstream billed). */
  readonly tap = (event: SseEvent): void => {
    const { exchange, rules, facts } = this;
    try {
      this.usage = this.extractor.fromStreamEvent(this.usage, event);
    } catch (error) {
      // A plugin's extractor failed: the figures the event carries where its format keeps them still count.
      if (isPluginFault(error)) this.usage = standardEventUsage(this.format, this.usage, event);
      throw error;
    }
    this.streamed.add(event.data);
    exchange.streamEvents += 1;
    if (facts) rules.genAi.fromStreamEvent(event, facts);
    if (!this.terminal) this.terminal = rules.isTerminalEvent(event);
    if (exchange.capture && rules.isErrorEvent(event)) exchange.capture.spoiled = true;
  };
}

/**
 * Ends a stream whose relay failed, the usage read before it kept: a plugin's hook (a fixup, the usage
 * extractor) failed, a guardrail blocked it, or anything else broke it off, which ends it in band.
 */
function streamFailed(
  parts: RelayParts,
  exchange: Exchange,
  relayed: RelayedStream,
  error: unknown,
  status: number,
  endpoint: PooledEndpoint,
  pool: EndpointPool,
): Promise<void> {
  const { usage } = relayed;
  if (isPluginFault(error)) return pluginFaultInStream(parts, exchange, error, status, usage);
  if (isGuardrailStreamBlock(error)) return blockedStream(parts, exchange, error, status, usage);
  // Anything else that failed before the status went out still ends in band, as it always did.
  if (!exchange.res.headersSent && !exchange.client!.gone) relayed.head();
  return streamBroke(parts, exchange, error, status, usage, endpoint, pool);
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
