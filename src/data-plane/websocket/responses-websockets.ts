import { ServerResponse, type IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { WebSocketServer, type WebSocket } from 'ws';
import {
  clientAddress,
  clientAddressResolver,
  stampClientAddress,
  acceptedRequestId,
  REQUEST_ID_HEADER,
} from '../../core/incoming-request.ts';
import { EVENTS, type Observation, type WebSocketView } from '../../core/diagnostics.ts';
import { errorBody, type ErrorFamily } from '../../core/error-body.ts';
import type { CallerKey } from '../../core/exchange.ts';
import {
  badRequest,
  internalError,
  isGatewayError,
  methodNotAllowed,
  rateLimited,
  serviceUnavailable,
  webSocketNotServed,
  type GatewayError,
} from '../../core/gateway-errors.ts';
import {
  errorFamilyOf,
  modelRouteAt,
  pathnameOf,
  ROUTE_TABLE,
  type KeyHeader,
  type ModelRoute,
} from '../../core/route-table.ts';
import type { KeyAuthenticator } from '../pipeline/authenticate.ts';
import type { DataPlane } from '../data-plane.ts';
import { replayWithoutUpgrade } from '../http/upgrade-replay.ts';
import { ResponsesSocket, type SocketParts } from './responses-socket.ts';

export interface ResponsesWebSocketOptions {
  /** The gateway whose events the sockets' are. */
  readonly source: object;
  /** The model routes (each response runs through the responses route's pipeline here). */
  readonly dataPlane: DataPlane;
  /** The caller, or the 401/403/429/503 that refuses the upgrade; none: open (tests only). */
  readonly authenticate?: Pick<KeyAuthenticator, 'check'>;
  /** Where a request comes from, for every per-address rule; default: the socket's peer. */
  readonly addressOf?: (req: IncomingMessage) => string;
  /** Largest message taken (a larger one closes the socket with 1009): the body limit. */
  readonly bodyLimitBytes: number;
  /** A socket with no response in flight and no message for this long is closed. */
  readonly idleTimeoutMs: number;
  /** Sockets one API key may hold open at once on this instance; none: no cap (the connection caps bound them). */
  readonly perKey?: number;
  /** How often every socket is pinged; one that has not answered since the last ping is closed. */
  readonly pingIntervalMs?: number;
  readonly logger: Logger;
}

/**
 * The HTTP server's `upgrade` listener, given also the HTTP layer's own connection listener: an upgrade
 * to anything but WebSocket is served there as plain HTTP.
 */
export type UpgradeListener = (
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  serveAsHttp: (socket: Socket) => void,
) => void;

/** The Responses WebSockets of one listener: its `upgrade` listener, and their drain at shutdown. */
export interface ResponsesWebSockets {
  readonly upgrade: UpgradeListener;
  /** Sockets open now. */
  open(): number;
  /** Refuses new sockets; closes each open one with 1001 at once if idle, else once its response ended. */
  drain(): void;
  /** Ends every socket now (a drain whose time ran out): their responses end as if the client had left. */
  terminate(): void;
}

/** The routes that take a WebSocket (the 426 of any other route names them). */
const SOCKET_ROUTES = [ROUTE_TABLE.responses.path];
/** Keys over a socket come as on the other model routes: a bearer token or `x-api-key` (Authorization wins). */
const KEY_HEADERS: readonly KeyHeader[] = ['authorization', 'x-api-key'];
/** The responses route as a socket's responses run through it: its pipeline, the socket's key headers. */
const SOCKET_ROUTE: ModelRoute = { ...ROUTE_TABLE.responses, keyHeaders: KEY_HEADERS };
const KEY_PATTERN = /^[+/0-9A-Za-z]{22}==$/;
const PING_INTERVAL_MS = 30_000;
const SHUTTING_DOWN = 'The gateway is shutting down; retry on another instance';

/**
 * `GET /v1/responses` with `Upgrade: websocket` on the data-plane listener (the `ws` library does the
 * protocol). The upgrade is checked like a model request before anything is switched (the handshake's
 * headers, the key as a bearer token or `x-api-key` with the failed-key throttle of its address, the
 * per-key socket cap when configured); a refusal is a plain HTTP answer with the JSON error body,
 * `Connection: close`. A WebSocket upgrade on any other route is answered 426 at once, naming the routes
 * that take one. An upgrade to anything else (`h2c`) is served as the plain HTTP request it also is.
 * The connection caps count a socket as the connection it is. Every socket is pinged; one that stops
 * answering is closed, as is one idle for `idleTimeoutMs`.
 */
export function serveResponsesWebSockets(options: ResponsesWebSocketOptions): ResponsesWebSockets {
  const { source, dataPlane, authenticate, perKey, logger } = options;
  const addressOf = options.addressOf ?? clientAddressResolver([]);
  const parts = { dataPlane, route: SOCKET_ROUTE, idleTimeoutMs: options.idleTimeoutMs, logger };
  const onSocketRoute: Answer = { source, family: SOCKET_ROUTE.family, label: SOCKET_ROUTE.metricsLabel };
  const server = webSocketServer(options.bodyLimitBytes, onSocketRoute);
  const sockets = new OpenSockets(source, parts, options.pingIntervalMs ?? PING_INTERVAL_MS);

  const accept = async (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const refused = refusedBeforeKey(req, sockets.draining);
    if (refused) return refuse(req, socket, refused, onSocketRoute);
    let caller: CallerKey | undefined;
    try {
      const checked = authenticate?.check(req.headers, KEY_HEADERS, () => clientAddress(req));
      caller = checked instanceof Promise ? await checked : checked;
    } catch (error) {
      return refuse(req, socket, isGatewayError(error) ? error : internalError(error), onSocketRoute);
    }
    if (caller && perKey !== undefined && sockets.heldBy(caller.id) >= perKey) {
      return refuse(req, socket, tooManySockets(perKey), onSocketRoute);
    }
    // The client may have left while its key was looked up.
    if (socket.destroyed) return;
    server.handleUpgrade(req, socket, head, (ws) => sockets.open(ws, req, caller));
  };

  const upgrade: UpgradeListener = (req, socket, head, serveAsHttp) => {
    // The HTTP layer let go of the socket: its faults (a reset) are this listener's now.
    socket.on('error', () => socket.destroy());
    if (!upgradesToWebSocket(req)) return replayWithoutUpgrade(req, socket as Socket, head, serveAsHttp);
    // As the way in does for every request: its id and its client's address.
    req.headers[REQUEST_ID_HEADER] = acceptedRequestId(req.headers[REQUEST_ID_HEADER]);
    stampClientAddress(req, addressOf);
    const pathname = pathnameOf(req.url ?? '') ?? '';
    const route = modelRouteAt(pathname);
    if (route?.id !== SOCKET_ROUTE.id || !dataPlane.serves(route))
      return refuseElsewhere(req, socket, pathname, route, source);
    accept(req, socket, head).catch((error: unknown) => {
      logger.error({ err: error }, 'websocket upgrade failed');
      socket.destroy();
    });
  };

  return {
    upgrade,
    open: () => sockets.size,
    drain: () => sockets.drain(),
    terminate: () => sockets.terminate(),
  };
}

/** The `ws` server upgrades are handed to: its 101 carries the request id, a handshake it cannot read is refused. */
function webSocketServer(maxPayload: number, onSocketRoute: Answer): WebSocketServer {
  const server = new WebSocketServer({ noServer: true, maxPayload, perMessageDeflate: false, clientTracking: false });
  // The 101 carries the request id, as every answer does.
  server.on('headers', (headers, req) => headers.push(`X-Request-Id: ${req.headers[REQUEST_ID_HEADER] as string}`));
  // A handshake header ws cannot read (subprotocols): answered in JSON here instead of ws's text.
  server.on('wsClientError', (error, socket, req) => {
    refuse(req, socket, badRequest(`Invalid WebSocket handshake: ${error.message}`), onSocketRoute);
  });
  return server;
}

/**
 * The sockets open on one listener: counted per API key, all pinged while any is open (one that has not
 * answered the last ping is ended), drained at shutdown.
 */
class OpenSockets {
  private readonly sockets = new Set<ResponsesSocket>();
  private readonly byKey = new Map<string, number>();
  private heartbeat: NodeJS.Timeout | undefined;
  /** New sockets are refused: the gateway is shutting down. */
  draining = false;

  constructor(
    private readonly source: object,
    private readonly parts: SocketParts,
    private readonly pingIntervalMs: number,
  ) {}

  get size(): number {
    return this.sockets.size;
  }

  /** Sockets the API key holds open now. */
  heldBy(keyId: string): number {
    return this.byKey.get(keyId) ?? 0;
  }

  /** Serves the responses of an accepted upgrade's socket, counted against its caller's key. */
  open(ws: WebSocket, req: IncomingMessage, caller: CallerKey | undefined): void {
    const keyId = caller?.id;
    if (keyId !== undefined) this.byKey.set(keyId, this.heldBy(keyId) + 1);
    const requestId = req.headers[REQUEST_ID_HEADER] as string;
    const view: WebSocketView = {
      source: this.source,
      requestId,
      route: SOCKET_ROUTE.id,
      keyId,
      openedAt: performance.now(),
    };
    const socket = new ResponsesSocket(ws, req, view, this.parts, () => this.closed(socket, keyId));
    this.sockets.add(socket);
    this.heartbeat ??= setInterval(pingAll, this.pingIntervalMs, this.sockets).unref();
    if (EVENTS.webSocketOpen.active) EVENTS.webSocketOpen.publish(view);
  }

  /** Closes each socket at once if idle, else once its response ended; new ones are refused from now on. */
  drain(): void {
    this.draining = true;
    for (const socket of this.sockets) socket.drain();
  }

  terminate(): void {
    for (const socket of this.sockets) socket.ws.terminate();
  }

  private closed(socket: ResponsesSocket, keyId: string | undefined): void {
    this.sockets.delete(socket);
    if (keyId !== undefined) {
      const left = this.byKey.get(keyId)! - 1;
      if (left > 0) this.byKey.set(keyId, left);
      else this.byKey.delete(keyId);
    }
    if (this.sockets.size === 0) {
      clearInterval(this.heartbeat);
      this.heartbeat = undefined;
    }
  }
}

/** A socket that has not answered the last ping (nor sent anything since) is gone: its connection ends. */
function pingAll(sockets: ReadonlySet<ResponsesSocket>): void {
  for (const socket of sockets) {
    if (!socket.alive) {
      socket.ws.terminate();
      continue;
    }
    socket.alive = false;
    socket.ws.ping();
  }
}

/** What refuses an upgrade before its key is read: its method, its handshake, or the gateway shutting down. */
function refusedBeforeKey(req: IncomingMessage, draining: boolean): GatewayError | undefined {
  if (req.method !== 'GET') return methodNotAllowed(req.method ?? '', SOCKET_ROUTE.path, ['GET']);
  return handshakeProblem(req) ?? (draining ? serviceUnavailable(SHUTTING_DOWN) : undefined);
}

/** The 429 of an API key that holds as many sockets open as it may. */
function tooManySockets(perKey: number): GatewayError {
  const detail = `This API key has ${perKey} WebSockets open, the most it may; close one or retry shortly`;
  return rateLimited(detail, { 'Retry-After': '1' }, { kind: 'websockets', scope: 'key' });
}

/** A WebSocket upgrade on a route that takes none (or not here): 426, naming the routes that do. */
function refuseElsewhere(
  req: IncomingMessage,
  socket: Duplex,
  pathname: string,
  route: ModelRoute | undefined,
  source: object,
): void {
  const label = route?.metricsLabel ?? 'unmatched';
  const answer: Answer = { source, family: errorFamilyOf(pathname), label, extra: { websocket_routes: SOCKET_ROUTES } };
  refuse(req, socket, webSocketNotServed(pathname, SOCKET_ROUTES), answer);
}

/** How a refused upgrade is answered and told: its gateway, its route's error envelope and label, more fields. */
interface Answer {
  readonly source: object;
  readonly family: ErrorFamily;
  readonly label: string;
  readonly extra?: Record<string, unknown>;
}

/**
 * Answers an upgrade refused with a plain HTTP response on its socket, the JSON error body in the
 * route's envelope, `Connection: close`, told as any request is (the access log and metrics).
 */
function refuse(req: IncomingMessage, socket: Duplex, error: GatewayError, answer: Answer): void {
  if (socket.destroyed) return;
  const res = new ServerResponse(req);
  res.shouldKeepAlive = false;
  res.assignSocket(socket as Socket);
  res.once('finish', () => {
    res.detachSocket(socket as Socket);
    socket.end();
  });
  const { label, family, extra } = answer;
  const observation: Observation = { label, recorded: false, errorCode: error.code, refusedBy: error.limit };
  if (EVENTS.request.active) EVENTS.request.publish({ source: answer.source, req, res, observation });
  const payload = JSON.stringify({ ...errorBody(error, family), ...extra });
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader(REQUEST_ID_HEADER, req.headers[REQUEST_ID_HEADER] as string);
  for (const [name, value] of Object.entries(error.headers ?? {})) res.setHeader(name, value);
  res.setHeader('content-type', 'application/json; charset=utf-8');
  res.setHeader('content-length', Buffer.byteLength(payload));
  res.statusCode = error.status;
  res.end(payload);
}

/** Whether the request asks to switch to WebSocket (the `Upgrade` header lists it). */
function upgradesToWebSocket(req: IncomingMessage): boolean {
  const upgrade = req.headers.upgrade;
  return upgrade !== undefined && upgrade.split(',').some((token) => token.trim().toLowerCase() === 'websocket');
}

/** What makes the opening handshake one no WebSocket can come of (RFC 6455, 4.2.1), answered before anything else. */
function handshakeProblem(req: IncomingMessage): GatewayError | undefined {
  const key = req.headers['sec-websocket-key'];
  if (key === undefined || !KEY_PATTERN.test(key)) {
    return badRequest('Invalid WebSocket handshake: a Sec-WebSocket-Key header of 16 bytes in base64 is required');
  }
  const version = req.headers['sec-websocket-version'];
  if (version !== '13' && version !== '8') {
    return badRequest('Invalid WebSocket handshake: Sec-WebSocket-Version must be 13');
  }
  return undefined;
}
