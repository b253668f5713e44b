import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import { rawErrorResponse } from '../data-plane/answer-error.ts';
import { rateLimited, serviceUnavailable } from '../core/gateway-errors.ts';
import { addressKey } from '../core/incoming-request.ts';
import { answerAndLinger, REFUSAL_LINGER_MS } from '../data-plane/http/client-connection.ts';

/** Why a connection was refused, as `gateway_refusals_total` counts it. */
export type ConnectionRefusal = 'max_connections' | 'connections_per_address';

export interface ConnectionCaps {
  /** Open connections at most; one more is answered 503. */
  readonly max: number;
  /** Open connections from one address at most (IPv6 by /56); one more is answered 429. */
  readonly maxPerAddress: number;
  /** Peers whose connections count only against `max`: trusted proxies, which carry many clients. */
  readonly uncapped?: (address: string) => boolean;
  /** Bytes a refused client may still send while its answer lingers (default 20 MiB). */
  readonly lingerBytes?: number;
  readonly onRefused?: (reason: ConnectionRefusal) => void;
}

/**
 * Caps the open client connections at `max`, and those of one address at `maxPerAddress`: one more is
 * answered at once with a JSON 503 (over `max`) or 429 (over its address's share), `Retry-After: 1`,
 * and closed, so that the process never runs out of file descriptors (when `accept` fails, Node stops
 * accepting for a while and every new client stalls) and one address cannot take every slot. A refused
 * connection never reaches the HTTP layer: no request of it is read or served. Logs the first refusal
 * of each burst (per address for the per-address cap).
 */
export function capConnections(server: Server, caps: ConnectionCaps, logger: Logger): { readonly open: () => number } {
  const { max, maxPerAddress, uncapped = () => false, lingerBytes = 20 * 1024 * 1024, onRefused } = caps;
  const overall = rawErrorResponse(
    serviceUnavailable('The gateway has too many open connections; please retry shortly'),
  );
  const ofAddress = rawErrorResponse(
    rateLimited(`This address has too many open connections (at most ${maxPerAddress}); please retry shortly`, {
      'Retry-After': '1',
    }),
  );
  // Refusals come when descriptors are scarce: beyond this many lingering at once, a refusal is closed
  // as soon as it is written.
  const lingeringAtMost = Math.max(8, Math.floor(max / 8));
  let open = 0;
  let refusing = false;
  let lingering = 0;
  const byAddress = new Map<string, { open: number; refusing: boolean }>();

  const refuse = (socket: Socket, answer: string) => {
    if (lingering >= lingeringAtMost) {
      socket.on('error', () => {});
      socket.end(answer);
      socket.destroySoon();
      return;
    }
    lingering += 1;
    socket.once('close', () => (lingering -= 1));
    answerAndLinger(socket, answer, { maxBytes: lingerBytes, maxMs: REFUSAL_LINGER_MS });
  };

  const admit = (socket: Socket): boolean => {
    if (open >= max) {
      if (!refusing) {
        refusing = true;
        logger.warn({ max_connections: max }, 'connection cap reached: refusing new connections with 503');
      }
      onRefused?.('max_connections');
      refuse(socket, overall);
      return false;
    }
    const peer = socket.remoteAddress ?? 'unknown';
    const key = uncapped(peer) ? undefined : addressKey(peer);
    let entry = key === undefined ? undefined : byAddress.get(key);
    if (entry && entry.open >= maxPerAddress) {
      if (!entry.refusing) {
        entry.refusing = true;
        logger.warn(
          { address: key, max_connections_per_address: maxPerAddress },
          'per-address connection cap reached: refusing this address new connections with 429',
        );
      }
      onRefused?.('connections_per_address');
      refuse(socket, ofAddress);
      return false;
    }
    if (key !== undefined && entry === undefined) byAddress.set(key, (entry = { open: 0, refusing: false }));
    open += 1;
    if (entry) entry.open += 1;
    socket.once('close', () => {
      open -= 1;
      if (refusing && open < max) refusing = false;
      if (entry === undefined) return;
      entry.open -= 1;
      if (entry.open === 0) byAddress.delete(key!);
      else if (entry.refusing && entry.open < maxPerAddress) entry.refusing = false;
    });
    return true;
  };

  // The HTTP layer's own listener sits behind the caps: a refused socket is never parsed.
  const behind = server.listeners('connection') as ((socket: Socket) => void)[];
  server.removeAllListeners('connection');
  server.on('connection', (socket: Socket) => {
    if (!admit(socket)) return;
    for (const listener of behind) listener.call(server, socket);
  });
  return { open: () => open };
}
