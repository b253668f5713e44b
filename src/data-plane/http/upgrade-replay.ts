import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';

/** Headers of the upgrade handshake itself, dropped when the request is served as plain HTTP. */
const UPGRADE_ONLY = new Set(['upgrade', 'http2-settings']);

/**
 * Gives a request that asked to upgrade to a protocol other than WebSocket (`curl --http2` sends
 * `Upgrade: h2c` on every request, bodies included) back to the HTTP layer as the HTTP/1.1 request it
 * also is: a server may ignore `Upgrade`, and did before it served WebSockets. Node's HTTP parser hands
 * every upgrade to the `upgrade` listener and stops reading the socket, so the request's head is put
 * back in front of what it had not read yet, without the upgrade's headers, and the socket handed to
 * `serve` (the HTTP layer's connection listener), which reads it as a new connection: body, pipelined
 * requests and keep-alive as usual.
 */
export function replayWithoutUpgrade(
  req: IncomingMessage,
  socket: Socket,
  head: Buffer,
  serve: (socket: Socket) => void,
): void {
  const lines = [`${req.method} ${req.url} HTTP/${req.httpVersion}`];
  const raw = req.rawHeaders;
  for (let index = 0; index < raw.length; index += 2) {
    const name = raw[index]!;
    const value = raw[index + 1]!;
    const lower = name.toLowerCase();
    if (UPGRADE_ONLY.has(lower)) continue;
    if (lower === 'connection') {
      const kept = value
        .split(',')
        .map((token) => token.trim())
        .filter((token) => token !== '' && !UPGRADE_ONLY.has(token.toLowerCase()));
      if (kept.length > 0) lines.push(`${name}: ${kept.join(', ')}`);
      continue;
    }
    lines.push(`${name}: ${value}`);
  }
  socket.unshift(Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), head]));
  serve(socket);
}
