import { expect } from 'chai';
import fc from 'fast-check';
import { request } from 'undici';
import { samplePlugins } from '../../plugins/sample-plugins.ts';
import { ScriptedUpstream } from '../../helpers/scripted-upstream.ts';
import { startRouteTestApp, type RouteTestApp } from './route-test-app.ts';

const PATHS = ['/v1/chat/completions', '/v1/responses', '/v1/messages', '/v1/messages/count_tokens', '/v1/chat'];

// Bodies near the valid shapes (right field names, any values) and far from them (any JSON, any bytes).
const nearValid = fc.record(
  {
    model: fc.oneof(
      fc.constantFrom('acme-latest', 'acme/one', 'one', 'bolt-1', 'bolt-latest', 'acme/hidden'),
      fc.jsonValue(),
    ),
    messages: fc.oneof(fc.constant([{ role: 'user', content: 'hi' }]), fc.jsonValue()),
    input: fc.oneof(fc.string(), fc.jsonValue()),
    max_tokens: fc.oneof(fc.integer(), fc.jsonValue()),
    stream: fc.oneof(fc.boolean(), fc.jsonValue()),
    temperature: fc.jsonValue(),
    tools: fc.jsonValue(),
  },
  { requiredKeys: [] },
);
// Deep nesting, balanced or not, inside and outside the checked fields.
const deep = fc
  .tuple(
    fc.nat({ max: 3000 }),
    fc.constantFrom('[', '{"a":'),
    fc.boolean(),
    fc.constantFrom('x', 'messages', 'tools', 'input'),
  )
  .map(([levels, open, balanced, field]) => {
    const close = open === '[' ? ']' : '}';
    return `{"model":"acme/one","max_tokens":5,"input":"hi","messages":[{"role":"user","content":"hi"}],"${field}":${open.repeat(levels)}1${balanced ? close.repeat(levels) : ''}}`;
  });
const body = fc.oneof(
  deep,
  nearValid.map((value) => JSON.stringify(value)),
  fc.jsonValue().map((value) => JSON.stringify(value)),
  fc.string(),
  fc.uint8Array({ maxLength: 64 }).map((bytes) => Buffer.from(bytes)),
);

describe('client input fuzzing', function () {
  this.timeout(120_000);
  let upstream: ScriptedUpstream;
  let app: RouteTestApp;

  before(async () => {
    upstream = await ScriptedUpstream.start();
    upstream.script = (_req, res) =>
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"text":"ok","usage":{"n":1}}');
    app = await startRouteTestApp(
      samplePlugins(),
      { acme: upstream.url, bolt: upstream.url },
      { bodyLimitBytes: 4096 },
    );
  });
  after(async () => {
    await app.close();
    await upstream.close();
  });

  it('answers any body on any route with JSON: a 2xx, or a 4xx with a detail, never a 5xx', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...PATHS), body, async (path, payload) => {
        const response = await request(`${app.url}${path}`, { method: 'POST', body: payload });
        const text = await response.body.text();
        expect(response.headers['content-type'], text).to.match(/^application\/json/);
        expect(response.statusCode, `${path} ${String(payload)} → ${text}`).to.be.below(500);
        if (response.statusCode >= 400) {
          const parsed = JSON.parse(text) as { detail?: unknown };
          expect(parsed.detail).to.be.a('string');
          expect(text).not.to.match(/\bat .+\.ts:\d+/);
        }
      }),
      { numRuns: 400 },
    );
  });
});
