import type { IncomingHttpHeaders } from 'node:http';
import { Agent, type Dispatcher } from 'undici';
import { readLimited } from '../http/read-limited.ts';
import type { UpstreamAbortSignal } from './attempt-signal.ts';
import { upstreamCredential, withCredentialQuery } from './upstream-credential.ts';
import type { UpstreamOutcome } from '../../ops/metrics.ts';
import type { UpstreamRoute } from '../../plugins/plugin-contract.ts';

/** Where one provider is reached: fixed at start from its base URL and key. */
export interface UpstreamEndpoint {
  /** The provider's vendor prefix, for messages. */
  readonly provider: string;
  /** `http://host:port` of the base URL. */
  readonly origin: string;
  /** The base URL's path (the version prefix), without a trailing slash, e.g. `/v1`. */
  readonly basePath: string;
  readonly apiKey?: string;
}

export function upstreamEndpoint(provider: string, baseUrl: string, apiKey?: string): UpstreamEndpoint {
  const url = new URL(baseUrl);
  return { provider, origin: url.origin, basePath: url.pathname.replace(/\/+$/, ''), apiKey };
}

export interface UpstreamRequest {
  readonly endpoint: UpstreamEndpoint;
  readonly route: UpstreamRoute;
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

const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT', 'ETIMEDOUT']);
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
  return new UpstreamTransportError(provider, REASONS[code] ?? 'the request could not be completed', false, { cause: error });
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

  /** Told how each attempt ended (the upstream metrics); the endpoint is named by its origin. */
  private readonly onAttempt?: (provider: string, endpoint: string, outcome: UpstreamOutcome) => void;

  constructor(options: { timeoutMs: number; dispatcher?: Dispatcher; onAttempt?: (provider: string, endpoint: string, outcome: UpstreamOutcome) => void }) {
    this.timeoutMs = options.timeoutMs;
    this.onAttempt = options.onAttempt;
    this.dispatcher =
      options.dispatcher ?? new Agent({ keepAliveTimeout: 30_000, keepAliveMaxTimeout: 600_000, connect: { timeout: 10_000 } });
  }

  /** POSTs a JSON body; resolves when the response headers arrive (the body is left to the caller to read). */
  async post(request: UpstreamRequest): Promise<Dispatcher.ResponseData> {
    const { endpoint, route } = request;
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    for (const name of route.forwardHeaders ?? []) {
      const value = request.clientHeaders?.[name];
      if (typeof value === 'string') headers[name] = value;
    }
    for (const [name, value] of Object.entries(route.defaultHeaders ?? {})) headers[name] ??= value;
    if (request.requestId) headers['x-request-id'] = request.requestId;
    const credential = upstreamCredential(route.auth, endpoint.apiKey);
    Object.assign(headers, credential.headers);
    const timeoutMs = request.timeoutMs ?? this.timeoutMs;
    try {
      const response = await this.dispatcher.request({
        origin: endpoint.origin,
        path: withCredentialQuery(endpoint.basePath + route.path, credential),
        method: 'POST',
        headers,
        body: request.body,
        signal: request.signal,
        headersTimeout: timeoutMs,
        bodyTimeout: request.bodyTimeoutMs ?? timeoutMs,
      });
      this.onAttempt?.(endpoint.provider, endpoint.origin, response.statusCode < 400 ? 'ok' : 'error_status');
      return response;
    } catch (error) {
      if (request.signal?.aborted) {
        this.onAttempt?.(endpoint.provider, endpoint.origin, 'aborted');
        throw request.signal.reason ?? error;
      }
      const failure = transportError(endpoint.provider, error, timeoutMs);
      this.onAttempt?.(endpoint.provider, endpoint.origin, failure.timedOut ? 'timeout' : 'transport_error');
      throw failure;
    }
  }

  async close(): Promise<void> {
    await this.dispatcher.close();
  }
}

/** Upstream response headers passed on to the client: the body's type and what SDKs read for retries. */
export const RELAYED_RESPONSE_HEADERS = ['content-type', 'retry-after', 'retry-after-ms', 'x-should-retry', 'x-request-id', 'request-id'] as const;

/** Reads a whole upstream body, refusing one larger than `limitBytes`. */
export function readBody(body: Dispatcher.ResponseData['body'], limitBytes: number): Promise<Buffer> {
  return readLimited(body, limitBytes, () => {
    body.destroy();
    return new Error(`upstream body larger than ${limitBytes} bytes`);
  });
}
