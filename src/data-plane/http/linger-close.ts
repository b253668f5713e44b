import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Readable } from 'node:stream';

/**
 * How many more bytes, and for how long, a connection answered before its request was read keeps
 * reading (and dropping) what the client still sends, before it is closed.
 */
export interface LingerLimits {
  readonly maxBytes: number;
  readonly maxMs: number;
}

/** The time bound; Node's request timeout (`GATEWAY_REQUEST_TIMEOUT_MS`) still cuts an unfinished request sooner. */
export const LINGER_MS = 30_000;

/**
 * The time bound of a refusal by the connection caps: they refuse when connections are scarce, and a
 * client reads a refusal long before this.
 */
export const REFUSAL_LINGER_MS = 2000;

/** Twice the body limit, or {@link LINGER_MS}, whichever comes first. */
export function lingerLimits(bodyLimitBytes: number): LingerLimits {
  return { maxBytes: 2 * bodyLimitBytes, maxMs: LINGER_MS };
}

const DEFAULT_LIMITS = lingerLimits(10 * 1024 * 1024);
const LIMITS = Symbol('linger-limits');
const lingering = new WeakSet<Socket>();
const ignore = () => {};

/** Gives a request the limits {@link lingerAfterAnswer} applies to it (default: those of a 10 MiB body limit). */
export function stampLingerLimits(req: IncomingMessage, limits: LingerLimits): void {
  (req as IncomingMessage & { [LIMITS]?: LingerLimits })[LIMITS] = limits;
}

/** Bounds the linger of an early answer to `req` by {@link REFUSAL_LINGER_MS}. */
export function lingerAsRefusal(req: IncomingMessage): void {
  const limits = (req as IncomingMessage & { [LIMITS]?: LingerLimits })[LIMITS] ?? DEFAULT_LIMITS;
  stampLingerLimits(req, { maxBytes: limits.maxBytes, maxMs: Math.min(limits.maxMs, REFUSAL_LINGER_MS) });
}

/**
 * Whether body bytes of the request may still be on their way: it declares a body (a length other
 * than 0, or a transfer coding) and the parser has not reached its end.
 */
export function bodyStillArriving(req: IncomingMessage): boolean {
  if (req.complete) return false;
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && Number(length) !== 0);
}

/**
 * Closes the connection of a request answered before its body was read (413, 401, 429, ...) without
 * losing the answer; call it once the answer (with `Connection: close`) is written. Node ends such a
 * response with `socket.destroySoon()`, destroying the socket as soon as the answer is flushed, and a
 * socket closed with unread data resets the connection: a client still sending then fails with EPIPE or
 * ECONNRESET, often before it read the answer, and the SDKs retry, sending the body again. Instead the
 * gateway half-closes (the client reads the answer, then end of stream) and drops what still arrives
 * until the body ends or the client closes, or the limits pass (then the socket is destroyed).
 */
export function lingerAfterAnswer(req: IncomingMessage): void {
  const socket = req.socket;
  if (lingering.has(socket) || socket.destroyed) return;
  socket.destroySoon = function halfClose(this: Socket) {
    if (this.writable) this.end();
  };
  drain(req, socket, (req as IncomingMessage & { [LIMITS]?: LingerLimits })[LIMITS] ?? DEFAULT_LIMITS);
}

/**
 * Sends `answer` on a socket whose requests are never read (the connection caps), then closes it as {@link
 * lingerAfterAnswer} does.
 */
export function answerAndLinger(socket: Socket, answer: string, limits: LingerLimits): void {
  socket.on('error', ignore);
  socket.end(answer);
  drain(socket, socket, limits);
}

/**
 * How long a connection past its byte bound is held without reading before it is destroyed: the client's
 * sending stalls (its window fills), while the answer already sent waits in its socket to be read. A
 * destroy at once would reset the connection with that answer maybe still unread, and the client would
 * see a connection error (and an SDK would send the whole body again).
 */
export const PAST_BOUND_HOLD_MS = 5000;

/**
 * Reads and drops `source` until it ends, then closes `socket` once its answer is flushed. Past the
 * byte bound it stops reading and destroys the socket {@link PAST_BOUND_HOLD_MS} later (or at the time
 * bound, if sooner), unless the client closed first.
 */
function drain(source: Readable, socket: Socket, limits: LingerLimits): void {
  lingering.add(socket);
  let read = 0;
  const cut = () => socket.destroy();
  const timer = setTimeout(cut, limits.maxMs);
  let held: NodeJS.Timeout | undefined;
  const onData = (chunk: Buffer) => {
    read += chunk.length;
    if (read <= limits.maxBytes || held) return;
    source.off('data', onData);
    source.pause();
    socket.pause();
    held = setTimeout(cut, PAST_BOUND_HOLD_MS);
  };
  source.on('data', onData);
  // Nothing unread is left: once the answer is out (the HTTP layer ends the socket after it), closing
  // ends the connection cleanly instead of resetting it.
  source.once('end', () => {
    if (socket.writableFinished) socket.destroy();
    else socket.once('finish', cut);
  });
  socket.once('close', () => {
    clearTimeout(timer);
    clearTimeout(held);
    source.off('data', onData);
  });
  source.resume();
}
