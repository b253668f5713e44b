import { hash } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { CallerKey } from '../../core/exchange.ts';
import { cacheTenant, type CachedAnswer, type CacheTenant, type ResponseCache } from '../../core/response-cache.ts';
import type { TokenUsage, UpstreamRoute } from '../../plugins/plugin-contract.ts';
import { ANONYMOUS_KEY_ID } from '../../usage/usage-accounting.ts';
import { STREAM_HEADERS } from '../sse/sse-relay.ts';
import type { ClientResponse } from '../http/client-connection.ts';

/** The cache's settings in force (a reload builds the routes again with its own). */
export interface CacheSettings {
  /** How long an entry is served after it was stored. */
  readonly ttlMs: number;
  /** Largest answer stored, in bytes. */
  readonly maxEntryBytes: number;
}

/** How a request was served with respect to the cache, as `x-gateway-cache` names it. */
export type CacheResult = 'hit' | 'miss' | 'bypass';

/** What the routes need of the response cache while it is on (a TTL configured). */
export interface ResponseCaching {
  readonly store: ResponseCache;
  /** The settings of the configuration the routes were built from. */
  readonly settings: CacheSettings;
}

/** What a client's `Cache-Control` (and `Pragma`) ask of the cache. */
export type CacheDirective = 'use' | 'refresh' | 'skip';

/**
 * HTTP's own words, read as a shared cache reads a request: `no-store` neither reads nor writes;
 * `no-cache` (or `max-age=0`, or `Pragma: no-cache` without a `Cache-Control`) goes upstream and
 * stores the fresh answer; anything else uses the cache.
 */
export function cacheDirective(headers: IncomingHttpHeaders): CacheDirective {
  const control = headers['cache-control'];
  if (control === undefined)
    return /(?:^|,)\s*no-cache\s*(?:,|$)/i.test(String(headers.pragma ?? '')) ? 'refresh' : 'use';
  let directive: CacheDirective = 'use';
  for (const part of control.toLowerCase().split(',')) {
    const token = part.trim();
    if (token === 'no-store') return 'skip';
    if (token === 'no-cache' || token.startsWith('no-cache=') || /^max-age\s*=\s*"?0+"?$/.test(token))
      directive = 'refresh';
  }
  return directive;
}

/** What makes an answer: everything that reaches the upstream and can change it. */
export interface CacheKeyMaterial {
  readonly tenant: CacheTenant;
  readonly route: string;
  /** The resolved canonical model. */
  readonly model: string;
  /** The request body exactly as forwarded (after alias resolution). */
  readonly forwarded: Buffer;
  /** The route's forwarded headers with the value each carries upstream (the client's, else the route's default). */
  readonly headers: readonly (readonly [string, string | undefined])[];
  /**
   * The response guardrails the caller runs under (their fingerprint): an answer stored under some is
   * never served under others. Absent without any (the key is then as before guardrails existed).
   */
  readonly guardrails?: string;
}

/**
 * The entry's key: a SHA-256 over every part, each length-prefixed so that no two different sets of
 * parts hash the same bytes. Two requests share an entry only when every byte matches.
 */
export function cacheKey(material: CacheKeyMaterial): string {
  let head = `${part('v1')}${part(material.tenant)}${part(material.route)}${part(material.model)}`;
  for (const [name, value] of material.headers) head += part(name) + part(value === undefined ? '\u0000' : `=${value}`);
  // No header name holds `:` or `=`: this part cannot be read as a header's.
  if (material.guardrails !== undefined) head += part(`guardrails:=${material.guardrails}`);
  // One call into the hash: the parts as one string, then the body's bytes behind its length.
  const bytes = Buffer.byteLength(head) + String(material.forwarded.length).length + 1;
  const all = Buffer.allocUnsafe(bytes + material.forwarded.length);
  all.write(`${head}${material.forwarded.length}:`, 0, 'utf8');
  material.forwarded.copy(all, bytes);
  return hash('sha256', all, 'hex');
}

const part = (text: string): string => `${Buffer.byteLength(text)}:${text}`;

// Per route: the names of the headers it sends upstream, in one order.
const headerNames = new WeakMap<UpstreamRoute, readonly string[]>();

/** The headers of `route` that reach the upstream, with their values for this request. */
export function forwardedHeaderValues(
  route: UpstreamRoute,
  clientHeaders: IncomingHttpHeaders,
): [string, string | undefined][] {
  let names = headerNames.get(route);
  if (names === undefined) {
    names = [
      ...new Set(
        [...(route.forwardHeaders ?? []), ...Object.keys(route.defaultHeaders ?? {})].map((name) => name.toLowerCase()),
      ),
    ].sort();
    headerNames.set(route, names);
  }
  return names.map((name) => {
    const value = clientHeaders[name];
    return [name, typeof value === 'string' ? value : route.defaultHeaders?.[name]];
  });
}

/** One request's place in the cache, once its model is resolved and its forwarded bytes are known. */
export interface CacheTicket {
  readonly key: string;
  readonly tenant: CacheTenant;
  readonly settings: CacheSettings;
  /** Whether a stored entry may answer (false for `no-cache`: the answer is fetched and stored afresh). */
  readonly read: boolean;
}

/**
 * Decides how the cache takes part in a request and says so in `x-gateway-cache` (set on the response
 * now, so that every answer carries it): undefined when the cache is off, or bypassed (`no-store`, or
 * a key or team with `cache: false`), else the request's ticket.
 */
export function openTicket<Request>(
  caching: ResponseCaching | undefined,
  caller: CallerKey | undefined,
  clientHeaders: IncomingHttpHeaders,
  res: Pick<ClientResponse, 'setHeader'>,
  // Read only for a ticket, from the request it is given (no closure is made for a bypass).
  material: (request: Request) => Omit<CacheKeyMaterial, 'tenant'>,
  request: Request,
): CacheTicket | undefined {
  if (!caching) return undefined;
  const { settings } = caching;
  // A caller the cache leaves alone is told so before any header is read.
  const directive = caller?.cache === false || caller?.team?.cache === false ? 'skip' : cacheDirective(clientHeaders);
  if (directive === 'skip') {
    res.setHeader('x-gateway-cache', 'bypass');
    return undefined;
  }
  const tenant = cacheTenant(caller?.id ?? ANONYMOUS_KEY_ID, caller?.team?.id);
  if (directive === 'refresh') res.setHeader('x-gateway-cache', 'bypass');
  return { key: cacheKey({ tenant, ...material(request) }), tenant, settings, read: directive === 'use' };
}

/** The entry of a ticket that may read, or undefined (a miss, counted and said in `x-gateway-cache`). */
export async function lookUp(
  caching: ResponseCaching,
  ticket: CacheTicket,
  res: Pick<ClientResponse, 'setHeader'>,
): Promise<CachedAnswer | undefined> {
  if (!ticket.read) return undefined;
  const found = await caching.store.get(ticket.tenant, ticket.key);
  const result = found && found.status === 200 ? 'hit' : 'miss';
  res.setHeader('x-gateway-cache', result);
  return result === 'hit' ? found : undefined;
}

/** The head of a hit: the stored status and content type, the stream's own headers, `x-gateway-cache` and `Age`. */
export function hitHeaders(answer: CachedAnswer, now: number): Record<string, string> {
  const age = String(Math.max(0, Math.floor((now - answer.storedAt) / 1000)));
  return answer.stream
    ? { 'content-type': answer.contentType, ...STREAM_HEADERS, 'x-gateway-cache': 'hit', age }
    : {
        'content-type': answer.contentType,
        'content-length': String(answer.body.length),
        'x-gateway-cache': 'hit',
        age,
      };
}

/**
 * Collects the bytes a client receives for one answer, up to the entry limit: past it the answer is
 * not stored (and nothing more is kept).
 */
export class AnswerCapture {
  private readonly parts: Buffer[] = [];
  private bytes = 0;
  /** The answer outgrew the entry limit, or something made it unfit to store. */
  spoiled = false;
  /** The answer's content type, as the client got it (set by the relay). */
  contentType = 'application/json';

  constructor(
    readonly ticket: CacheTicket,
    private readonly caching: ResponseCaching,
  ) {}

  add(bytes: Buffer): void {
    if (this.spoiled || bytes.length === 0) return;
    this.bytes += bytes.length;
    if (this.bytes > this.ticket.settings.maxEntryBytes) {
      this.spoiled = true;
      this.parts.length = 0;
      return;
    }
    this.parts.push(bytes);
  }

  /** Stores what was collected as the ticket's entry, unless it was spoiled. */
  store(answer: {
    readonly contentType: string;
    readonly stream: boolean;
    readonly model: string;
    readonly usage: TokenUsage;
  }): void {
    if (this.spoiled) return;
    this.spoiled = true;
    const body = this.parts.length === 1 ? this.parts[0]! : Buffer.concat(this.parts);
    this.parts.length = 0;
    this.caching.store.set(
      this.ticket.tenant,
      this.ticket.key,
      { storedAt: Date.now(), status: 200, body, ...answer },
      this.ticket.settings.ttlMs,
    );
  }
}

/**
 * Whether a 200 JSON answer carries an error inside it (a non-null top-level `error`, or a Responses
 * object that did not complete): such an answer is relayed as it came, but never stored.
 */
export function hasInBandError(body: unknown): boolean {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return true;
  const record = body as Record<string, unknown>;
  if (record.error !== undefined && record.error !== null) return true;
  return record.object === 'response' && record.status !== 'completed';
}
