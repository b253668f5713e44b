import { expect } from 'chai';
import fc from 'fast-check';
import { request } from 'undici';
import { samplePlugins } from '../../plugins/sample-plugins.ts';
import { eventually } from '../../helpers/eventually.ts';
import { ScriptedUpstream } from '../../helpers/scripted-upstream.ts';
import { startRouteTestApp, type RouteTestApp } from './route-test-app.ts';

const SECRET = 'upstream-secret-key';

// Upstream answers of any shape: any status and type, bodies near the real formats and far from them,
// bytes cut into any chunks, the connection sometimes reset in the middle.
const sseEvent = fc.oneof(
  fc.jsonValue().map((value) => `data: ${JSON.stringify(value)}\n\n`),
  fc.constantFrom(
    'data: [DONE]\n\n',
    'event: message_stop\ndata: {"type":"message_stop"}\n\n',
    `data: {"error":"${SECRET}"}\n\n`,
    ': ping\r\n\r\n',
    'data: {"usage":{"n":4}}\r\r',
  ),
  fc.string({ maxLength: 40 }),
  fc.integer({ min: 300, max: 3000 }).map((size) => `data: "${'q'.repeat(size)}`),
);
const answer = fc.record({
  status: fc.constantFrom(200, 201, 400, 404, 429, 500, 503),
  type: fc.constantFrom('application/json', 'text/event-stream', 'text/html', undefined),
  body: fc.oneof(
    fc.array(sseEvent, { maxLength: 8 }).map((events) => events.join('')),
    fc.jsonValue().map((value) => JSON.stringify(value)),
    fc.constant(`{"error":{"message":"bad key ${SECRET}"}}`),
    fc.uint8Array({ maxLength: 200 }).map((bytes) => Buffer.from(bytes).toString('latin1')),
  ),
  cuts: fc.array(fc.nat(), { maxLength: 5 }),
  reset: fc.boolean(),
});

describe('upstream answer fuzzing', function () {
  this.timeout(120_000);
  let upstream: ScriptedUpstream;
  let app: RouteTestApp;

  before(async () => {
    upstream = await ScriptedUpstream.start();
    app = await startRouteTestApp(
      samplePlugins(),
      { acme: upstream.url, bolt: upstream.url },
      { maxSseEventBytes: 1024 },
    );
  });
  after(async () => {
    await app.close();
    await upstream.close();
  });

  it('answers every client, records every request once, never relays the credential, and keeps serving', async () => {
    let requests = 0;
    await fc.assert(
      fc.asyncProperty(
        answer,
        fc.constantFrom('/v1/chat/completions', '/v1/messages', '/v1/responses', '/v1/chat'),
        fc.boolean(),
        async (scripted, path, stream) => {
          upstream.script = async (_req, res) => {
            res.writeHead(scripted.status, scripted.type ? { 'content-type': scripted.type } : {});
            const bytes = Buffer.from(scripted.body, 'latin1');
            const points = [...new Set(scripted.cuts.map((cut) => cut % (bytes.length + 1)))].sort((a, b) => a - b);
            let start = 0;
            for (const point of points) {
              res.write(bytes.subarray(start, point));
              start = point;
              await new Promise((resolve) => setImmediate(resolve));
            }
            if (scripted.reset) res.write(bytes.subarray(start), () => res.destroy());
            else res.end(bytes.subarray(start));
          };
          const model = path === '/v1/messages' ? 'bolt-1' : path === '/v1/responses' ? 'one' : 'acme/one';
          const body =
            path === '/v1/chat'
              ? { model, input: 'x', max_retries: 0 }
              : { model, stream, max_tokens: 5, messages: [{ role: 'user', content: 'x' }], input: 'x' };
          requests += 1;
          let status = 0;
          let text = '';
          let headers: Record<string, unknown> = {};
          try {
            const response = await request(`${app.url}${path}`, { method: 'POST', body: JSON.stringify(body) });
            status = response.statusCode;
            headers = response.headers;
            text = await response.body.text();
          } catch {
            // A stream the upstream reset after its status line is cut for the client too.
          }
          if (status !== 0) {
            expect(status).to.be.within(200, 599);
            expect(headers['x-content-type-options']).to.equal('nosniff');
            if (status >= 500 && status !== scripted.status) expect(() => JSON.parse(text)).not.to.throw();
          }
          expect(text).not.to.contain(SECRET);
          await eventually(() => app.exchanges.length === requests, `request ${requests} recorded`);
        },
      ),
      { numRuns: 150 },
    );
    const health = await request(`${app.url}/v1/nothing`);
    expect(health.statusCode).to.equal(404);
    await health.body.dump();
  });
});
