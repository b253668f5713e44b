import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import OpenAI from 'openai';
import { ResponsesWS } from 'openai/resources/responses/ws';
import { eventually } from './eventually.ts';

/** A server event as the SDK hands it over (the Responses stream's events, and `error`): what tests read of one. */
export interface ServerEvent {
  readonly type: string;
  readonly sequence_number?: number;
  readonly delta?: string;
  /** Error events: the HTTP status, the error's code, message and field. */
  readonly status?: number;
  readonly code?: string | null;
  readonly message?: string;
  readonly param?: string | null;
  readonly response_id?: string | null;
  readonly response?: { readonly id: string; readonly output: readonly OutputItem[] };
  readonly [field: string]: unknown;
}

interface OutputItem {
  readonly content: readonly { readonly text: string }[];
}

/** The JSON body of a refused handshake: the error envelope, and the routes a 426 names. */
export interface RefusalBody {
  readonly detail: string;
  readonly error?: { readonly message: string; readonly type: string; readonly code: string; readonly param: unknown };
  readonly websocket_routes?: readonly string[];
}

/** The events that end one response on a socket. */
const TERMINAL = new Set([
  'response.completed',
  'response.failed',
  'response.incomplete',
  'response.cancelled',
  'error',
]);

/** The official SDK's WebSocket client (`ResponsesWS`) on a gateway's `/v1/responses`, every event kept in order. */
export class SdkSocket {
  readonly events: ServerEvent[] = [];
  readonly ws: ResponsesWS;
  closed: { code: number; reason: string } | undefined;
  private waiters: (() => void)[] = [];

  constructor(url: string, key: string) {
    this.ws = new ResponsesWS(new OpenAI({ apiKey: key, baseURL: `${url}/v1`, maxRetries: 0 }));
    this.ws.on('event', (event) => this.events.push(event as ServerEvent));
    // Error events come as `event` too; the SDK also raises them here, where a client must listen.
    this.ws.on('error', () => {});
    this.ws.on('close', (code, reason) => {
      this.closed = { code, reason };
      this.waiters.splice(0).forEach((resolve) => resolve());
    });
  }

  send(event: Record<string, unknown>): void {
    this.ws.send(event as never);
  }

  /** Sends `response.create` with `body` and resolves with that response's events, up to its terminal one. */
  async respond(body: Record<string, unknown>): Promise<ServerEvent[]> {
    const from = this.events.length;
    this.send({ type: 'response.create', ...body });
    return this.until(from, (event) => TERMINAL.has(event.type));
  }

  /** The events from index `from` up to the first one `last` accepts. */
  async until(from: number, last: (event: ServerEvent) => boolean, timeoutMs = 10_000): Promise<ServerEvent[]> {
    const seen = () => this.events.slice(from);
    await eventually(() => seen().some(last) || this.closed !== undefined, 'the awaited event', timeoutMs);
    const end = seen().findIndex(last);
    if (end < 0) {
      const got = seen()
        .map((event) => event.type)
        .join(', ');
      throw new Error(`socket closed (${JSON.stringify(this.closed)}) before the awaited event; got ${got}`);
    }
    return this.events.slice(from, from + end + 1);
  }

  async whenClosed(timeoutMs = 10_000): Promise<{ code: number; reason: string }> {
    if (this.closed) return this.closed;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('the socket did not close')), timeoutMs);
      this.waiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
    return this.closed!;
  }

  close(): void {
    if (!this.closed) this.ws.close();
  }
}

/** RFC 6455's sample `Sec-WebSocket-Key`. */
const SAMPLE_KEY = 'dGhlIHNhbXBsZSBub25jZQ==';

export interface HandshakeAnswer {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  /** The JSON body of a refusal; undefined once switched (101). */
  readonly body: RefusalBody;
  /** Time from the request to the whole answer, in ms. */
  readonly ms: number;
}

/** A WebSocket opening handshake as a plain HTTP request: what the gateway answers before or instead of an upgrade. */
export function handshake(url: string, path: string, headers: Record<string, string> = {}): Promise<HandshakeAnswer> {
  const { hostname, port } = new URL(url);
  const started = performance.now();
  const opening = { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13' };
  const key = { 'sec-websocket-key': SAMPLE_KEY };
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: hostname, port, path, headers: { ...opening, ...key, ...headers } });
    req.on('upgrade', (res, socket) => {
      socket.destroy();
      const ms = performance.now() - started;
      resolve({ status: res.statusCode!, headers: res.headers, body: undefined as never, ms });
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        const body = JSON.parse(Buffer.concat(chunks).toString()) as RefusalBody;
        resolve({ status: res.statusCode!, headers: res.headers, body, ms: performance.now() - started });
      });
    });
    req.on('error', reject);
    req.end();
  });
}
