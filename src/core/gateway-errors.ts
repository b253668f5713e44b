/**
 * The gateway's error catalog. Every error the gateway itself answers with is one of these: a stable
 * `code`, an HTTP `status`, and the `detail` text of the spec's DetailError body. The one error
 * middleware (`error-middleware.ts`) turns them into the route family's JSON body.
 */

/** The error `type` a route family's envelope carries for a status. */
export type ErrorKind =
  | 'invalid_request'
  | 'authentication'
  | 'permission'
  | 'not_found'
  | 'request_too_large'
  | 'rate_limit'
  | 'upstream'
  | 'timeout'
  | 'internal';

export interface GatewayErrorOptions {
  /** Per-field messages of a ValidationError, each `Field '<location>': <message>`. */
  readonly errors?: readonly string[];
  /** The request field the error is about, for the Chat Completions envelope's `param`. */
  readonly param?: string;
  /** Extra response headers, e.g. `Allow` or `Retry-After`. */
  readonly headers?: Readonly<Record<string, string>>;
  readonly cause?: unknown;
  /**
   * The error is logged already, with more than the error middleware knows (a plugin fault): it logs no second line.
   */
  readonly logged?: boolean;
  /** The limit that refused the request (a 429), for the refusals metric. */
  readonly limit?: LimitRefusal;
}

/** Which limit refused a request: what it counts and whose it is. */
export interface LimitRefusal {
  readonly kind: 'rpm' | 'tpm' | 'quota' | 'budget' | 'concurrency' | 'websockets';
  readonly scope: 'key' | 'team' | 'address';
}

export class GatewayError extends Error {
  readonly errors?: readonly string[];
  readonly param?: string;
  readonly headers?: Readonly<Record<string, string>>;
  readonly logged: boolean;
  readonly limit?: LimitRefusal;

  constructor(
    readonly code: string,
    readonly status: number,
    readonly kind: ErrorKind,
    readonly detail: string,
    options: GatewayErrorOptions = {},
  ) {
    super(detail, { cause: options.cause });
    this.name = 'GatewayError';
    this.errors = options.errors;
    this.param = options.param;
    this.headers = options.headers;
    this.logged = options.logged ?? false;
    this.limit = options.limit;
  }
}

const VALIDATION_SUMMARY = 'Invalid input parameters';

/** 400 with the spec's ValidationError body: every bad field at once. */
export function validationError(errors: readonly string[], param?: string): GatewayError {
  return new GatewayError('GW_ERR_VALIDATION', 400, 'invalid_request', VALIDATION_SUMMARY, { errors, param });
}

/** Formats one entry of a ValidationError's `errors` list. */
export function fieldError(location: string, message: string): string {
  return `Field '${location}': ${message}`;
}

export function badRequest(detail: string, param?: string): GatewayError {
  return new GatewayError('GW_ERR_BAD_REQUEST', 400, 'invalid_request', detail, { param });
}

/**
 * A client's mistake that a library reports as a plain error with status 400 (Express's path parameter
 * that does not percent-decode, for one): the 400 it is, with the library's message; undefined for
 * anything else (which stays an internal error).
 */
export function clientErrorOf(cause: unknown): GatewayError | undefined {
  if (typeof cause !== 'object' || cause === null) return undefined;
  const { status, message } = cause as { status?: unknown; message?: unknown };
  if (status !== 400 || typeof message !== 'string') return undefined;
  return badRequest(`The request is not valid: ${message}`);
}

export function invalidJson(detail = 'Request body must be a JSON object'): GatewayError {
  return new GatewayError('GW_ERR_INVALID_JSON', 400, 'invalid_request', detail);
}

export function payloadTooLarge(limitBytes: number): GatewayError {
  return new GatewayError(
    'GW_ERR_PAYLOAD_TOO_LARGE',
    413,
    'request_too_large',
    `Request body is larger than the limit of ${limitBytes} bytes`,
    // The rest of an oversized body is not read: the connection cannot be reused.
    { headers: { Connection: 'close' } },
  );
}

export function unauthenticated(detail: string): GatewayError {
  return new GatewayError('GW_ERR_UNAUTHENTICATED', 401, 'authentication', detail);
}

export function forbidden(detail: string): GatewayError {
  return new GatewayError('GW_ERR_FORBIDDEN', 403, 'permission', detail);
}

export function routeNotFound(method: string, path: string): GatewayError {
  return new GatewayError('GW_ERR_ROUTE_NOT_FOUND', 404, 'not_found', `No route for ${method} ${path}`);
}

export function keyNotFound(id: string): GatewayError {
  return new GatewayError('GW_ERR_KEY_NOT_FOUND', 404, 'not_found', `No API key with id '${id}'`);
}

export function teamNotFound(name: string): GatewayError {
  return new GatewayError('GW_ERR_TEAM_NOT_FOUND', 404, 'not_found', `No team named '${name}'`);
}

export function tokenNotFound(id: string): GatewayError {
  return new GatewayError('GW_ERR_TOKEN_NOT_FOUND', 404, 'not_found', `No service token with id '${id}'`);
}

/** 409: the request clashes with what is stored (a name already taken, a team still named by keys). */
export function conflict(detail: string): GatewayError {
  return new GatewayError('GW_ERR_CONFLICT', 409, 'invalid_request', detail);
}

export function methodNotAllowed(method: string, path: string, allowed: readonly string[]): GatewayError {
  return new GatewayError(
    'GW_ERR_METHOD_NOT_ALLOWED',
    405,
    'invalid_request',
    `Method ${method} is not allowed on ${path}; use ${allowed.join(', ')}`,
    { headers: { Allow: allowed.join(', ') } },
  );
}

export function rateLimited(
  detail: string,
  headers?: Readonly<Record<string, string>>,
  limit?: LimitRefusal,
): GatewayError {
  return new GatewayError('GW_ERR_RATE_LIMITED', 429, 'rate_limit', detail, { headers, limit });
}

export function quotaExceeded(
  detail: string,
  headers?: Readonly<Record<string, string>>,
  limit?: LimitRefusal,
): GatewayError {
  return new GatewayError('GW_ERR_QUOTA_EXCEEDED', 429, 'rate_limit', `Quota exceeded: ${detail}`, { headers, limit });
}

/** 429: a key's or team's tokens per minute would be exceeded by the request's input. */
export function tokenRateLimited(
  detail: string,
  headers: Readonly<Record<string, string>>,
  limit: LimitRefusal,
): GatewayError {
  return new GatewayError('GW_ERR_TOKEN_RATE_LIMITED', 429, 'rate_limit', `Token rate limit exceeded: ${detail}`, {
    headers,
    limit,
  });
}

/** 429: a key's or team's money budget for the day or month cannot pay for the request's input. */
export function budgetExceeded(
  detail: string,
  headers: Readonly<Record<string, string>>,
  limit: LimitRefusal,
): GatewayError {
  return new GatewayError('GW_ERR_BUDGET_EXCEEDED', 429, 'rate_limit', `Budget exceeded: ${detail}`, {
    headers,
    limit,
  });
}

/**
 * 426, at once, to a WebSocket upgrade on a route that takes none: the client falls back to HTTP
 * without waiting on a handshake that never comes.
 */
export function webSocketNotServed(path: string, served: readonly string[]): GatewayError {
  const where = served.map((route) => `GET ${route}`).join(', ');
  const detail = `${path} does not take WebSocket connections; send it over HTTP, or open the WebSocket on ${where}`;
  return new GatewayError('GW_ERR_WEBSOCKET_NOT_SERVED', 426, 'invalid_request', detail);
}

/** 409 on a WebSocket: a `response.create` while one response runs and another waits (one at a time per socket). */
export function responseInFlight(): GatewayError {
  return new GatewayError(
    'GW_ERR_RESPONSE_IN_FLIGHT',
    409,
    'invalid_request',
    'A response is in flight on this socket and another waits for it: a socket runs one response at a time; ' +
      'wait for its end, cancel it (response.cancel) or open another socket',
  );
}

/** 400 on a WebSocket: `response.cancel` with no response (or not the one named) in flight. */
export function nothingToCancel(responseId: string | undefined): GatewayError {
  const named = responseId === undefined ? undefined : `Response '${responseId.slice(0, 128)}'`;
  const what = named === undefined ? 'No response is in flight on this socket' : `${named} is not in flight here`;
  const param = responseId === undefined ? undefined : 'response_id';
  const detail = `${what}; nothing was cancelled`;
  return new GatewayError('GW_ERR_NOTHING_TO_CANCEL', 400, 'invalid_request', detail, { param });
}

/** 502: the upstream could not be reached or answered in a way the gateway cannot pass on. */
export function upstreamFailure(provider: string, reason: string, cause?: unknown): GatewayError {
  return new GatewayError('GW_ERR_UPSTREAM', 502, 'upstream', `Upstream provider '${provider}' failed: ${reason}`, {
    cause,
  });
}

/**
 * 502 (in band once a stream's first bytes went out): a hook of a gateway plugin threw or returned a
 * shape the contract does not allow (a stream fixup, a usage extractor, the native chat adapter). The
 * fault is the gateway's plugin, not the upstream's; it is logged where it is caught, with the plugin,
 * the hook, the route, the model and the request id.
 */
export function pluginFault(plugin: string, hook: string, cause?: unknown): GatewayError {
  return new GatewayError(
    'GW_ERR_PLUGIN_FAULT',
    502,
    'internal',
    `Gateway plugin '${plugin}' failed in its hook '${hook}' (a fault of this gateway's plugin, not of the upstream provider)`,
    { cause, logged: true },
  );
}

/**
 * A guardrail refused the request's text or the answer's: 400 (in band once a stream's first bytes went
 * out), as a provider's own content policy answers, and so that no SDK retries it (an answer retried is
 * paid again). 503 when a webhook guardrail that fails closed could not check the text. Names the
 * guardrail, never what it found.
 */
export function guardrailRefusal(guardrail: string, phase: 'request' | 'response', unavailable = false): GatewayError {
  const what = phase === 'request' ? 'the request' : 'the answer';
  if (unavailable) {
    return new GatewayError(
      'GW_ERR_GUARDRAIL',
      503,
      'internal',
      `Guardrail '${guardrail}' could not check ${what} (its service did not answer) and refuses what it cannot check; retry later`,
      {
        headers: { 'Retry-After': '1' },
      },
    );
  }
  return new GatewayError(
    'GW_ERR_GUARDRAIL',
    400,
    'invalid_request',
    `Guardrail '${guardrail}' blocked ${what}: it holds content this gateway does not let ${phase === 'request' ? 'reach a model' : 'through'}`,
  );
}

/** 502, in band: the upstream streamed one event larger than the gateway relays; the stream is ended. */
export function streamEventTooLarge(provider: string, limitBytes: number): GatewayError {
  return new GatewayError(
    'GW_ERR_UPSTREAM_EVENT_TOO_LARGE',
    502,
    'upstream',
    `Upstream provider '${provider}' sent a stream event larger than the gateway's limit of ${limitBytes} bytes; the stream was ended`,
  );
}

/** 502: the upstream refused the gateway's own credentials (its 401/403 is not the client's fault). */
/** 503 when every endpoint of the provider rests (breaker open or told to wait); says when to retry. */
export function upstreamResting(provider: string, retryAfterMs: number): GatewayError {
  const seconds = Math.max(1, Math.ceil(retryAfterMs / 1000));
  return new GatewayError(
    'GW_ERR_UPSTREAM_UNAVAILABLE',
    503,
    'upstream',
    `Upstream provider '${provider}' is unavailable: every endpoint is resting after failures; retry in ${seconds} s`,
    { headers: { 'Retry-After': String(seconds) } },
  );
}

export function upstreamAuthRejected(provider: string, upstreamStatus: number): GatewayError {
  return new GatewayError(
    'GW_ERR_UPSTREAM_AUTH',
    502,
    'upstream',
    `Upstream provider '${provider}' rejected the gateway's credentials (status ${upstreamStatus}); contact the gateway operator`,
  );
}

export function upstreamNotConfigured(provider: string, envPrefix: string): GatewayError {
  return new GatewayError(
    'GW_ERR_UPSTREAM_NOT_CONFIGURED',
    502,
    'upstream',
    `Upstream provider '${provider}' is not configured (set ${envPrefix}_BASE_URL)`,
  );
}

export function usageMissing(provider: string): GatewayError {
  return new GatewayError(
    'GW_ERR_USAGE_MISSING',
    502,
    'upstream',
    `Upstream provider '${provider}' answered without usage metadata; the request cannot be accounted`,
  );
}

export function upstreamTimeout(provider: string, cause?: unknown): GatewayError {
  return new GatewayError(
    'GW_ERR_UPSTREAM_TIMEOUT',
    504,
    'timeout',
    `Upstream provider '${provider}' did not answer in time`,
    { cause },
  );
}

export function serviceUnavailable(detail: string, cause?: unknown): GatewayError {
  return new GatewayError('GW_ERR_UNAVAILABLE', 503, 'internal', detail, { cause, headers: { 'Retry-After': '1' } });
}

export function internalError(cause?: unknown): GatewayError {
  return new GatewayError('GW_ERR_INTERNAL', 500, 'internal', 'Internal error in the gateway; please retry later', {
    cause,
  });
}

export function isGatewayError(value: unknown): value is GatewayError {
  return value instanceof GatewayError;
}
