import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import { rawErrorResponse } from '../errors/error-middleware.ts';
import { serviceUnavailable } from '../errors/gateway-errors.ts';
import { answerAndLinger } from './linger-close.ts';

export interface ConnectionCaps {
  /** Open connections at most; one more is answered 503. */
  readonly max: number;
  /** Bytes a refused client may still send while its answer lingers (default 20 MiB). */
  readonly lingerBytes?: number;
}

// Refusals come when descriptors are scarce: a refused client that neither reads nor closes is cut
// after this, and beyond the budget below a refusal is closed as soon as it is written.
const REFUSAL_LINGER_MS = 2000;

/**
 * Caps the open client connections at `max`: one more is answered at once with a JSON 503
 * (`Retry-After: 1`) and closed, so that the process never runs out of file descriptors (when `accept`
 * fails, Node stops accepting for a while and every new client stalls). A refused connection never
 * reaches the HTTP layer: no request of it is read or served. Logs the first refusal of each burst.
 */
export function capConnections(server: Server, caps: ConnectionCaps, logger: Logger): { readonly open: () => number } {
  const { max, lingerBytes = 20 * 1024 * 1024 } = caps;
  const overall = rawErrorResponse(serviceUnavailable('The gateway has too many open connections; please retry shortly'));
  const lingeringAtMost = Math.max(8, Math.floor(max / 8));
  let open = 0;
  let refusing = false;
  let lingering = 0;

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
      refuse(socket, overall);
      return false;
    }
    open += 1;
    socket.once('close', () => {
      open -= 1;
      if (refusing && open < max) refusing = false;
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
