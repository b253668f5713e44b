import { EventEmitter } from 'node:events';
import type { IncomingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';
import { Agent } from '../../core/undici-agent.ts';
import { END_USER_HEADER } from '../../core/incoming-request.ts';
import type { BodySink, UpstreamBody } from '../sse/upstream-body.ts';
import { EVENTS, type UpstreamCallMessage } from '../../core/diagnostics.ts';
import type {
  AuthStyle,
  UpstreamRoute,
  WireFormat,
  UpstreamRouteId,
  UsageExtractor,
} from '../../plugins/plugin-contract.ts';
import { credentialHeader } from '../../plugins/validate-auth.ts';
import { redactCredentialText } from './redact-credential.ts';
import { WIRE_FORMATS, type WireFormatRules } from '../../core/formats/index.ts';
import { SseSplitter } from '../sse/sse-relay.ts';
import type { CallerKey, UsageAccounting } from '../../core/exchange.ts';
import type { ModelRegistry, ResolvedModel } from '../../core/model-registry.ts';
import { type JsonMember, upstreamBody } from '../http/json-body.ts';
import { type FallbackTable, nextFallback } from '../routes/model-fallbacks.ts';
import { fieldError, forbidden, validationError } from '../../core/gateway-errors.ts';

/** Where one provider is reached: fixed at start (or a reload) from its base URL, key and credential place. */
export interface UpstreamEndpoint {
  /** The provider's vendor prefix, for messages. */
  readonly provider: string;
  /** `http://host:port` of the base URL. */
  readonly origin: string;
  /** The base URL's path (the version prefix), without a trailing slash, e.g. `/v1`. */
  readonly basePath: string;
  readonly apiKey?: string;
  /**
   * Where this endpoint takes its key, over the `auth` of every route it serves (the config file's
   * `endpoints[].auth`); absent: each route's own.
   */
  readonly auth?: AuthStyle;
  /**
   * The header {@link auth} puts the key in (lower case), which no forwarded or default header of a
   * route may then take the place of; absent without an override, or for a query credential.
   */
  readonly authHeader?: string;
}

export function upstreamEndpoint(
  provider: string,
  baseUrl: string,
  apiKey?: string,
  auth?: AuthStyle,
): UpstreamEndpoint {
  const url = new URL(baseUrl);
  const endpoint: UpstreamEndpoint = {
    provider,
    origin: url.origin,
    basePath: url.pathname.replace(/\/+$/, ''),
    apiKey,
  };
  if (auth === undefined) return endpoint;
  const authHeader = credentialHeader(auth);
  return { ...endpoint, auth, ...(authHeader ? { authHeader } : {}) };
}

export interface UpstreamRequest {
  readonly endpoint: UpstreamEndpoint;
  readonly route: UpstreamRoute;
  /** Default: `POST` (a route adapter may ask for `PUT`). */
  readonly method?: 'POST' | 'PUT';
  /** The JSON body, sent as these bytes. */
  readonly body: string | Buffer;
  /** The client's request headers, of which the route's `forwardHeaders` are passed on. */
  readonly clientHeaders?: IncomingHttpHeaders;
  /** Sent as `x-request-id`, so the upstream's logs can be matched with the gateway's. */
  readonly requestId?: string;
  /** Aborts the upstream request (the client went away, or an attempt timed out). */
  readonly signal?: AbortSignal | (UpstreamAbortSignal & NodeJS.EventEmitter);
  /** Overrides the client's default wait for headers and between body chunks, in ms. */
  readonly timeoutMs?: number;
  /** Overrides the wait between body chunks alone, in ms (default: `timeoutMs`). */
  readonly bodyTimeoutMs?: number;
  /** The W3C trace context of the attempt's span, sent as `traceparent` when traced. */
  readonly traceparent?: string;
}

/** A failure to get a response from the upstream at all (no status to pass on). */
export class UpstreamTransportError extends Error {
  constructor(
    readonly provider: string,
    readonly reason: string,
    readonly timedOut: boolean,
    options?: { cause?: unknown },
  ) {
    super(`${provider}: ${reason}`, options);
    this.name = 'UpstreamTransportError';
  }
}

const TIMEOUT_CODES = new Set([
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_CONNECT_TIMEOUT',
  'ETIMEDOUT',
]);
const REASONS: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  UND_ERR_SOCKET: 'connection closed by the upstream',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'host name lookup failed',
  EHOSTUNREACH: 'host unreachable',
  UND_ERR_CONNECT_TIMEOUT: 'connection timed out',
};

/** Turns an undici or socket error into a message that names the cause and never a URL or credential. */
export function transportError(provider: string, error: unknown, timeoutMs: number): UpstreamTransportError {
  const code = (error as { code?: string }).code ?? (error as { cause?: { code?: string } }).cause?.code ?? '';
  if (TIMEOUT_CODES.has(code) || (error as Error).name === 'TimeoutError') {
    const limit = timeoutMs % 1000 === 0 ? `${timeoutMs / 1000} s` : `${timeoutMs} ms`;
    return new UpstreamTransportError(provider, `no response within ${limit}`, true, { cause: error });
  }
  return new UpstreamTransportError(provider, REASONS[code] ?? 'the request could not be completed', false, {
    cause: error,
  });
}

/**
 * Upstream calls through undici keep-alive pools (one per origin, held by one Agent), measured as the
 * cheapest way to call an upstream from Node. The dispatcher is injectable so unit tests can use
 * undici's MockAgent.
 */
export class UpstreamClient {
  private readonly dispatcher: Dispatcher;
  /** Longest wait for response headers and between body chunks (`UPSTREAM_TIMEOUT_MS`), unless a request sets less. */
  readonly timeoutMs: number;

  /** The gateway whose `upstream:call` events tell how each call ended (the upstream metrics). */
  private readonly source: object;

  constructor(options: { timeoutMs: number; dispatcher?: Dispatcher; source?: object }) {
    this.timeoutMs = options.timeoutMs;
    this.source = options.source ?? this;
    this.dispatcher =
      options.dispatcher ??
      new Agent({ keepAliveTimeout: 30_000, keepAliveMaxTimeout: 600_000, connect: { timeout: 10_000 } });
  }

  /**
   * POSTs a JSON body on the pool's `dispatch` (no response stream, no promise per chunk); resolves
   * when the response headers arrive, with the body left to the caller to take ({@link UpstreamResponse}).
   */
  open(request: UpstreamRequest): Promise<UpstreamResponse> {
    const { endpoint, route } = request;
    const headers = upstreamHeaders(request);
    const credential = upstreamCredential(endpoint.auth ?? route.auth, endpoint.apiKey);
    Object.assign(headers, credential.headers);
    const timeoutMs = request.timeoutMs ?? this.timeoutMs;
    return new Promise<UpstreamResponse>((resolve, reject) => {
      const response = new UpstreamResponse(request.signal, (error) => {
        if (error === undefined) {
          this.called(endpoint, response.status < 400 ? 'ok' : 'error_status');
          resolve(response);
        } else if (request.signal?.aborted) {
          this.called(endpoint, 'aborted');
          reject(request.signal.reason ?? error);
        } else {
          const failure = transportError(endpoint.provider, error, timeoutMs);
          this.called(endpoint, failure.timedOut ? 'timeout' : 'transport_error');
          reject(failure);
        }
      });
      this.dispatcher.dispatch(
        {
          origin: endpoint.origin,
          path: withCredentialQuery(endpoint.basePath + route.path, credential),
          method: request.method ?? 'POST',
          headers,
          body: request.body,
          headersTimeout: timeoutMs,
          bodyTimeout: request.bodyTimeoutMs ?? timeoutMs,
        },
        response,
      );
    });
  }

  private called(endpoint: UpstreamEndpoint, outcome: UpstreamCallMessage['outcome']): void {
    if (EVENTS.upstreamCall.active)
      EVENTS.upstreamCall.publish({
        source: this.source,
        provider: endpoint.provider,
        origin: endpoint.origin,
        outcome,
      });
  }

  async close(): Promise<void> {
    await this.dispatcher.close();
  }
}

/**
 * The headers of an upstream call but its credential: JSON in, JSON or a stream out, the client's headers the
 * route forwards, the route's defaults, the request id and trace context.
 */
function upstreamHeaders(request: UpstreamRequest): Record<string, string> {
  const { endpoint, route } = request;
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
  };
  for (const name of route.forwardHeaders ?? []) {
    // The gateway's own end-user header is never the upstream's, whatever a plugin lists.
    if (name.toLowerCase() === END_USER_HEADER) continue;
    const value = request.clientHeaders?.[name];
    if (typeof value === 'string') headers[name] = value;
  }
  for (const [name, value] of Object.entries(route.defaultHeaders ?? {})) headers[name] ??= value;
  // An endpoint's own credential header (a route may forward or default any header but its own
  // credential's): never the client's value, nor the route's default, whether or not a key is set.
  if (endpoint.authHeader !== undefined) {
    for (const name of Object.keys(headers)) if (name.toLowerCase() === endpoint.authHeader) delete headers[name];
  }
  if (request.requestId) headers['x-request-id'] = request.requestId;
  if (request.traceparent !== undefined) {
    headers.traceparent = request.traceparent;
  }
  return headers;
}

/** Upstream response headers passed on to the client: the body's type and what SDKs read for retries. */
export const RELAYED_RESPONSE_HEADERS = [
  'content-type',
  'retry-after',
  'retry-after-ms',
  'x-should-retry',
  'x-request-id',
  'request-id',
] as const;

type Signal = NonNullable<UpstreamRequest['signal']>;

function onAbort(signal: Signal, listener: () => void): () => void {
  if (typeof (signal as NodeJS.EventEmitter).once === 'function') {
    const emitter = signal as NodeJS.EventEmitter;
    emitter.once('abort', listener);
    return () => emitter.off('abort', listener);
  }
  const target = signal as AbortSignal;
  target.addEventListener('abort', listener, { once: true });
  return () => target.removeEventListener('abort', listener);
}

/** Most of an unwanted body (an auth rejection's) read to keep the connection; past it the request is cut. */
const DISCARD_LIMIT_BYTES = 128 * 1024;

/**
 * One upstream exchange as undici's dispatch handler: reports the response headers (or the failure to
 * get them) once, then hands the body, chunk by chunk as the socket delivers it, to whichever sink is
 * attached. Chunks that arrive with no sink attached, or while the sink paused the flow, wait in order
 * (they come in the same socket read as the headers, before any caller could attach); so do the end
 * and a failure, behind them. Pausing pauses undici's parser, so the upstream socket is not read.
 */
export class UpstreamResponse implements Dispatcher.DispatchHandler, UpstreamBody {
  status = 0;
  headers: IncomingHttpHeaders = {};
  private controller: Dispatcher.DispatchController | undefined;
  private readonly queued: Uint8Array[] = [];
  private sink: BodySink | undefined;
  private paused = false;
  private finished: { readonly error?: unknown } | undefined;
  private aborted = false;
  private cancelled: Error | undefined;
  private stopListening: (() => void) | undefined;

  constructor(
    private readonly signal: Signal | undefined,
    /** Told once: `undefined` when the headers came, else why there is no response. */
    private onHead: ((error?: unknown) => void) | undefined,
  ) {
    if (signal) this.stopListening = onAbort(signal, () => this.cancel(signal.reason));
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.aborted || this.signal?.aborted) controller.abort(abortReason(this.signal?.reason));
  }

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    this.status = statusCode;
    this.headers = headers;
    const onHead = this.onHead;
    this.onHead = undefined;
    onHead?.();
  }

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.aborted) return;
    if (this.sink && !this.paused && this.queued.length === 0) this.sink.data(chunk);
    else this.queued.push(chunk);
  }

  onResponseEnd(): void {
    this.finish({});
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    const onHead = this.onHead;
    if (onHead) {
      this.onHead = undefined;
      this.stopListening?.();
      onHead(error);
      return;
    }
    this.finish({ error });
  }

  attach(sink: BodySink): void {
    // Cancelled before anyone took the body (the client left meanwhile): the sink hears why at once.
    if (this.cancelled) return sink.error(this.cancelled);
    this.sink = sink;
    this.flush();
  }

  /**
   * Stops handing chunks on, putting `held` (chunks the sink took) back in front of what waits: a
   * look-ahead hands its body on this way, every byte still to come.
   */
  detach(held: readonly Uint8Array[] = []): void {
    this.sink = undefined;
    if (held.length > 0) this.queued.unshift(...held);
  }

  pause(): void {
    this.paused = true;
    this.controller?.pause();
  }

  resume(): void {
    this.paused = false;
    this.flush();
    if (!this.paused && !this.finished) this.controller?.resume();
  }

  /** Drops the rest of the body: the request is cancelled, the sink hears nothing more. */
  abort(): void {
    this.cancel(undefined);
  }

  /**
   * Drops the rest of a body nobody wants, reading (and dropping) up to 128 KiB of it so that the
   * connection can be kept; a longer one is cut.
   */
  discard(): void {
    let read = 0;
    this.attach({
      data: (chunk) => {
        read += chunk.length;
        if (read > DISCARD_LIMIT_BYTES) this.abort();
      },
      end: () => {},
      error: () => {},
    });
  }

  /** The whole body, or an error as soon as it passes `limitBytes` (the request is then cut). */
  whole(limitBytes: number): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      const chunks: Uint8Array[] = [];
      let size = 0;
      this.attach({
        data: (chunk) => {
          size += chunk.length;
          if (size > limitBytes) {
            this.abort();
            reject(new Error(`upstream body larger than ${limitBytes} bytes`));
            return;
          }
          chunks.push(chunk);
        },
        end: () =>
          resolve(
            chunks.length === 1
              ? Buffer.from(chunks[0]!.buffer, chunks[0]!.byteOffset, chunks[0]!.byteLength)
              : Buffer.concat(chunks, size),
          ),
        error: reject,
      });
    });
  }

  private cancel(reason: unknown): void {
    if (this.finished || this.aborted) return;
    this.aborted = true;
    this.queued.length = 0;
    const sink = this.sink;
    this.sink = undefined;
    this.stopListening?.();
    const error = abortReason(reason);
    this.cancelled = error;
    if (this.onHead) {
      // No headers yet: the caller hears of it at once (undici may not have started the request).
      const onHead = this.onHead;
      this.onHead = undefined;
      onHead(error);
    }
    this.controller?.abort(error);
    // The sink hears of it (a look-ahead waiting on its first-content timeout); one that aborted itself ignores it.
    sink?.error(error);
  }

  private finish(finished: { readonly error?: unknown }): void {
    if (this.finished) return;
    this.finished = finished;
    this.stopListening?.();
    this.flush();
  }

  /** Hands on what waits, while a sink is attached and has not paused. */
  private flush(): void {
    while (this.sink && !this.paused && this.queued.length > 0) this.sink.data(this.queued.shift()!);
    if (!this.sink || this.paused || this.queued.length > 0 || !this.finished || this.aborted) return;
    const sink = this.sink;
    this.sink = undefined;
    if (this.finished.error === undefined) sink.end();
    else sink.error(this.finished.error);
  }
}

function abortReason(reason: unknown): Error {
  return reason instanceof Error
    ? reason
    : Object.assign(new Error('This operation was aborted'), { name: 'AbortError', code: 'ABORT_ERR' });
}

/** The upstream headers passed on, each value with the endpoint's credential redacted. */
export function relayedHeaders(
  upstreamHeaders: Dispatcher.ResponseData['headers'],
  apiKey: string | undefined,
): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const name of RELAYED_RESPONSE_HEADERS) {
    const value = upstreamHeaders[name];
    // The gateway's own request id answers the client; the upstream's stays visible beside it.
    if (typeof value === 'string')
      headers[name === 'x-request-id' ? 'x-upstream-request-id' : name] = redactCredentialText(value, apiKey);
  }
  return headers;
}

/** Where one request carries the endpoint's key: headers to set, and a query string part (`name=value`) to append. */
export interface UpstreamCredential {
  readonly headers: Readonly<Record<string, string>>;
  /** `<parameter>=<percent-encoded key>`, for a route that declares `{ query }`. */
  readonly query?: string;
}

const NONE: UpstreamCredential = { headers: {} };

/**
 * The credential of one upstream request, built from the route's declared `auth` and the key of the
 * endpoint the request goes to (never anything else, so a reloaded key or another endpoint's key is
 * what goes out, and what the relay redacts).
 */
export function upstreamCredential(auth: AuthStyle, apiKey: string | undefined): UpstreamCredential {
  if (!apiKey) return NONE;
  if (auth === 'bearer') return { headers: { authorization: `Bearer ${apiKey}` } };
  if (auth === 'x-api-key') return { headers: { 'x-api-key': apiKey } };
  if ('query' in auth) return { headers: {}, query: `${encodeURIComponent(auth.query)}=${encodeURIComponent(apiKey)}` };
  return { headers: { [auth.header]: `${auth.prefix ?? ''}${apiKey}` } };
}

/** A path with the credential's query part appended (after any query the path has). */
export function withCredentialQuery(path: string, credential: UpstreamCredential): string {
  return credential.query === undefined ? path : `${path}${path.includes('?') ? '&' : '?'}${credential.query}`;
}

/**
 * How a stream's start went:
 * - `content`: a content event (or anything that is not an opening event) arrived, or the stream ended
 *   cleanly; `body` replays the held chunks and then continues with the upstream's own;
 * - `error`: the upstream sent an error event before any content;
 * - `broken`: the upstream body failed (cut, reset, timed out) or sent an event that is not of its
 *   format (data that is not JSON) before any content.
 */
export type StreamStart =
  | { readonly kind: 'content'; readonly body: AsyncIterable<Uint8Array> }
  | { readonly kind: 'error'; readonly reason: string }
  | { readonly kind: 'broken'; readonly error: unknown };

/** Which events only open a stream and which report an error: a wire format's rules, or an adapted vendor's. */
export type EarlyEventRules = Pick<WireFormatRules, 'judgeEarlyEvent' | 'isErrorEvent'>;

/** The verdict on a stream's start so far: `undefined` while only opening events came. */
type Verdict = { readonly kind: 'content' } | Exclude<StreamStart, { kind: 'content' }> | undefined;

const CONTENT = { kind: 'content' } as const;

/**
 * Judges a stream's opening bytes as they come: the first content event (or anything that is not an
 * opening event) starts it, an error event or a malformed one fails it, and past `maxHeldBytes` it
 * counts as started. Which events open a stream or report an error is the format's rule
 * (`WIRE_FORMATS[format].judgeEarlyEvent`, `.isErrorEvent`), or an adapted vendor's (its declared error event).
 */
class OpeningJudge {
  private readonly rules: EarlyEventRules;
  private readonly splitter = new SseSplitter();
  private heldBytes = 0;

  constructor(
    judged: WireFormat | EarlyEventRules,
    private readonly maxHeldBytes: number,
  ) {
    this.rules = typeof judged === 'string' ? WIRE_FORMATS[judged] : judged;
  }

  push(chunk: Uint8Array): Verdict {
    this.heldBytes += chunk.length;
    for (const block of this.splitter.push(chunk)) {
      const event = block.event;
      if (!event) continue;
      if (this.rules.isErrorEvent(event))
        return { kind: 'error', reason: 'the upstream sent an error event before any content' };
      const judged = this.rules.judgeEarlyEvent(event);
      if (judged === 'malformed')
        return { kind: 'broken', error: new Error('the upstream sent a malformed event before any content') };
      if (judged === 'content') return CONTENT;
    }
    return this.heldBytes > this.maxHeldBytes ? CONTENT : undefined;
  }
}

/**
 * Holds a dispatched stream's opening events until its first content event, so that a failure before
 * any content can still be failed over without the client seeing a byte. The chunks are judged as the
 * socket delivers them and, once content comes, handed back to the response unchanged in front of the
 * rest, so the relay gets exactly the serving upstream's bytes (`body` is the response itself). At most
 * `maxHeldBytes` are held: past that the stream counts as started. A failed start cancels the request;
 * the response's signal aborting (the first-content timeout) fails it as `broken`.
 */
export function awaitDispatchedStreamStart<B extends UpstreamBody & { detach(held: readonly Uint8Array[]): void }>(
  response: B,
  judged: WireFormat | EarlyEventRules,
  maxHeldBytes: number,
): Promise<{ readonly kind: 'content'; readonly body: B } | Exclude<StreamStart, { kind: 'content' }>> {
  const judge = new OpeningJudge(judged, maxHeldBytes);
  const held: Uint8Array[] = [];
  return new Promise((resolve) => {
    let decided = false;
    response.attach({
      data(chunk) {
        if (decided) return;
        held.push(chunk);
        const verdict = judge.push(chunk);
        if (verdict === undefined) return;
        decided = true;
        if (verdict.kind === 'content') {
          response.detach(held);
          resolve({ kind: 'content', body: response });
        } else {
          response.abort();
          resolve(verdict);
        }
      },
      end() {
        if (decided) return;
        decided = true;
        response.detach(held);
        resolve({ kind: 'content', body: response });
      },
      error(error) {
        if (decided) return;
        decided = true;
        resolve({ kind: 'broken', error });
      },
    });
  });
}

/** What the upstream client needs of a cancel signal: an `AbortSignal`, or an {@link AttemptSignal}. */
export interface UpstreamAbortSignal {
  readonly aborted: boolean;
  readonly reason?: unknown;
}

/**
 * The cancel switch of one upstream attempt (the client went away, or no content came in time). undici
 * takes an EventEmitter with `aborted` and `reason` as a request's `signal`; this one costs a fraction
 * of an AbortController, whose EventTarget machinery was measured at ~10 µs per request on the hot path.
 */
export class AttemptSignal extends EventEmitter implements UpstreamAbortSignal {
  aborted = false;
  reason: unknown = undefined;

  abort(reason?: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason =
      reason ?? Object.assign(new Error('This operation was aborted'), { name: 'AbortError', code: 'ABORT_ERR' });
    this.emit('abort');
  }
}

/** The client's request body: its bytes, its top-level members and where its object ends. */
export interface ClientBody {
  readonly bytes: Buffer;
  readonly members: readonly JsonMember[];
  readonly end: number;
}

/** What a compatible call reads beyond the request: the catalog, the fallbacks and who has endpoints. */
export interface CallCatalog {
  readonly registry: ModelRegistry;
  readonly fallbacks: FallbackTable | undefined;
  /** Whether the vendor has endpoints configured (a fallback without any is skipped). */
  readonly served: (vendor: string) => boolean;
  readonly usage: Pick<UsageAccounting, 'extractor'>;
}

/**
 * One compatible request as forwarded upstream: the client's bytes with only `model` replaced (and
 * `include_usage` set on a stream whose format asks for it), for the model being tried (the one
 * requested, then its fallbacks, all of the same wire format). The bytes are spliced when first read,
 * so a guardrail's rewrite of the body before that is what goes.
 */
export class CompatibleCall {
  model: ResolvedModel;
  upstreamRoute: UpstreamRoute;
  /** The model ID the provider is sent (`gen_ai.request.model`). */
  upstreamModel: string;
  extractor: UsageExtractor;
  readonly format: WireFormat;
  private fallbackIndex = 0;
  private spliced: Buffer | undefined;

  constructor(
    protected readonly catalog: CallCatalog,
    readonly route: UpstreamRouteId,
    readonly requested: ResolvedModel,
    readonly stream: boolean,
    protected readonly client: () => ClientBody,
  ) {
    const { registry } = catalog;
    this.model = requested;
    this.upstreamRoute = registry.upstreamRoute(requested, route);
    this.format = this.upstreamRoute.format;
    this.upstreamModel = registry.upstreamModel(requested, route);
    this.extractor = catalog.usage.extractor(this.format, route, requested);
  }

  get registry(): ModelRegistry {
    return this.catalog.registry;
  }

  /** The upstream request's method (an adapted call's may differ). */
  get method(): 'POST' | 'PUT' {
    return 'POST';
  }

  /** How a stream's events before any content are judged: by the route's format (an adapted call's: its vendor's). */
  get earlyEvents(): WireFormat | EarlyEventRules {
    return this.format;
  }

  /** The body sent upstream for the model being tried. */
  get forwarded(): Buffer {
    if (this.spliced === undefined) {
      const { bytes, members, end } = this.client();
      const withIncludeUsage = this.stream && WIRE_FORMATS[this.format].asksForStreamUsage;
      this.spliced = upstreamBody(bytes, members, end, { model: this.upstreamModel, withIncludeUsage });
    }
    return this.spliced;
  }

  /** Whether a fallback may follow the requested model (its pool may then be asked for a session). */
  get hasFallbacks(): boolean {
    return this.catalog.fallbacks?.has(this.requested.canonicalId) === true;
  }

  /** Moves on to the model's next fallback the caller may use and has an endpoint; false when none is left. */
  nextFallback(caller: CallerKey | undefined): boolean {
    const { registry, fallbacks, served, usage } = this.catalog;
    const chain = fallbacks?.get(this.requested.canonicalId);
    const allowed = (target: ResolvedModel) => mayUseModel(caller, target.canonicalId) && served(target.plugin.vendor);
    const next = chain && nextFallback(registry, chain, this.fallbackIndex, this.route, this.requested, allowed);
    if (!next) return false;
    this.fallbackIndex = next.index;
    this.model = next.resolved;
    this.upstreamRoute = registry.upstreamRoute(next.resolved, this.route);
    this.upstreamModel = registry.upstreamModel(next.resolved, this.route);
    this.spliced = undefined;
    this.extractor = usage.extractor(this.format, this.route, next.resolved);
    return true;
  }
}

/** Whether the key may use the model (its resolved canonical ID): every model when it lists none. */
export function mayUseModel(key: CallerKey | undefined, canonicalModelId: string): boolean {
  return !key?.models || key.models.includes(canonicalModelId);
}

export function assertModelAllowed(key: CallerKey | undefined, canonicalModelId: string): void {
  if (!mayUseModel(key, canonicalModelId)) {
    throw forbidden(`This API key may not use the model '${canonicalModelId}'`);
  }
}

/**
 * Checks the request's output cap fields: each one it sets must be a safe integer and at most the
 * model's `maxOutputTokens` (when its plugin declares one), else the 400 names the field. A cap beyond
 * either is never a request the upstream serves, and would make a reservation meaningless.
 */
export function checkOutputCaps(
  body: Readonly<Record<string, unknown>>,
  fields: readonly string[],
  resolved: ResolvedModel,
): void {
  const problems: string[] = [];
  let first: string | undefined;
  const most = resolved.model.maxOutputTokens;
  for (const field of fields) {
    const value = body[field];
    if (typeof value !== 'number') continue;
    if (!Number.isSafeInteger(value))
      problems.push(fieldError(field, 'must be a safe integer (at most 9007199254740991)'));
    else if (most !== undefined && value > most)
      problems.push(fieldError(field, `must be at most ${most}, the most '${resolved.canonicalId}' writes`));
    else continue;
    first ??= field;
  }
  if (problems.length) throw validationError(problems, first);
}

/** The request's own output cap: the first of its route's cap fields it sets to a positive number. */
export function outputCapOf(body: Readonly<Record<string, unknown>>, fields: readonly string[]): number | undefined {
  for (const field of fields) {
    const value = body[field];
    if (typeof value === 'number' && value > 0) return value;
  }
  return undefined;
}

/** How many answers the upstream writes for the request (`n`, `best_of`), each up to the output cap. */
export function choicesOf(body: Readonly<Record<string, unknown>>): number {
  let choices = 1;
  for (const field of ['n', 'best_of']) {
    const value = body[field];
    if (typeof value === 'number' && Number.isFinite(value) && value > choices) choices = Math.floor(value);
  }
  return choices;
}

/**
 * The request field that makes the upstream read context the gateway cannot see (and so cannot bound):
 * a stored response or conversation to continue, or a background run whose work ends after the answer.
 */
export function unboundedField(body: Readonly<Record<string, unknown>>): string | undefined {
  if (typeof body.previous_response_id === 'string' && body.previous_response_id !== '') return 'previous_response_id';
  if (body.conversation !== undefined && body.conversation !== null) return 'conversation';
  if (body.background === true) return 'background';
  return undefined;
}
