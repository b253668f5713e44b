import { EVENTS } from '../../core/diagnostics.ts';
import type { UsageAccounting, UsageOutcome } from '../../core/exchange.ts';
import { WIRE_FORMATS } from '../../core/formats/index.ts';
import {
  streamEventTooLarge,
  upstreamAuthRejected,
  upstreamFailure,
  usageMissing,
  type GatewayError,
} from '../../core/gateway-errors.ts';
import { ADAPTER_SHAPES } from '../../plugins/adapter-hooks.ts';
import type { SseEvent, TokenUsage } from '../../plugins/plugin-contract.ts';
import { isPluginFault, upstreamJson, type PluginFault } from '../../plugins/plugin-fault.ts';
import type { AdaptedCall } from '../adapters/adapted-call.ts';
import { MappedStream } from '../adapters/mapped-stream.ts';
import { adaptedErrorAnswer, ROUTE_SHAPES } from '../adapters/route-shapes.ts';
import { hasInBandError } from '../cache/response-caching.ts';
import { guardAnswer } from '../guardrails/answer-guard.ts';
import { guardStream, isGuardrailStreamBlock } from '../guardrails/guardrail-run.ts';
import { endForClient, type ClientRead } from '../http/client-connection.ts';
import type { CompatibleAnswer, UpstreamBounds } from '../routes/compatible-answer.ts';
import { faultOf } from '../routes/plugin-faults.ts';
import { StreamedText, FixupChain, relaySse, STREAM_HEADERS } from '../sse/sse-relay.ts';
import type { EndpointPool, PooledEndpoint } from '../upstream/endpoint-pool.ts';
import { redactCredential, redactCredentialText, StreamRedactor } from '../upstream/redact-credential.ts';
import { relayedHeaders } from '../upstream/upstream-client.ts';
import type { Exchange, Stage } from './exchange.ts';

/** What the adapted relay uses: the stream text reader for estimates, the bounds, the client write bound. */
export interface AdaptedRelayParts {
  readonly usage: Pick<UsageAccounting, 'streamedText'>;
  readonly bounds: UpstreamBounds;
  readonly clientWriteTimeoutMs: number;
}

type JsonAnswer = Extract<CompatibleAnswer, { kind: 'json' }>;
type StreamAnswer = Extract<CompatibleAnswer, { kind: 'stream' }>;

/** One adapted answer being relayed: the stage's parts, the exchange and its adapted call. */
interface Relaying {
  readonly parts: AdaptedRelayParts;
  readonly exchange: Exchange;
  readonly call: AdaptedCall;
}

/** A vendor's stream being relayed: its answer, and the endpoint (of its pool) that sent it. */
interface Streaming extends Relaying {
  readonly answer: StreamAnswer;
  readonly endpoint: PooledEndpoint;
  readonly pool: EndpointPool;
}

const JSON_TYPE = 'application/json';
const SSE_TYPE = 'text/event-stream';

/**
 * The relay of an adapted vendor's answer, in the route's format: a JSON answer mapped by the adapter
 * (its usage read from the vendor's shape and written in the route's), a stream mapped event by event
 * where fixups apply (the usage tap reads each vendor event first; response guardrails read the mapped
 * text) and closed with the route's own terminal events, an error answer in the route's envelope. The
 * endpoint's credential is redacted from all of it, as on any route.
 */
export function relayAdapted(parts: AdaptedRelayParts): Stage {
  return async function relayAdapted(exchange) {
    const attempted = exchange.answer!;
    const call = exchange.call as AdaptedCall;
    if (attempted.kind === 'upstream-error') return relayError({ parts, exchange, call }, attempted.answer);
    const { answer, endpoint, pool } = attempted;
    if (answer.kind === 'stream') return relayStream({ parts, exchange, call, answer, endpoint, pool });
    if (answer.kind === 'auth-rejected') throw exchange.fail(upstreamAuthRejected(answer.provider, answer.status));
    const relaying: Relaying = { parts, exchange, call };
    return answer.status >= 200 && answer.status < 300 ? relayJson(relaying, answer) : relayError(relaying, answer);
  };
}

/** Writes a whole JSON answer, with the vendor's headers the client may use (retries) and the JSON type. */
function send({ parts, exchange }: Relaying, answer: JsonAnswer, status: number, bytes: Buffer): Promise<ClientRead> {
  const headers = { ...relayedHeaders(answer.headers, answer.apiKey), 'content-type': JSON_TYPE };
  exchange.firstByteAt = performance.now();
  exchange.res.writeHead(status, { ...headers, 'content-length': String(bytes.length) });
  if (exchange.capture) exchange.capture.contentType = JSON_TYPE;
  return endForClient(exchange.res, bytes, parts.clientWriteTimeoutMs);
}

/** A plugin's fault ending the exchange before anything went out: a 502 naming the plugin, usage read so far kept. */
function fault({ exchange, call }: Relaying, error: unknown, consumed: boolean, usage?: TokenUsage): unknown {
  if (!isPluginFault(error)) return error;
  return exchange.fail(faultOf(exchange, error, call.model.canonicalId), consumed, usage, 'plugin_error');
}

/** A 2xx JSON answer: the vendor's usage read, the answer mapped, the route's usage written, its texts guarded. */
async function relayJson(relaying: Relaying, answer: JsonAnswer): Promise<void> {
  const { exchange, call } = relaying;
  const { format } = call;
  const rules = WIRE_FORMATS[format];
  const provider = call.model.plugin.vendor;
  const vendor = parsed(answer.bytes);
  if (vendor === undefined) {
    throw exchange.fail(upstreamFailure(provider, 'the answer was not JSON'), rules.consumesTokens);
  }
  let usage: TokenUsage | undefined;
  let body: Record<string, unknown>;
  let bytes: Buffer;
  try {
    usage = call.extractor.fromBody(vendor);
    if (usage === undefined && rules.usageRequired) throw exchange.fail(usageMissing(provider), true);
    body = call.adapter.mapAnswer(vendor, call.context);
    if (usage !== undefined) ROUTE_SHAPES[format].writeUsage(body, usage);
    const hook = `routes.${call.route}.adapter.mapAnswer`;
    bytes = Buffer.from(upstreamJson(provider, body, hook, ADAPTER_SHAPES.mapAnswer));
  } catch (error) {
    throw fault(relaying, error, rules.consumesTokens, usage);
  }
  if (exchange.watch.answer) rules.genAi.fromBody(body, (exchange.facts = {}));
  // Response guardrails on the mapped answer's texts: a block ends the exchange (billed as the vendor billed it).
  const guarding = guardAnswer(exchange, bytes, body, usage);
  const relayed = redactCredential(guarding instanceof Promise ? await guarding : guarding, answer.apiKey);
  if (exchange.watch.content) {
    exchange.outputText = () => redactCredentialText(rules.genAi.answerText(parsed(relayed)), answer.apiKey);
  }
  const read = await send(relaying, answer, answer.status, relayed);
  exchange.endAsRead(read, answer.status, usage, rules.consumesTokens);
  const { capture } = exchange;
  if (capture) {
    if (hasInBandError(body)) capture.spoiled = true;
    else capture.add(relayed);
  }
}

/** A vendor's error answer (the last endpoint's, or one that is final), in the route's error envelope. */
async function relayError(relaying: Relaying, answer: JsonAnswer): Promise<void> {
  const { exchange, call } = relaying;
  const text = answer.bytes.toString('utf8');
  let told;
  try {
    told = call.adapter.mapError?.({ status: answer.status, body: parsed(answer.bytes) ?? text }, call.context);
  } catch (error) {
    throw fault(relaying, error, false, undefined);
  }
  const { status, bytes } = adaptedErrorAnswer(call.format, answer.status, told, call.model.plugin.vendor);
  const read = await send(relaying, answer, status, redactCredential(bytes, answer.apiKey));
  exchange.endAsRead(read, status, undefined, false);
  if (exchange.capture) exchange.capture.spoiled = true;
}

/**
 * Relays a vendor's stream whose first event came, mapped. The usage tap reads each vendor event as it
 * came (the adapter's usage reader), then the mapping makes the route's events (and, after the terminal
 * event, the route's own closing ones), which the stream fixups, the response guardrails, the estimate's
 * text, the trace's facts and the cache see. As on any route: no failover past this point, a cut or a
 * stall ends the stream in band, a plugin's fault answers 502 before the first byte and in band after.
 * The client's side is set up here (its status line, the text it is shown, the trace's facts, the cache's
 * type); the vendor's side, and the end, in {@link relayVendorEvents}.
 */
function relayStream(streaming: Streaming): Promise<void> {
  const { parts, exchange, answer } = streaming;
  const { res, capture } = exchange;
  const { format } = streaming.call;
  const rules = WIRE_FORMATS[format];
  const status = answer.status;
  const headers = { ...relayedHeaders(answer.headers, answer.apiKey), 'content-type': SSE_TYPE };
  const textOf = (data: string) => parts.usage.streamedText(format, data);
  const streamed = (exchange.streamed = new StreamedText(textOf));
  const head = () => {
    exchange.firstByteAt = performance.now();
    res.writeHead(status, { ...headers, ...STREAM_HEADERS });
  };
  if (EVENTS.streamOpened.activeFor(exchange)) EVENTS.streamOpened.publish(exchange);
  const facts = exchange.watch.answer ? (exchange.facts = {}) : undefined;
  // The text the client gets: the estimate's (mapped events) unless guardrails may change it.
  const guarded = exchange.watch.content && exchange.guardrails?.selection.response;
  const shown = guarded ? new StreamedText(textOf) : undefined;
  if (exchange.watch.content) {
    exchange.outputText = () => redactCredentialText((shown ?? streamed).value().text, answer.apiKey);
  }
  if (capture) capture.contentType = SSE_TYPE;
  // What the client is sent, in the route's shape: text for an estimate, the trace's facts, an error spoils the cache.
  const seen = (event: SseEvent) => {
    streamed.add(event.data);
    if (facts) rules.genAi.fromStreamEvent(event, facts);
    if (capture && rules.isErrorEvent(event)) capture.spoiled = true;
  };
  return relayVendorEvents(streaming, head, seen, shown);
}

/**
 * The vendor's side of a stream's relay: the usage tap on each vendor event, the mapping (closed with the
 * route's own events, which carry the usage read), the response guardrails, the credential's redaction;
 * then the exchange ends as the relay did.
 */
async function relayVendorEvents(
  streaming: Streaming,
  head: () => void,
  seen: (event: SseEvent) => void,
  shown: StreamedText | undefined,
): Promise<void> {
  const { parts, exchange, call, answer } = streaming;
  const { res, capture } = exchange;
  const { format, extractor } = call;
  const { maxSseEventBytes } = parts.bounds;
  const status = answer.status;
  let usage: TokenUsage | undefined;
  const redactor = new StreamRedactor(answer.apiKey);
  // The usage tap: each event as the vendor sent it, read by the adapter's usage reader (what the vendor billed).
  const tap = (event: SseEvent) => {
    usage = extractor.fromStreamEvent(usage, event);
    exchange.streamEvents += 1;
  };
  try {
    const fixups = new FixupChain(call.registry.streamFixups(call.route, call.model.canonicalId));
    const includeUsage = call.includeUsage;
    const closing = (opening: string | undefined) => ROUTE_SHAPES[format].closing(usage, opening, includeUsage);
    const mapped = new MappedStream(call.adapter.stream!, call.context, closing, fixups, seen);
    const run = exchange.guardrails?.selection.response ? exchange.guardrails : undefined;
    const body = run ? guardStream(run, answer.body, maxSseEventBytes, { tap, fixups: mapped }) : answer.body;
    const outcome = await relaySse(body, res, {
      fixups: run ? undefined : mapped,
      onEvent: run ? (shown ? (event) => shown.add(event.data) : untapped) : tap,
      maxEventBytes: maxSseEventBytes,
      rewrite: capture ? (bytes) => kept(capture, redactor.rewrite(bytes)) : (bytes) => redactor.rewrite(bytes),
      flush: capture ? () => kept(capture, redactor.flush()) : () => redactor.flush(),
      clientWriteTimeoutMs: parts.clientWriteTimeoutMs,
      endOnComplete: true,
      head,
    });
    if (outcome.clientStalled) return exchange.end(status, usage, true, 'client_stalled');
    if (outcome.clientClosed) return exchange.end(499, usage, true);
    if (outcome.eventTooLarge) {
      const tooLarge = streamEventTooLarge(streaming.endpoint.endpoint.provider, maxSseEventBytes);
      return await endInBand(streaming, status, usage, tooLarge, 'upstream_cut');
    }
    const read = await endForClient(res, undefined, parts.clientWriteTimeoutMs);
    exchange.endAsRead(read, status, usage, true, mapped.complete ? 'complete' : 'upstream_cut');
  } catch (error) {
    return await streamFailed(streaming, head, error, usage);
  } finally {
    if (EVENTS.streamClosed.activeFor(exchange)) EVENTS.streamClosed.publish(exchange);
  }
}

/**
 * A stream whose relay failed: a plugin's hook (the mapping, its state or terminal test, the usage reader,
 * a fixup), a guardrail's block, or the vendor's stream breaking off or stalling. The usage read before
 * it is kept.
 */
function streamFailed(
  streaming: Streaming,
  head: () => void,
  error: unknown,
  usage: TokenUsage | undefined,
): Promise<void> | void {
  const { exchange, answer, endpoint } = streaming;
  if (isPluginFault(error)) return pluginFaultInStream(streaming, error, usage);
  if (exchange.client!.gone) return exchange.end(499, usage, true);
  // A guardrail ended the stream: every event released before it, then the refusal, usage so far kept.
  if (isGuardrailStreamBlock(error)) {
    return endInBand(streaming, answer.status, usage, error.refusal, 'guardrail_blocked');
  }
  // The stream broke after its status went out (or before, then it goes out now): the endpoint is blamed.
  if (!exchange.res.headersSent) head();
  streaming.pool.failed(endpoint);
  const stalled = isStall(error);
  const idle = streaming.parts.bounds.idleTimeoutMs;
  const reason = stalled ? `the stream stalled (no data for ${idle} ms)` : 'the stream broke off';
  const broke = upstreamFailure(endpoint.endpoint.provider, reason, error);
  return endInBand(streaming, answer.status, usage, broke, stalled ? 'stalled' : 'upstream_cut');
}

/**
 * A plugin's hook failed in the stream: a 502 before the status went out, else the in-band error naming
 * the plugin.
 */
function pluginFaultInStream(
  streaming: Streaming,
  error: PluginFault,
  usage: TokenUsage | undefined,
): Promise<void> | void {
  const { exchange, answer } = streaming;
  const told = faultOf(exchange, error, streaming.call.model.canonicalId);
  if (exchange.client!.gone) return exchange.end(499, usage, true);
  if (!exchange.res.headersSent) {
    // Failed before the relay read the vendor's body (its state could not be made): drop it.
    answer.body.abort();
    throw exchange.fail(told, true, usage, 'plugin_error');
  }
  return endInBand(streaming, answer.status, usage, told, 'plugin_error');
}

/** Ends a stream whose status went out with an error in the route's format, the usage read so far kept. */
async function endInBand(
  { parts, exchange, call }: Relaying,
  status: number,
  usage: TokenUsage | undefined,
  error: GatewayError,
  outcome: UsageOutcome,
): Promise<void> {
  const read = await endForClient(
    exchange.res,
    WIRE_FORMATS[call.format].inBandError(error),
    parts.clientWriteTimeoutMs,
  );
  exchange.endAsRead(read, status, usage, true, outcome);
}

function isStall(error: unknown): boolean {
  const failed = error as { code?: string; cause?: { code?: string } } | null;
  const code = failed?.code ?? failed?.cause?.code;
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

const untapped = (): void => {};

function kept(capture: NonNullable<Exchange['capture']>, bytes: Buffer): Buffer {
  capture.add(bytes);
  return bytes;
}
