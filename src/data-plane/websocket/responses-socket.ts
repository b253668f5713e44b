import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Logger } from 'pino';
import { WebSocket, type RawData } from 'ws';
import { EVENTS, type WebSocketMessage, type WebSocketView } from '../../core/diagnostics.ts';
import { nothingToCancel, responseInFlight, serviceUnavailable, type GatewayError } from '../../core/gateway-errors.ts';
import type { ModelRoute } from '../../core/route-table.ts';
import type { DataPlane } from '../data-plane.ts';
import { Exchange } from '../pipeline/exchange.ts';
import { readClientMessage } from './client-messages.ts';
import { errorEvent, SocketResponse } from './socket-response.ts';

/** What every socket of a gateway shares. */
export interface SocketParts {
  /** Runs each response through its route's pipeline, as for `POST /v1/responses` (counted for a drain). */
  readonly dataPlane: Pick<DataPlane, 'serve'>;
  /** The route as served over the socket. */
  readonly route: ModelRoute;
  /** A socket with no response in flight and no message for this long is closed (1000). */
  readonly idleTimeoutMs: number;
  readonly logger: Logger;
}

/**
 * Bytes the gateway's own messages (errors, acknowledgements) may leave unread in a socket: a client
 * that keeps sending without reading is cut off rather than buffered for.
 */
const MAX_UNREAD_BYTES = 1024 * 1024;

/** Close codes (RFC 6455, 7.4.1). */
export const CLOSE = { normal: 1000, goingAway: 1001, policy: 1008, internal: 1011 } as const;

/** A response asked for on a socket: the responses route's exchange, its body the message's, its method a create's. */
class MessageExchange extends Exchange {
  override readonly method = 'POST';

  constructor(
    source: object,
    route: ModelRoute,
    req: IncomingMessage,
    res: SocketResponse,
    override readonly message: Buffer,
  ) {
    super(source, route, randomUUID(), req, res, route.path);
  }
}

/**
 * One client's Responses WebSocket. Each `response.create` is one request through the responses route's
 * pipeline (authenticated again from the opening request's headers, so a key revoked meanwhile stops at
 * its next response; limits reserved and settled, guardrails, the cache, failover before the first
 * event, traces, one usage record), its events sent back in order. One response runs at a time; a
 * `response.create` sent while one runs waits for it (one at most: a further one is refused), and
 * `response.cancel` ends the running one, its upstream dropped and what it used recorded, then
 * acknowledges with `response.cancelled`.
 */
export class ResponsesSocket {
  /** Whether anything came from the client since the last ping. */
  alive = true;
  private running: SocketResponse | undefined;
  private waiting: Buffer | undefined;
  private draining = false;
  private messages = 0;
  private responses = 0;
  private readonly idle: NodeJS.Timeout;

  constructor(
    readonly ws: WebSocket,
    private readonly req: IncomingMessage,
    readonly view: WebSocketView,
    private readonly parts: SocketParts,
    onClosed: () => void,
  ) {
    // Runs out during a response harmlessly: the response's end sets it again.
    const idleOut = () => this.running === undefined && this.close(CLOSE.normal, 'idle timeout');
    this.idle = setTimeout(idleOut, parts.idleTimeoutMs).unref();
    ws.on('message', (data) => this.received(data));
    ws.on('pong', () => (this.alive = true));
    // A protocol fault (an oversized or malformed frame) closes the socket with its code; the close tells it.
    ws.on('error', () => {});
    ws.once('close', (code) => {
      clearTimeout(this.idle);
      this.waiting = undefined;
      this.running?.gone();
      if (EVENTS.webSocketClose.active) {
        const { view: socket, messages, responses } = this;
        EVENTS.webSocketClose.publish({ source: socket.source, socket, code, messages, responses });
      }
      onClosed();
    });
  }

  /** Closes the socket now if it is idle, else once its response ended (1001); what waits is refused. */
  drain(): void {
    this.draining = true;
    const waiting = this.waiting;
    this.waiting = undefined;
    if (waiting) this.refuse('response.create', performance.now(), shuttingDown());
    if (this.running === undefined) this.close(CLOSE.goingAway, 'server shutting down');
  }

  private received(data: RawData): void {
    this.alive = true;
    this.messages += 1;
    const at = performance.now();
    this.idle.refresh();
    const message = readClientMessage(bytesOf(data));
    if (message.type === 'invalid') return this.refuse('invalid', at, message.error);
    if (message.type === 'response.cancel') return this.cancel(message.responseId, at);
    if (this.draining) return this.refuse('response.create', at, shuttingDown());
    if (this.running === undefined) return this.respond(message.body);
    if (this.waiting === undefined) this.waiting = message.body;
    else this.refuse('response.create', at, responseInFlight());
  }

  /** Runs one response; a fault outside its pipeline (which answers every error itself) ends the socket. */
  private respond(body: Buffer): void {
    this.serve(body).catch((error: unknown) => {
      const where = { err: error, request_id: this.view.requestId };
      this.parts.logger.error(where, 'websocket response failed outside its pipeline');
      this.running = undefined;
      this.ws.terminate();
    });
  }

  private async serve(body: Buffer): Promise<void> {
    this.responses += 1;
    const { route } = this.parts;
    const res: SocketResponse = new SocketResponse(this.req, this.ws, () => this.cut(res));
    this.running = res;
    const exchange = new MessageExchange(this.view.source, route, this.req, res, body);
    if (EVENTS.exchangeStart.active) EVENTS.exchangeStart.publish(exchange);
    await this.parts.dataPlane.serve(exchange);
    // An answer the pipeline left open (it never should) is cut rather than left to hold the socket.
    if (!res.writableEnded && !res.destroyed) res.destroy();
    await closed(res);
    this.running = undefined;
    let sent = res.sent;
    if (res.cancelled && this.sendable()) {
      this.ws.send(JSON.stringify({ type: 'response.cancelled', response_id: res.responseId ?? null }));
      sent += 1;
    }
    this.told({
      type: 'response.create',
      status: res.statusCode,
      errorCode: exchange.errorCode,
      limit: exchange.refusedBy,
      requestId: exchange.requestId,
      recorded: exchange.recorded,
      sent,
      durationMs: performance.now() - exchange.startedAt,
    });
    // The key was not accepted (revoked, expired, deleted since the socket opened): the socket goes too.
    const refusedKey = exchange.caller === undefined && (res.statusCode === 401 || res.statusCode === 403);
    if (refusedKey) return this.close(CLOSE.policy, 'API key not accepted');
    if (this.draining) return this.close(CLOSE.goingAway, 'server shutting down');
    const next = this.waiting;
    this.waiting = undefined;
    if (next) return this.serve(next);
    if (this.ws.readyState === WebSocket.OPEN) this.idle.refresh();
  }

  private cancel(responseId: string | undefined, at: number): void {
    const running = this.running;
    // A response named by another id is not this one; one whose id is not known yet (no event came) is.
    const other = responseId !== undefined && running?.responseId !== undefined && running.responseId !== responseId;
    if (running === undefined || running.destroyed || other) {
      return this.refuse('response.cancel', at, nothingToCancel(responseId));
    }
    running.cancel();
    this.told({ type: 'response.cancel', status: 200, recorded: false, sent: 0, durationMs: performance.now() - at });
  }

  /** A message the socket does not take, or cannot serve now: the client is told why, and the socket stays open. */
  private refuse(type: WebSocketMessage['type'], at: number, error: GatewayError): void {
    if (!this.sendable()) return;
    this.ws.send(errorEvent(error));
    const { status, code: errorCode, limit } = error;
    this.told({ type, status, errorCode, limit, recorded: false, sent: 1, durationMs: performance.now() - at });
  }

  /**
   * The gateway cut a response where it stood: a client that stopped reading (its unread bytes past the
   * client write timeout) loses the connection at once; after a fault mid-answer the socket closes 1011.
   */
  private cut(res: SocketResponse): void {
    if (this.ws.readyState !== WebSocket.OPEN) return;
    if (this.ws.bufferedAmount > 0 || res.writableLength > 0) this.ws.terminate();
    else this.close(CLOSE.internal, 'the response failed');
  }

  /** Whether a message of the gateway's own may go out: the socket is open and its client reads. */
  private sendable(): boolean {
    if (this.ws.readyState !== WebSocket.OPEN) return false;
    if (this.ws.bufferedAmount <= MAX_UNREAD_BYTES) return true;
    this.ws.terminate();
    return false;
  }

  private close(code: number, reason: string): void {
    if (this.ws.readyState === WebSocket.OPEN) this.ws.close(code, reason);
  }

  private told(message: Omit<WebSocketMessage, 'source' | 'socket'>): void {
    if (!EVENTS.webSocketMessage.active) return;
    EVENTS.webSocketMessage.publish({ source: this.view.source, socket: this.view, ...message });
  }
}

function shuttingDown(): GatewayError {
  return serviceUnavailable('The gateway is shutting down; open a new WebSocket (or retry over HTTP)');
}

/** A message's bytes, whatever ws handed them as. */
function bytesOf(data: RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
}

/** Resolves once the response is over: its last message taken by the socket, or the response destroyed. */
function closed(res: SocketResponse): Promise<void> {
  if (res.closed) return Promise.resolve();
  return new Promise((resolve) => res.once('close', () => resolve()));
}
