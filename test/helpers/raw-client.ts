import { connect, type Socket } from 'node:net';

/** A raw client socket that keeps what it received and whether the server closed it. */
export class RawClient {
  received = '';
  closed = false;
  private trickling?: NodeJS.Timeout;
  private constructor(readonly socket: Socket) {
    socket.on('data', (chunk: Buffer) => (this.received += chunk.toString()));
    socket.on('close', () => {
      this.closed = true;
      clearInterval(this.trickling);
    });
    socket.on('error', () => {});
  }

  /**
   * With `allowHalfOpen`, the client keeps its side open when the gateway ends its own: only the
   * gateway's close ends it. `localAddress` (127.0.0.2, ...) makes it another client address.
   */
  static async open(url: string, options: { allowHalfOpen?: boolean; localAddress?: string } = {}): Promise<RawClient> {
    const { hostname, port } = new URL(url);
    const socket = connect({
      port: Number(port),
      host: hostname,
      allowHalfOpen: options.allowHalfOpen ?? false,
      localAddress: options.localAddress,
    });
    await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    return new RawClient(socket);
  }

  write(text: string): void {
    this.socket.write(text);
  }

  /** Sends one byte of `text` a second, for as long as the connection lasts. */
  trickle(text: string): void {
    let at = 0;
    this.trickling = setInterval(() => this.write(text[at++ % text.length]!), 1000);
  }

  close(): void {
    this.socket.destroy();
  }
}

/** The head of a `POST` with a JSON body of `contentLength` bytes, and any further header lines. */
export function postHead(path: string, key: string, contentLength: number, ...headers: string[]): string {
  return [
    `POST ${path} HTTP/1.1`,
    'Host: gateway',
    `Authorization: Bearer ${key}`,
    'Content-Type: application/json',
    `Content-Length: ${contentLength}`,
    ...headers,
    '',
    '',
  ].join('\r\n');
}
