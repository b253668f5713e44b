import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http';
import type { Socket } from 'node:net';
import type { Readable } from 'node:stream';
import type { Logger } from 'pino';
import { rateLimited, type GatewayError, badRequest } from '../../core/gateway-errors.ts';
import { clientAddress } from '../../core/incoming-request.ts';

/**
 * The client side of a model request: what its stages, the relay and the error answer write to. An
 * HTTP request's is its `ServerResponse` itself (nothing wraps it, so the HTTP path costs what it did);
 * a response asked for over a WebSocket gets one that turns the same writes into the socket's messages
 * (`websocket/socket-response.ts`). Only what the data plane uses of a `ServerResponse` is here.
 */
export interface ClientResponse {
  statusCode: number;
  readonly headersSent: boolean;
  /** The request it answers (an early error answer asks whether its body is still arriving). */
  readonly req: IncomingMessage;
  readonly destroyed: boolean;
  readonly writableEnded: boolean;
  readonly writableFinished: boolean;
  /** Bytes written but not yet taken by the client's connection. */
  readonly writableLength: number;
  setHeader(name: string, value: number | string | readonly string[]): unknown;
  getHeader(name: string): number | string | string[] | undefined;
  hasHeader(name: string): boolean;
  writeHead(statusCode: number, headers?: OutgoingHttpHeaders): unknown;
  /** False when the client's side is full: wait for `drain`. */
  write(chunk: Buffer | string): boolean;
  end(chunk?: Buffer | string): unknown;
  /** Ends the answer where it stands, closing what carries it. */
  destroy(): unknown;
  once(event: 'close' | 'drain' | 'finish', listener: () => void): unknown;
  off(event: 'close' | 'drain' | 'finish', listener: () => void): unknown;
}

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

/**
 * Caps the half-sent requests of one client address: those whose headers arrived and whose body is still
 * arriving, counted under {@link clientAddress} (behind a trusted proxy, the client it names), so that
 * one address cannot hold every connection with slow uploads. A refused request is answered 429 and
 * lingers for up to 2 s while its body arrives (see `stampLingerLimits`); it counts as half-sent meanwhile.
 * Logs the first refusal of each burst of an address.
 */
export class PendingRequests {
  private readonly byAddress = new Map<string, Set<IncomingMessage>>();
  private readonly refusing = new Set<string>();

  constructor(
    private readonly max: number,
    private readonly logger: Logger,
    private readonly onRefused?: () => void,
  ) {}

  /** Calls `serve` for a request its address may send now; else answers it through `refuse`. */
  admit(req: IncomingMessage, serve: () => void, refuse: (error: GatewayError) => void): void {
    if (!bodyStillArriving(req)) return serve();
    const address = clientAddress(req);
    if (this.halfSent(address) < this.max) return this.track(address, req, serve);
    // 'request' comes as soon as the headers are read: a body sent with them (most requests) is
    // complete once the parser has gone through the rest of that read.
    setImmediate(() => {
      if (req.destroyed) return;
      if (!bodyStillArriving(req)) return serve();
      if (this.halfSent(address) < this.max) return this.track(address, req, serve);
      this.track(address, req);
      if (!this.refusing.has(address)) {
        this.refusing.add(address);
        this.logger.warn(
          { address, max_pending_requests_per_address: this.max },
          'per-address cap of half-sent requests reached: refusing this address new requests with 429',
        );
      }
      this.onRefused?.();
      lingerAsRefusal(req);
      refuse(
        rateLimited(
          `This address has too many requests still sending their body (at most ${this.max}); please retry shortly`,
          { 'Retry-After': '1' },
        ),
      );
    });
  }

  /** The half-sent requests of `address` now. */
  private halfSent(address: string): number {
    const requests = this.byAddress.get(address);
    if (requests === undefined) return 0;
    for (const req of requests)
      if (!bodyStillArriving(req) || req.destroyed || req.socket.destroyed) requests.delete(req);
    return requests.size;
  }

  private track(address: string, req: IncomingMessage, serve?: () => void): void {
    let requests = this.byAddress.get(address);
    if (requests === undefined) this.byAddress.set(address, (requests = new Set()));
    requests.add(req);
    // A request answered early is no longer the HTTP layer's: closing its socket does not destroy it.
    const socket = req.socket;
    const release = () => {
      req.off('close', release);
      socket.off('close', release);
      requests.delete(req);
      if (requests.size > 0 || this.byAddress.get(address) !== requests) return;
      this.byAddress.delete(address);
      this.refusing.delete(address);
    };
    req.once('close', release);
    socket.once('close', release);
    if (serve === undefined) return;
    this.refusing.delete(address);
    serve();
  }
}

/**
 * Counts route handlers still running, so a shutdown can wait until each has recorded its usage:
 * a handler's work (and its usage record) may go on for a few ticks after its connection closed.
 */
export class InFlight {
  private running = 0;
  private waiters: (() => void)[] = [];

  get count(): number {
    return this.running;
  }

  /**
   * Wraps a handler (a data-plane handler or an Express one) so that its run, until its promise settles, is counted.
   */
  track<A extends unknown[], R>(handler: (...args: A) => R): (...args: A) => R {
    return (...args: A): R => {
      this.running += 1;
      let result: R;
      try {
        result = handler(...args);
      } catch (error) {
        this.done();
        throw error;
      }
      if (result instanceof Promise) {
        // Express 5 reads the handler's rejection from the promise handed back; this copy only counts.
        return result.finally(() => this.done()) as R;
      }
      this.done();
      return result;
    };
  }

  /** Resolves once no tracked handler is running. */
  idle(): Promise<void> {
    if (this.running === 0) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  private done(): void {
    this.running -= 1;
    if (this.running === 0) this.waiters.splice(0).forEach((resolve) => resolve());
  }
}

/**
 * The 400 for a request with more than one Host header, else undefined. Node keeps the first and drops
 * the others, while a proxy in front or behind may go by another: such a request means two things.
 */
export function duplicateHost(req: IncomingMessage): GatewayError | undefined {
  const raw = req.rawHeaders;
  let seen = false;
  for (let index = 0; index < raw.length; index += 2) {
    const name = raw[index]!;
    if (name.length === 4 && name.toLowerCase() === 'host') {
      if (seen) return badRequest('The request has more than one Host header');
      seen = true;
    }
  }
  return undefined;
}

/**
 * How waiting on a client to read ended: it took what was buffered (`taken`), its connection closed
 * first (`closed`), or it read nothing for the whole timeout (`stalled`: the response was destroyed,
 * closing the connection).
 */
export type ClientRead = 'taken' | 'closed' | 'stalled';

/**
 * Waits for the client to take the bytes the response buffered: its `drain` after a write returned
 * false, or its `finish` after `end()`. A client that reads nothing for `timeoutMs` would otherwise
 * hold the connection (and whatever feeds it) for ever; its response is destroyed. No timeout when
 * `timeoutMs` is undefined.
 */
export function awaitClientRead(
  res: ClientResponse,
  event: 'drain' | 'finish',
  timeoutMs: number | undefined,
): Promise<ClientRead> {
  if (event === 'finish' && res.writableFinished) return Promise.resolve('taken');
  if (res.destroyed) return Promise.resolve('closed');
  return new Promise((resolve) => {
    const settle = (outcome: ClientRead) => {
      clearTimeout(timer);
      res.off(event, taken);
      res.off('close', closed);
      resolve(outcome);
    };
    const taken = () => settle('taken');
    const closed = () => settle('closed');
    const timer =
      timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            settle('stalled');
            res.destroy();
          }, timeoutMs);
    res.once(event, taken);
    res.once('close', closed);
  });
}

/** Largest piece of a body written at once by {@link endForClient}. */
const PIECE_BYTES = 64 * 1024;

/**
 * Ends the response with `body` (its headers already set) and resolves once the client took all of it.
 * A large body goes out in pieces, each written once the client took the ones before, so that the
 * timeout measures a client that stopped reading, not a slow one: taking a piece per `timeoutMs` is
 * enough. The usual answer, taken by the socket at once, resolves without a timer.
 */
export async function endForClient(
  res: ClientResponse,
  body: Buffer | undefined,
  timeoutMs: number | undefined,
): Promise<ClientRead> {
  let at = 0;
  if (body) {
    for (; body.length - at > PIECE_BYTES; at += PIECE_BYTES) {
      if (!res.write(body.subarray(at, at + PIECE_BYTES))) {
        const read = await awaitClientRead(res, 'drain', timeoutMs);
        if (read !== 'taken') return read;
      }
    }
  }
  // A response already ended (a relay that ended it with its last write) is only waited on.
  if (!res.writableEnded) res.end(body && at > 0 ? body.subarray(at) : body);
  else if (res.writableFinished) return 'taken';
  if (res.destroyed) return 'closed';
  // Nothing left in the response or its socket: every byte reached the kernel.
  if (res.writableLength === 0) return 'taken';
  return awaitClientRead(res, 'finish', timeoutMs);
}
