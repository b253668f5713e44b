import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http';

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
