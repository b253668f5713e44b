import { EVENTS } from '../../core/diagnostics.ts';
import type { UsageAccounting } from '../../core/exchange.ts';
import { WIRE_FORMATS } from '../../core/formats/index.ts';
import { streamEventTooLarge, upstreamAuthRejected, upstreamFailure, usageMissing } from '../../core/gateway-errors.ts';
import { ADAPTER_SHAPES } from '../../plugins/adapter-hooks.ts';
import type { SseEvent, TokenUsage } from '../../plugins/plugin-contract.ts';
import { isPluginFault, upstreamJson, type PluginFault } from '../../plugins/plugin-fault.ts';
import type { AdaptedCall } from '../adapters/adapted-call.ts';
import { MappedStream } from '../adapters/mapped-stream.ts';
import { adaptedErrorAnswer, ROUTE_SHAPES } from '../adapters/route-shapes.ts';
import { hasInBandError } from '../cache/response-caching.ts';
import { guardAnswer } from '../guardrails/answer-guard.ts';
import { guardStream, isGuardrailStreamBlock, type GuardrailStreamBlock } from '../guardrails/guarded-stream.ts';
import { endForClient, type ClientRead } from '../http/client-write-timeout.ts';
import type { CompatibleAnswer, UpstreamBounds } from '../routes/compatible-answer.ts';
import { faultOf } from '../routes/plugin-faults.ts';
import { StreamedText } from '../routes/streamed-text.ts';
import { FixupChain } from '../sse/fixup-chain.ts';
import { relaySse, STREAM_HEADERS } from '../sse/sse-relay.ts';
import type { EndpointPool, PooledEndpoint } from '../upstream/endpoint-pool.ts';
import { redactCredential, redactCredentialText, StreamRedactor } from '../upstream/redact-credential.ts';
import { relayedHeaders } from '../upstream/relayed-headers.ts';
import type { Exchange } from './exchange.ts';
import type { Stage } from './stage.ts';

/** What the adapted relay uses: the stream text reader for estimates, the bounds, the client write bound. */
export interface AdaptedRelayParts {
  readonly usage: Pick<UsageAccounting, 'streamedText'>;
  readonly bounds: UpstreamBounds;
  readonly clientWriteTimeoutMs: number;
}

type JsonAnswer = Extract<CompatibleAnswer, { kind: 'json' }>;
type StreamAnswer = Extract<CompatibleAnswer, { kind: 'stream' }>;

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
    if (attempted.kind === 'upstream-error') return relayError(parts, exchange, call, attempted.answer);
    const { answer, endpoint, pool } = attempted;
    if (answer.kind === 'stream') return relayStream(parts, exchange, call, answer, endpoint, pool);
    if (answer.kind === 'json') return answer.status >= 200 && answer.status < 300 ? relayJson(parts, exchange, call, answer) : relayError(parts, exchange, call, answer);
    throw exchange.fail(upstreamAuthRejected(answer.provider, answer.status));
  };
}

/** The JSON answer the client gets, with its content type. */
async function send(parts: AdaptedRelayParts, exchange: Exchange, answer: JsonAnswer, status: number, bytes: Buffer): Promise<ClientRead> {
  const headers = { ...relayedHeaders(answer.headers, answer.apiKey), 'content-type': JSON_TYPE };
  exchange.firstByteAt = performance.now();
  exchange.res.writeHead(status, { ...headers, 'content-length': String(bytes.length) });
  if (exchange.capture) exchange.capture.contentType = JSON_TYPE;
  return endForClient(exchange.res, bytes, parts.clientWriteTimeoutMs);
}

/** A plugin's fault ending the exchange before anything went out: a 502 naming the plugin, usage read so far kept. */
function fault(exchange: Exchange, call: AdaptedCall, error: unknown, consumed: boolean, usage: TokenUsage | undefined): unknown {
  if (!isPluginFault(error)) return error;
  return exchange.fail(faultOf(exchange, error, call.model.canonicalId), consumed, usage, 'plugin_error');
}

/** A 2xx JSON answer: the vendor's usage read, the answer mapped, the route's usage written, guardrails on its texts. */
async function relayJson(parts: AdaptedRelayParts, exchange: Exchange, call: AdaptedCall, answer: JsonAnswer): Promise<void> {
  const { format } = call;
  const rules = WIRE_FORMATS[format];
  const provider = call.model.plugin.vendor;
  const vendor = parsed(answer.bytes);
  if (vendor === undefined) throw exchange.fail(upstreamFailure(provider, 'the answer was not JSON'), rules.consumesTokens);
  let usage: TokenUsage | undefined;
  let body: Record<string, unknown>;
  let bytes: Buffer;
  try {
    usage = call.extractor.fromBody(vendor);
    if (usage === undefined && rules.usageRequired) throw exchange.fail(usageMissing(provider), true);
    body = call.adapter.mapAnswer(vendor, call.context);
    if (usage !== undefined) ROUTE_SHAPES[format].writeUsage(body, usage);
    bytes = Buffer.from(upstreamJson(provider, body, `routes.${call.route}.adapter.mapAnswer`, ADAPTER_SHAPES.mapAnswer));
  } catch (error) {
    throw fault(exchange, call, error, rules.consumesTokens, usage);
  }
  if (exchange.watch.answer) rules.genAi.fromBody(body, (exchange.facts = {}));
  // Response guardrails on the mapped answer's texts: a block ends the exchange (billed as the vendor billed it) and is thrown.
  const guarding = guardAnswer(exchange, bytes, body, usage);
  const relayed = redactCredential(guarding instanceof Promise ? await guarding : guarding, answer.apiKey);
  if (exchange.watch.content) exchange.outputText = () => redactCredentialText(rules.genAi.answerText(parsed(relayed)), answer.apiKey);
  const read = await send(parts, exchange, answer, answer.status, relayed);
  exchange.endAsRead(read, answer.status, usage, rules.consumesTokens);
  const { capture } = exchange;
  if (capture) {
    if (hasInBandError(body)) capture.spoiled = true;
    else capture.add(relayed);
  }
}

/** A vendor's error answer (the last endpoint's, or one that is final), in the route's error envelope. */
async function relayError(parts: AdaptedRelayParts, exchange: Exchange, call: AdaptedCall, answer: JsonAnswer): Promise<void> {
  const text = answer.bytes.toString('utf8');
  let told;
  try {
    told = call.adapter.mapError?.({ status: answer.status, body: parsed(answer.bytes) ?? text }, call.context);
  } catch (error) {
    throw fault(exchange, call, error, false, undefined);
  }
  const { status, bytes } = adaptedErrorAnswer(call.format, answer.status, told, call.model.plugin.vendor);
  const relayed = redactCredential(bytes, answer.apiKey);
  const read = await send(parts, exchange, answer, status, relayed);
  exchange.endAsRead(read, status, undefined, false);
  if (exchange.capture) exchange.capture.spoiled = true;
}

/**
 * Relays a vendor's stream whose first event came, mapped. The usage tap reads each vendor event as it
 * came (the adapter's usage reader), then the mapping makes the route's events (and, after the terminal
 * event, the route's own closing ones), which the stream fixups, the response guardrails, the estimate's
 * text, the trace's facts and the cache see. As on any route: no failover past this point, a cut or a
 * stall ends the stream in band, a plugin's fault answers 502 before the first byte and in band after.
 */
async function relayStream(parts: AdaptedRelayParts, exchange: Exchange, call: AdaptedCall, answer: StreamAnswer, endpoint: PooledEndpoint, pool: EndpointPool): Promise<void> {
  const { res, capture } = exchange;
  const { format, extractor } = call;
  const rules = WIRE_FORMATS[format];
  const status = answer.status;
  const headers = { ...relayedHeaders(answer.headers, answer.apiKey), 'content-type': SSE_TYPE };
  const streamed = (exchange.streamed = new StreamedText((data) => parts.usage.streamedText(format, data)));
  const head = () => {
    exchange.firstByteAt = performance.now();
    res.writeHead(status, { ...headers, ...STREAM_HEADERS });
  };
  if (EVENTS.streamOpened.active) EVENTS.streamOpened.publish(exchange);
  let usage: TokenUsage | undefined;
  let mapped: MappedStream | undefined;
  const facts = exchange.watch.answer ? (exchange.facts = {}) : undefined;
  const shown = exchange.watch.content && exchange.guardrails?.selection.response ? new StreamedText((data) => parts.usage.streamedText(format, data)) : undefined;
  if (exchange.watch.content) exchange.outputText = () => redactCredentialText((shown ?? streamed).value().text, answer.apiKey);
  const redactor = new StreamRedactor(answer.apiKey);
  if (capture) capture.contentType = SSE_TYPE;
  const { maxSseEventBytes } = parts.bounds;
  // The usage tap: each event as the vendor sent it, read by the adapter's usage reader (what the vendor billed).
  const tap = (event: SseEvent) => {
    usage = extractor.fromStreamEvent(usage, event);
    exchange.streamEvents += 1;
  };
  // What the client is sent, in the route's shape: text for an estimate, the trace's facts, an error spoils the cache.
  const seen = (event: SseEvent) => {
    streamed.add(event.data);
    if (facts) rules.genAi.fromStreamEvent(event, facts);
    if (capture && rules.isErrorEvent(event)) capture.spoiled = true;
  };
  try {
    const fixups = new FixupChain(call.registry.streamFixups(call.route, call.model.canonicalId));
    const includeUsage = call.includeUsage;
    const closing = (opening: string | undefined) => ROUTE_SHAPES[format].closing(usage, opening, includeUsage);
    mapped = new MappedStream(call.adapter.stream!, call.context, closing, fixups, seen);
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
      const error = streamEventTooLarge(endpoint.endpoint.provider, maxSseEventBytes);
      const read = await endForClient(res, rules.inBandError(error), parts.clientWriteTimeoutMs);
      return exchange.endAsRead(read, status, usage, true, 'upstream_cut');
    }
    const read = await endForClient(res, undefined, parts.clientWriteTimeoutMs);
    exchange.endAsRead(read, status, usage, true, mapped.complete ? 'complete' : 'upstream_cut');
  } catch (error) {
    if (isPluginFault(error)) await pluginFaultInStream(parts, exchange, call, error, status, usage, answer);
    else if (isGuardrailStreamBlock(error)) await blockedStream(parts, exchange, call, error, status, usage);
    else {
      if (!res.headersSent && !exchange.client!.gone) head();
      await streamBroke(parts, exchange, call, error, status, usage, endpoint, pool);
    }
  } finally {
    if (EVENTS.streamClosed.active) EVENTS.streamClosed.publish(exchange);
  }
}

/** A stream that broke after its status went out: the client learns of it in the route's format. */
async function streamBroke(parts: AdaptedRelayParts, exchange: Exchange, call: AdaptedCall, error: unknown, status: number, usage: TokenUsage | undefined, endpoint: PooledEndpoint, pool: EndpointPool): Promise<void> {
  if (exchange.client!.gone) return exchange.end(499, usage, true);
  pool.failed(endpoint);
  const stalled = (error as { code?: string } | null)?.code === 'UND_ERR_BODY_TIMEOUT' || (error as { cause?: { code?: string } } | null)?.cause?.code === 'UND_ERR_BODY_TIMEOUT';
  const reason = stalled ? `the stream stalled (no data for ${parts.bounds.idleTimeoutMs} ms)` : 'the stream broke off';
  const inBand = WIRE_FORMATS[call.format].inBandError(upstreamFailure(endpoint.endpoint.provider, reason, error));
  const read = await endForClient(exchange.res, inBand, parts.clientWriteTimeoutMs);
  exchange.endAsRead(read, status, usage, true, stalled ? 'stalled' : 'upstream_cut');
}

/**
 * A hook failed in the stream (the mapping, its state or terminal test, the usage reader, a fixup): a
 * 502 before the status went out, else the in-band error naming the plugin; the usage the vendor
 * reported before it is kept (`plugin_error`).
 */
async function pluginFaultInStream(parts: AdaptedRelayParts, exchange: Exchange, call: AdaptedCall, error: PluginFault, status: number, usage: TokenUsage | undefined, answer: StreamAnswer): Promise<void> {
  const told = faultOf(exchange, error, call.model.canonicalId);
  if (exchange.client!.gone) return exchange.end(499, usage, true);
  if (!exchange.res.headersSent) {
    // Thrown before the relay read the vendor's body (its state could not be made): drop it.
    answer.body.abort();
    throw exchange.fail(told, true, usage, 'plugin_error');
  }
  const read = await endForClient(exchange.res, WIRE_FORMATS[call.format].inBandError(told), parts.clientWriteTimeoutMs);
  exchange.endAsRead(read, status, usage, true, 'plugin_error');
}

/** A guardrail ended a stream whose status went out: the refusal in the route's format, usage so far kept. */
async function blockedStream(parts: AdaptedRelayParts, exchange: Exchange, call: AdaptedCall, block: GuardrailStreamBlock, status: number, usage: TokenUsage | undefined): Promise<void> {
  if (exchange.client!.gone) return exchange.end(499, usage, true);
  const read = await endForClient(exchange.res, WIRE_FORMATS[call.format].inBandError(block.refusal), parts.clientWriteTimeoutMs);
  exchange.endAsRead(read, status, usage, true, 'guardrail_blocked');
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
