import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import { errorBody } from '../errors/error-body.ts';
import { serviceUnavailable } from '../errors/gateway-errors.ts';

const REFUSAL_BODY = JSON.stringify(
  errorBody(serviceUnavailable('The gateway has too many open connections; please retry shortly'), 'plain'),
);
const REFUSAL = [
  'HTTP/1.1 503 Service Unavailable',
  'Content-Type: application/json; charset=utf-8',
  `Content-Length: ${Buffer.byteLength(REFUSAL_BODY)}`,
  'Retry-After: 1',
  'X-Content-Type-Options: nosniff',
  'Connection: close',
  '',
  REFUSAL_BODY,
].join('\r\n');

// A refused client that neither reads nor closes is cut after this.
const REFUSAL_LINGER_MS = 2000;

/**
 * Caps the open client connections at `max`: one more is answered at once with a JSON 503
 * (`Retry-After: 1`, `Connection: close`) and closed, so that the process never runs out of file
 * descriptors (when `accept` fails, Node stops accepting for a while and every new client stalls).
 * Logs the first refusal of each burst.
 */
export function capConnections(server: Server, max: number, logger: Logger): { readonly open: () => number } {
  let open = 0;
  let refusing = false;
  // Runs before the HTTP server's own listener: a refused socket is ended before any request is read
  // from it, and whatever the HTTP layer tries to write to it afterwards is dropped.
  server.prependListener('connection', (socket: Socket) => {
    if (open >= max) {
      if (!refusing) {
        refusing = true;
        logger.warn({ max_connections: max }, 'connection cap reached: refusing new connections with 503');
      }
      socket.on('error', () => {});
      socket.end(REFUSAL);
      socket.setTimeout(REFUSAL_LINGER_MS, () => socket.destroy());
      return;
    }
    open += 1;
    socket.once('close', () => {
      open -= 1;
      if (refusing && open < max) refusing = false;
    });
  });
  return { open: () => open };
}
