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
  const answers = refusalAnswers(caps.maxPerAddress);
  const refuse = lingeringRefusals(caps.max, caps.lingerBytes ?? 20 * 1024 * 1024);
  const counts = new ConnectionCounts(caps, logger);
  // The HTTP layer's own listener sits behind the caps: a refused socket is never parsed.
  const behind = server.listeners('connection') as ((socket: Socket) => void)[];
  server.removeAllListeners('connection');
  server.on('connection', (socket: Socket) => {
    const refusal = counts.admit(socket);
    if (refusal === undefined) {
      for (const listener of behind) listener.call(server, socket);
      return;
    }
    caps.onRefused?.(refusal);
    refuse(socket, answers[refusal]);
  });
  return { open: () => counts.open };
}

/** The raw HTTP answer of each refusal: a JSON 503 over `max`, a 429 over an address's share. */
function refusalAnswers(maxPerAddress: number): Record<ConnectionRefusal, string> {
  return {
    max_connections: rawErrorResponse(
      serviceUnavailable('The gateway has too many open connections; please retry shortly'),
    ),
    connections_per_address: rawErrorResponse(
      rateLimited(`This address has too many open connections (at most ${maxPerAddress}); please retry shortly`, {
        'Retry-After': '1',
      }),
    ),
  };
}

/**
 * Writes a refusal and lets the client's request drain for a while before closing. Refusals come when
 * descriptors are scarce: beyond `max / 8` (8 at least) lingering at once, a refusal is closed as soon as
 * it is written.
 */
function lingeringRefusals(max: number, lingerBytes: number): (socket: Socket, answer: string) => void {
  const lingeringAtMost = Math.max(8, Math.floor(max / 8));
  let lingering = 0;
  return (socket, answer) => {
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
}

/** One address's open connections, and whether its cap is refusing (its burst's first refusal is logged). */
interface AddressConnections {
  open: number;
  refusing: boolean;
}

/** The open connections in all and per address, counted from their admission until they close. */
class ConnectionCounts {
  open = 0;
  /** Whether `max` is refusing: only a burst's first refusal is logged. */
  private refusing = false;
  private readonly byAddress = new Map<string, AddressConnections>();

  constructor(
    private readonly caps: ConnectionCaps,
    private readonly logger: Logger,
  ) {}

  /** Counts a connection in until it closes; or says which cap refuses it. */
  admit(socket: Socket): ConnectionRefusal | undefined {
    if (this.open >= this.caps.max) return this.refuseOverall();
    const peer = socket.remoteAddress ?? 'unknown';
    const key = this.caps.uncapped?.(peer) ? undefined : addressKey(peer);
    let entry = key === undefined ? undefined : this.byAddress.get(key);
    if (entry && entry.open >= this.caps.maxPerAddress) return this.refuseAddress(key!, entry);
    if (key !== undefined && entry === undefined) this.byAddress.set(key, (entry = { open: 0, refusing: false }));
    this.open += 1;
    if (entry) entry.open += 1;
    socket.once('close', () => this.closed(key, entry));
    return undefined;
  }

  private refuseOverall(): ConnectionRefusal {
    if (!this.refusing) {
      this.refusing = true;
      this.logger.warn({ max_connections: this.caps.max }, 'connection cap reached: refusing new connections with 503');
    }
    return 'max_connections';
  }

  private refuseAddress(key: string, entry: AddressConnections): ConnectionRefusal {
    if (!entry.refusing) {
      entry.refusing = true;
      this.logger.warn(
        { address: key, max_connections_per_address: this.caps.maxPerAddress },
        'per-address connection cap reached: refusing this address new connections with 429',
      );
    }
    return 'connections_per_address';
  }

  private closed(key: string | undefined, entry: AddressConnections | undefined): void {
    this.open -= 1;
    if (this.refusing && this.open < this.caps.max) this.refusing = false;
    if (entry === undefined) return;
    entry.open -= 1;
    if (entry.open === 0) this.byAddress.delete(key!);
    else if (entry.refusing && entry.open < this.caps.maxPerAddress) entry.refusing = false;
  }
}
