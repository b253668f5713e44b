import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Agent } from 'undici';

/**
 * The benchmark's baseline: the least a Node proxy can do (node:http in, undici pool out, the body
 * read whole and the answer piped back), no validation, no accounting. The gateway is held to a
 * ratio of this one's throughput, measured side by side in one run.
 */
export async function startBareProxy(
  upstreamBaseUrl: string,
  port = 0,
): Promise<{ url: string; close(): Promise<void> }> {
  const upstream = new URL(upstreamBaseUrl);
  const agent = new Agent({ keepAliveTimeout: 30_000 });
  const basePath = upstream.pathname.replace(/\/+$/, '');
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const path = basePath + (req.url ?? '/').replace(/^\/v1/, '');
    try {
      const response = await agent.request({
        origin: upstream.origin,
        path,
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: req.headers.authorization ?? '' },
        body: Buffer.concat(chunks),
      });
      res.writeHead(response.statusCode, {
        'content-type': String(response.headers['content-type'] ?? 'application/json'),
      });
      for await (const chunk of response.body) res.write(chunk);
      res.end();
    } catch {
      res.writeHead(502).end();
    }
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await agent.close();
    },
  };
}
