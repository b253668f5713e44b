import { WebSocket } from 'ws';

export interface SocketLoad {
  /** Responses that ended with `response.completed`. */
  readonly total: number;
  /** Responses that ended any other way (an error event, a closed socket). */
  readonly failed: number;
  /** Time from the first message to the last response's end, in ms. */
  readonly ms: number;
}

const COMPLETED = '"type":"response.completed"';
const ERROR = '"type":"error"';

/**
 * Load on `/v1/responses` over WebSocket, as the HTTP scenarios put on a route with autocannon: `connections`
 * sockets (opened before the clock starts), each sending `message` (a `response.create`) again as soon as its
 * previous response ended, for `seconds`. Only each message's type is looked at (a substring, no parse), so
 * the load generator stays cheap beside the process measured.
 */
export async function socketLoad(
  url: string,
  key: string,
  message: string,
  connections: number,
  seconds: number,
): Promise<SocketLoad> {
  const target = `${url.replace(/^http/, 'ws')}/v1/responses`;
  const opened = Array.from({ length: connections }, () => {
    const socket = new WebSocket(target, { headers: { authorization: `Bearer ${key}` }, perMessageDeflate: false });
    return new Promise<WebSocket>((resolve, reject) => {
      socket.once('open', () => resolve(socket)).once('error', reject);
    });
  });
  const sockets = await Promise.all(opened);
  let total = 0;
  let failed = 0;
  const started = performance.now();
  const until = started + seconds * 1000;
  await Promise.all(
    sockets.map(
      (socket) =>
        new Promise<void>((resolve) => {
          const next = () => {
            if (performance.now() < until && socket.readyState === WebSocket.OPEN) socket.send(message);
            else resolve();
          };
          socket.on('message', (data: Buffer) => {
            const text = data.toString('latin1', 0, 64);
            if (text.includes(COMPLETED)) total += 1;
            else if (text.includes(ERROR)) failed += 1;
            else return;
            next();
          });
          socket.once('close', () => resolve());
          next();
        }),
    ),
  );
  const ms = performance.now() - started;
  for (const socket of sockets) socket.close();
  return { total, failed, ms };
}
