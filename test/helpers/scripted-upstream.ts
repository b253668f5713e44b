import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface SeenRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: IncomingMessage['headers'];
  readonly body: string;
  /** The body exactly as received. */
  readonly bytes: Buffer;
}

export type Script = (req: IncomingMessage, res: ServerResponse, body: string) => unknown;

/** A bare upstream on a real socket whose answer each test scripts byte by byte. */
export class ScriptedUpstream {
  readonly requests: SeenRequest[] = [];
  script: Script = (_req, res) => {
    res.writeHead(500).end('no script');
  };

  private constructor(private readonly server: Server) {}

  static async start(): Promise<ScriptedUpstream> {
    const server = createServer();
    const upstream = new ScriptedUpstream(server);
    server.on('request', async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const bytes = Buffer.concat(chunks);
      const body = bytes.toString('utf8');
      upstream.requests.push({ method: req.method!, path: req.url!, headers: req.headers, body, bytes });
      await upstream.script(req, res, body);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return upstream;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/v1`;
  }

  lastBody(): Record<string, unknown> {
    return JSON.parse(this.requests.at(-1)!.body) as Record<string, unknown>;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}
