import type { IncomingMessage, ServerResponse, IncomingHttpHeaders } from 'node:http';
import { isIPv4, isIPv6, SocketAddress } from 'node:net';
import { ipKeyGenerator } from 'express-rate-limit';
import proxyAddr from 'proxy-addr';
import { randomUUID } from 'node:crypto';
import { fieldError, validationError } from './gateway-errors.ts';

const ADDRESS = Symbol('client-address');

type StampedRequest = IncomingMessage & { [ADDRESS]?: string };

/**
 * Where a request comes from: the socket's peer, or, when that peer is one of `trustedProxies`
 * (addresses, CIDR ranges, or proxy-addr's names `loopback`, `linklocal`, `uniquelocal`), the nearest
 * untrusted address of its `X-Forwarded-For` chain. An empty list trusts no proxy: the header is ignored.
 *
 * Every address is read by {@link canonicalAddress} before it is trusted or counted, so that each
 * client has one address however a proxy spells it: a port a load balancer adds (`10.0.0.1:5678`)
 * cannot make each connection a new client. An entry that cannot be read names no one: the client is
 * then the trusted proxy that appended it. The `Forwarded` header (RFC 7239) is not read: a proxy that
 * appends to `X-Forwarded-For` passes a client's own `Forwarded` on untouched, so it would let any
 * client name itself.
 */
export function clientAddressResolver(trustedProxies: readonly string[]): (req: IncomingMessage) => string {
  if (trustedProxies.length === 0) return peerAddress;
  const trust = proxyAddr.compile([...trustedProxies]);
  return (req) => {
    let client = peerAddress(req);
    const header = req.headers['x-forwarded-for'] as string | string[] | undefined;
    if (!header) return client;
    // Nearest hop last; an empty list element is no hop (RFC 9110, 5.6.1).
    const entries = (Array.isArray(header) ? header.join(',') : header).split(',');
    let hop = 0;
    for (let index = entries.length - 1; index >= 0; index -= 1) {
      const entry = entries[index]!.trim();
      if (entry === '') continue;
      if (!trust(client, hop)) break;
      hop += 1;
      const named = canonicalAddress(entry);
      if (named === undefined) break;
      client = named;
    }
    return client;
  };
}

// Per connection: a keep-alive connection's requests share their peer, read once.
const peers = new WeakMap<object, string>();

/** The socket's peer, canonical (an IPv4-mapped IPv6 peer is its IPv4 address). */
function peerAddress(req: IncomingMessage): string {
  const socket = req.socket;
  const known = peers.get(socket);
  if (known !== undefined) return known;
  const peer = socket.remoteAddress;
  // A socket that has closed may no longer say; it is not remembered then.
  if (peer === undefined) return 'unknown';
  const address = canonicalAddress(peer) ?? peer;
  peers.set(socket, address);
  return address;
}

const DECIMAL_OCTET = /^[0-9]{1,3}$/;
const DECIMAL_INTEGER = /^[0-9]{1,10}$/;
const PORT = /^[0-9]{1,5}$/;

/**
 * One address as a proxy may write it in `X-Forwarded-For` (or as an RFC 7239 node), in its one
 * canonical spelling, or `undefined` when it is not an address. Read:
 * - a port: `10.0.0.1:5678`, `[2001:db8::1]:443` (decimal, at most 65535), dropped; brackets only
 *   around IPv6; the whole entry may be quoted (`"[2001:db8::1]:4711"`);
 * - a zone id: `fe80::1%eth0`, `[fe80::1%25eth0]`, dropped;
 * - IPv6 in Node's spelling (lowercase, zeros compressed); IPv4-mapped IPv6 (`::ffff:10.0.0.1`,
 *   `::ffff:a00:1`) as its IPv4 address;
 * - IPv4 as four decimal octets, leading zeros read as decimal (`010.0.0.1` is 10.0.0.1, not the octal
 *   8.0.0.1 of `inet_aton`), or as one decimal 32-bit integer (`167772161` is 10.0.0.1).
 * Anything else is not an address: hexadecimal or shortened IPv4 (`0x0a.0.0.1`, `10.1`), RFC 7239's
 * `unknown` and `_obfuscated` names, other ports, text.
 */
export function canonicalAddress(text: string): string | undefined {
  let entry = text.trim();
  if (entry.length >= 2 && entry.startsWith('"') && entry.endsWith('"')) entry = entry.slice(1, -1);
  let host = entry;
  let port: string | undefined;
  if (entry.startsWith('[')) {
    const close = entry.indexOf(']');
    if (close === -1) return undefined;
    host = entry.slice(1, close);
    const rest = entry.slice(close + 1);
    if (!host.includes(':') || (rest !== '' && !rest.startsWith(':'))) return undefined;
    if (rest !== '') port = rest.slice(1);
  } else {
    // One colon: IPv4 and a port. More: IPv6, which has no port unless bracketed.
    const colon = entry.indexOf(':');
    if (colon !== -1 && colon === entry.lastIndexOf(':')) {
      host = entry.slice(0, colon);
      port = entry.slice(colon + 1);
    }
  }
  if (port !== undefined && !(PORT.test(port) && Number(port) <= 65_535)) return undefined;
  const zone = host.indexOf('%');
  if (zone !== -1) host = host.slice(0, zone);
  return host.includes(':') ? canonicalIPv6(host) : canonicalIPv4(host);
}

function canonicalIPv4(text: string): string | undefined {
  if (!DECIMAL_INTEGER.test(text)) return dottedQuad(text);
  const value = Number(text);
  if (value > 0xff_ff_ff_ff) return undefined;
  return [value >>> 24, (value >>> 16) & 0xff, (value >>> 8) & 0xff, value & 0xff].join('.');
}

/** Four decimal octets, leading zeros allowed (and read as decimal), in their canonical spelling. */
function dottedQuad(text: string): string | undefined {
  const parts = text.split('.');
  if (parts.length !== 4 || !parts.every((part) => DECIMAL_OCTET.test(part))) return undefined;
  const address = parts.map(Number).join('.');
  return isIPv4(address) ? address : undefined;
}

function canonicalIPv6(text: string): string | undefined {
  let host = text;
  // An embedded IPv4 tail is read as IPv4 is (leading zeros as decimal).
  if (host.includes('.')) {
    const colon = host.lastIndexOf(':');
    const tail = dottedQuad(host.slice(colon + 1));
    if (tail === undefined) return undefined;
    host = host.slice(0, colon + 1) + tail;
  }
  if (!isIPv6(host)) return undefined;
  let address: string;
  try {
    address = new SocketAddress({ address: host, family: 'ipv6' }).address;
  } catch {
    return undefined;
  }
  const mapped = address.startsWith('::ffff:') ? address.slice('::ffff:'.length) : undefined;
  return mapped !== undefined && isIPv4(mapped) ? mapped : address;
}

/** Whether a socket peer is one of `trustedProxies`, as {@link clientAddressResolver} reads the list. */
export function trustedPeer(trustedProxies: readonly string[]): (address: string) => boolean {
  if (trustedProxies.length === 0) return () => false;
  const trust = proxyAddr.compile([...trustedProxies]);
  return (address) => trust(address, 0);
}

/** Checks a trusted-proxy list as proxy-addr reads it; the message names what it could not read. */
export function checkTrustedProxies(list: readonly string[]): string | undefined {
  try {
    proxyAddr.compile([...list]);
    return undefined;
  } catch (error) {
    return (error as Error).message;
  }
}

/** Gives a request its client address once, at the way in, for every per-address rule to read. */
export function stampClientAddress(req: IncomingMessage, resolve: (req: IncomingMessage) => string): void {
  (req as StampedRequest)[ADDRESS] = resolve(req);
}

/** The client address stamped at the way in (the socket's peer when none was stamped), as it is: for logs. */
export function stampedAddress(req: IncomingMessage): string {
  return (req as StampedRequest)[ADDRESS] ?? req.socket.remoteAddress ?? 'unknown';
}

/**
 * The address per-address rules count a request under: the stamped client address (the socket's peer
 * when none was stamped), an IPv6 address by its /56.
 */
export function clientAddress(req: IncomingMessage): string {
  return addressKey((req as StampedRequest)[ADDRESS] ?? req.socket.remoteAddress ?? 'unknown');
}

/**
 * The key per-address rules count an address under: itself, an IPv6 address by its /56 (an
 * IPv4-mapped one by its IPv4 address). Resolved addresses are canonical ({@link canonicalAddress}),
 * so one client has one key.
 */
export function addressKey(address: string): string {
  return ipKeyGenerator(address);
}

const ACCEPTED = /^[A-Za-z0-9._:-]{1,128}$/;

/** The header a request id travels in, from the client, back to it, and to the upstream. */
export const REQUEST_ID_HEADER = 'x-request-id';

/** The client's `x-request-id` when it is 1–128 characters of `[A-Za-z0-9._:-]`, otherwise a fresh UUID. */
export function acceptedRequestId(presented: string | string[] | undefined): string {
  return typeof presented === 'string' && ACCEPTED.test(presented) ? presented : randomUUID();
}

/**
 * Gives a request its id before any route sees it: the accepted or generated id replaces the client's
 * header (so every later reader, the routes included, reads `req.headers['x-request-id']`), and the
 * answer carries it whatever path answers it.
 */
export function stampRequestId(req: IncomingMessage, res: ServerResponse): string {
  const id = acceptedRequestId(req.headers[REQUEST_ID_HEADER]);
  req.headers[REQUEST_ID_HEADER] = id;
  res.setHeader(REQUEST_ID_HEADER, id);
  return id;
}

/** The id {@link stampRequestId} gave the request (empty before it ran, e.g. in unit tests of a bare route). */
export function requestIdOf(req: IncomingMessage): string {
  const id = req.headers[REQUEST_ID_HEADER];
  return typeof id === 'string' ? id : '';
}

/** The header that names a request's end user when its body does not (never forwarded upstream). */
export const END_USER_HEADER = 'x-gateway-end-user';

/** The longest end user accepted, in characters. */
export const MAX_END_USER_LENGTH = 256;

function bodyValue(body: Record<string, unknown>, path: readonly string[]): unknown {
  let value: unknown = body;
  for (const name of path) {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
    value = (value as Record<string, unknown>)[name];
  }
  return value;
}

/**
 * The end user a request names: its body's field at `path` (its route's `endUserField`), else the
 * `x-gateway-end-user` header; the first present one (null counts as absent) must be a non-empty string
 * of at most 256 characters, else a 400 naming it. Undefined when the request names none.
 */
export function endUserOf(
  path: readonly string[] | undefined,
  body: Record<string, unknown>,
  headers: IncomingHttpHeaders,
): string | undefined {
  const fromBody = path && bodyValue(body, path);
  if (fromBody !== undefined && fromBody !== null) return checked(fromBody, path!.join('.'));
  const header = headers[END_USER_HEADER];
  if (header === undefined) return undefined;
  return checked(header, `header ${END_USER_HEADER}`);
}

function checked(value: unknown, field: string): string {
  const problem =
    typeof value !== 'string'
      ? 'must be a string naming the end user (given once)'
      : value.trim() === ''
        ? 'must not be empty'
        : value.length > MAX_END_USER_LENGTH
          ? `must be at most ${MAX_END_USER_LENGTH} characters`
          : undefined;
  if (problem) throw validationError([fieldError(field, problem)], field);
  return value as string;
}
