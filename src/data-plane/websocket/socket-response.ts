import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http';
import { Writable } from 'node:stream';
import type { WebSocket } from 'ws';
import { errorBody } from '../../core/error-body.ts';
import type { GatewayError } from '../../core/gateway-errors.ts';
import type { ClientResponse } from '../http/client-connection.ts';
import { SseSplitter, type SseBlock } from '../sse/sse-relay.ts';

/** Why a response's answer stopped before its end, when the gateway did not end it itself. */
type Stop = 'cancelled' | 'gone';

/**
 * One response asked for on a WebSocket, as its stages see it: the answer they write as to an HTTP
 * response goes out as the socket's messages. A stream's events go out one message each, the `data`
 * of each event (the Responses event object) in order, so a stream relayed byte for byte over HTTP is
 * the same events here; a whole answer (an error, the gateway's or the upstream's) goes out as one
 * `error` event with its status; a whole success (an upstream that did not stream) as
 * `response.completed`. Back-pressure is the socket's: a write is taken once the socket took the
 * messages it made, so a client that stops reading stops the relay and, past the client write timeout,
 * loses its socket (the relay destroys its answer, see {@link onCut}).
 */
export class SocketResponse extends Writable implements ClientResponse {
  statusCode = 200;
  headersSent = false;
  /** Messages sent to the client for this response. */
  sent = 0;
  /** The response's id, from its `response.created` event (for `response.cancel`). */
  responseId: string | undefined;
  private readonly headers = new Map<string, number | string | readonly string[]>();
  /** Set by the head of a stream: its events are split out of what is written. */
  private splitter: SseSplitter | undefined;
  /** A whole answer's bytes, sent as one message when it ends. */
  private whole: Buffer[] | undefined;
  private stop: Stop | undefined;

  constructor(
    readonly req: IncomingMessage,
    private readonly socket: WebSocket,
    /**
     * The gateway ended the answer where it stood (the client stopped reading, or a fault cut it): the
     * socket goes with it.
     */
    private readonly onCut: () => void,
  ) {
    super({ decodeStrings: true });
    // A write on a socket that closed meanwhile fails; the socket's own close tells the response.
    this.on('error', ignore);
  }

  /** The client asked for the response to stop: what follows is not wanted (the upstream is dropped). */
  cancel(): void {
    this.stop ??= 'cancelled';
    this.destroy();
  }

  /** The socket closed: the client is gone. */
  gone(): void {
    this.stop ??= 'gone';
    this.destroy();
  }

  get cancelled(): boolean {
    return this.stop === 'cancelled';
  }

  setHeader(name: string, value: number | string | readonly string[]): this {
    this.headers.set(name.toLowerCase(), value);
    return this;
  }

  getHeader(name: string): number | string | string[] | undefined {
    return this.headers.get(name.toLowerCase()) as number | string | string[] | undefined;
  }

  hasHeader(name: string): boolean {
    return this.headers.has(name.toLowerCase());
  }

  writeHead(statusCode: number, headers?: OutgoingHttpHeaders): this {
    this.statusCode = statusCode;
    for (const [name, value] of Object.entries(headers ?? {})) if (value !== undefined) this.setHeader(name, value);
    this.headersSent = true;
    const type = this.getHeader('content-type');
    const stream = statusCode < 300 && typeof type === 'string' && type.startsWith('text/event-stream');
    if (stream) this.splitter = new SseSplitter();
    else this.whole = [];
    return this;
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, done: (error?: Error | null) => void): void {
    if (!this.headersSent) this.writeHead(this.statusCode);
    if (this.whole) {
      this.whole.push(chunk);
      done();
      return;
    }
    this.sendEvents(this.splitter!.push(chunk), done);
  }

  override _final(done: (error?: Error | null) => void): void {
    if (!this.headersSent) this.writeHead(this.statusCode);
    // A stream's unfinished last event is dropped: a client cannot use part of one.
    if (this.whole) this.send(wholeAnswer(this.statusCode, Buffer.concat(this.whole)), done);
    else done();
  }

  override _destroy(error: Error | null, done: (error?: Error | null) => void): void {
    if (this.stop === undefined && !this.writableFinished) this.onCut();
    // `close` comes once what runs now has settled, as an HTTP response's comes once its socket closed:
    // a relay that destroyed its answer for a client that stopped reading concludes so before it.
    setImmediate(() => done(error));
  }

  private sendEvents(blocks: readonly SseBlock[], done: () => void): void {
    let last: string | undefined;
    for (const block of blocks) {
      const data = block.event?.data;
      if (data === undefined || data === '[DONE]') continue;
      if (this.responseId === undefined && isCreated(block.event!.event, data)) this.responseId = createdId(data);
      if (last !== undefined) this.send(last);
      last = data;
    }
    if (last === undefined) done();
    else this.send(last, done);
  }

  /** Sends one message; `done` once the socket took it (or failed to: then the socket's close ends the response). */
  private send(message: string, done?: () => void): void {
    this.sent += 1;
    this.socket.send(message, done && (() => done()));
  }
}

/** The event a gateway error is told with: a Responses stream's `error` event, plus its status. */
export function errorEvent(error: GatewayError): string {
  return errorMessage(error.status, errorBody(error, 'completions-envelope'));
}

/** A whole answer as one message: an error with its status, or a success as `response.completed`. */
function wholeAnswer(status: number, bytes: Buffer): string {
  const text = bytes.toString('utf8');
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  if (status < 300 && isObject(body)) return `{"type":"response.completed","response":${text}}`;
  if (isObject(body)) return errorMessage(status, body);
  const message = text === '' ? `answered ${status}` : text.slice(0, 2000);
  return errorMessage(status, { error: { message, type: null, param: null, code: null } });
}

/**
 * `code`, `message` and `param` at the top as in a stream's `error` event (what the official SDK reads),
 * the error envelope beside them, and the HTTP status the same answer would have had.
 */
function errorMessage(status: number, body: Record<string, unknown>): string {
  const error = isObject(body.error) ? body.error : {};
  const detail = typeof body.detail === 'string' ? body.detail : `answered ${status}`;
  const message = typeof error.message === 'string' ? error.message : detail;
  const param = error.param ?? null;
  return JSON.stringify({ type: 'error', status, code: error.code ?? null, message, param, ...body });
}

/** The stream's `response.created` event, named on its `event:` line or, without one, by its `type` first. */
const isCreated = (name: string | undefined, data: string) =>
  name === undefined ? data.startsWith('{"type":"response.created"') : name === 'response.created';

function createdId(data: string): string | undefined {
  try {
    const id = (JSON.parse(data) as { response?: { id?: unknown } }).response?.id;
    return typeof id === 'string' ? id : undefined;
  } catch {
    return undefined;
  }
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const ignore = (): void => {};
