import type { IncomingMessage } from 'node:http';
import { ipKeyGenerator } from 'express-rate-limit';
import proxyAddr from 'proxy-addr';

const ADDRESS = Symbol('client-address');

type StampedRequest = IncomingMessage & { [ADDRESS]?: string };

/**
 * Where a request comes from: the socket's peer, or, when that peer is one of `trustedProxies`
 * (addresses, CIDR ranges, or proxy-addr's names `loopback`, `linklocal`, `uniquelocal`), the nearest
 * untrusted address of its `X-Forwarded-For` chain. An empty list trusts no proxy: the header is ignored.
 */
export function clientAddressResolver(trustedProxies: readonly string[]): (req: IncomingMessage) => string {
  if (trustedProxies.length === 0) return (req) => req.socket.remoteAddress ?? 'unknown';
  const trust = proxyAddr.compile([...trustedProxies]);
  return (req) => proxyAddr(req, trust);
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

/**
 * The address per-address rules count a request under: the stamped client address (the socket's peer
 * when none was stamped), an IPv6 address by its /56.
 */
export function clientAddress(req: IncomingMessage): string {
  return addressKey((req as StampedRequest)[ADDRESS] ?? req.socket.remoteAddress ?? 'unknown');
}

/** The key per-address rules count an address under: itself, an IPv6 address by its /56. */
export function addressKey(address: string): string {
  return ipKeyGenerator(address);
}
