import { expect } from 'chai';
import { request } from 'undici';
import {
  backoffMs,
  DEFAULT_RETRY_POLICY,
  retryAfterMs,
  type RetryPolicy,
} from '../../../src/data-plane/upstream/failover/retry-policy.ts';
import { MAX_RETRIES_CAP } from '../../../src/data-plane/routes/request-schemas.ts';
import { samplePlugins } from '../../plugins/sample-plugins.ts';
import { ScriptedUpstream } from '../../helpers/scripted-upstream.ts';
import { startRouteTestApp, type RouteTestApp } from './route-test-app.ts';

async function chat(app: RouteTestApp, body: unknown) {
  const response = await request(`${app.url}/v1/chat`, { method: 'POST', body: JSON.stringify(body) });
  return { status: response.statusCode, body: (await response.body.json()) as Record<string, any> };
}

const answer = (text: string, n: number) => JSON.stringify({ text, usage: { n } });

describe('POST /v1/chat', () => {
  let upstream: ScriptedUpstream;
  let app: RouteTestApp;
  let sleeps: number[];
  const policy = (): RetryPolicy => ({
    ...DEFAULT_RETRY_POLICY,
    random: () => 0.5,
    sleep: async (ms) => void sleeps.push(ms),
  });

  beforeEach(async () => {
    sleeps = [];
    upstream = await ScriptedUpstream.start();
    app = await startRouteTestApp(samplePlugins(), { acme: upstream.url }, { retryPolicy: policy() });
  });
  afterEach(async () => {
    await app.close();
    await upstream.close();
  });

  it("sends the adapter's request and maps the answer, with the resolved concrete model", async () => {
    upstream.script = (_req, res) =>
      res.writeHead(200, { 'content-type': 'application/json' }).end(answer('Hello there', 12));
    const response = await chat(app, {
      model: 'acme-latest',
      input: 'Say hello',
      temperature: 0.3,
      max_output_tokens: 50,
      web_search: true,
    });
    expect(response.status).to.equal(200);
    expect(response.body.id).to.match(/^chat-/);
    expect(response.body).to.deep.include({
      model: 'acme/one',
      result: { text: 'Hello there' },
      usage: { input_tokens: 12, output_tokens: 12, total_tokens: 24, cached_tokens: 0, charged_tokens: 24 },
    });
    expect(upstream.requests[0]!.path).to.equal('/v1/chat/completions');
    expect(upstream.lastBody()).to.deep.equal({
      model: 'one',
      messages: [{ role: 'user', content: 'Say hello' }],
      effort: 'low',
      temperature: 0.3,
      max_tokens: 50,
      tools: [{ type: 'search' }],
    });
    expect(app.exchanges).to.have.length(1);
    expect(app.exchanges[0]).to.include({ route: 'chat', status: 200, stream: false });
  });

  it('lists every bad field at once', async () => {
    const response = await chat(app, {
      input: '',
      temperature: -1,
      max_output_tokens: 1.5,
      max_retries: -1,
      timeout: 0,
      web_search: 'yes',
      stream: true,
      top_p: 1,
    });
    expect(response.status).to.equal(400);
    expect(response.body.detail).to.equal('Invalid input parameters');
    expect(response.body.errors).to.have.members([
      "Field 'model': is required",
      "Field 'input': must not be empty",
      "Field 'temperature': must be >= 0",
      "Field 'max_output_tokens': must be a positive integer",
      "Field 'max_retries': must be an integer >= 0",
      "Field 'timeout': must be a number of seconds > 0",
      "Field 'web_search': must be true or false",
      "Field 'stream': is not accepted: /v1/chat never streams; use /v1/chat/completions, /v1/responses, /v1/messages for SSE",
      "Field 'top_p': is not a field of this route",
    ]);
    expect(upstream.requests).to.have.length(0);
  });

  it('refuses wrong types and models outside its set', async () => {
    const wrongTypes = await chat(app, { model: 'acme/one', input: 5, temperature: 'hot' });
    expect(wrongTypes.body.errors).to.have.members([
      "Field 'input': must be a string",
      "Field 'temperature': must be a number",
    ]);
    const hidden = await chat(app, { model: 'acme/hidden', input: 'x' });
    expect(hidden.body.errors).to.deep.equal([
      "Field 'model': 'acme/hidden' is not available on /v1/chat; it is served on /v1/chat/completions",
    ]);
  });

  it('names the alias and the concrete ID when given a web chat preset', async () => {
    for (const preset of ['acme/one-thinking', 'acme-latest-fast']) {
      const response = await chat(app, { model: preset, input: 'x' });
      expect(response.status).to.equal(400);
      expect(response.body.errors[0]).to.equal(
        `Field 'model': '${preset}' is a web chat preset, not a model ID; use 'acme-latest' or a concrete ID such as 'acme/one' (this route always uses the low reasoning preset)`,
      );
    }
  });

  it('refuses web_search for a model without the tool, naming the field', async () => {
    const response = await chat(app, { model: 'acme/two', input: 'x', web_search: true });
    expect(response.body.errors).to.deep.equal([
      "Field 'web_search': the model 'acme/two' has no web search tool; drop the field or pick a model that has one",
    ]);
  });

  it('retries 5xx and 429 with exponential backoff, honouring Retry-After, and records one exchange', async () => {
    let call = 0;
    upstream.script = (_req, res) => {
      call += 1;
      if (call === 1)
        return res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":{"message":"busy"}}');
      if (call === 2) return res.writeHead(429, { 'retry-after': '2' }).end();
      if (call === 3) return res.writeHead(500).end();
      return res.writeHead(200, { 'content-type': 'application/json' }).end(answer('ok', 3));
    };
    const response = await chat(app, { model: 'acme/one', input: 'x', max_retries: 3 });
    expect(response.status).to.equal(200);
    expect(upstream.requests).to.have.length(4);
    expect(sleeps).to.deep.equal([375, 2000, 1500]);
    expect(app.exchanges.map((exchange) => exchange.status)).to.deep.equal([200]);
  });

  it('gives up after max_retries with a 502 naming the provider', async () => {
    upstream.script = (_req, res) =>
      res.writeHead(502, { 'content-type': 'application/json' }).end('{"error":{"message":"bad gateway"}}');
    const response = await chat(app, { model: 'acme/one', input: 'x' });
    expect(response.status).to.equal(502);
    expect(response.body.detail).to.equal("Upstream provider 'acme' failed: upstream answered 502: bad gateway");
    expect(upstream.requests).to.have.length(3);
    expect(app.exchanges.map((exchange) => exchange.status)).to.deep.equal([502]);
  });

  it('does not retry a request the upstream refused as bad, nor its credentials', async () => {
    upstream.script = (_req, res) =>
      res
        .writeHead(400, { 'content-type': 'application/json' })
        .end('{"error":{"message":"context too long for upstream-secret-key"}}');
    const bad = await chat(app, { model: 'acme/one', input: 'x' });
    expect(bad.status).to.equal(502);
    expect(bad.body.detail).to.contain('upstream answered 400: context too long for [REDACTED]');
    upstream.script = (_req, res) => res.writeHead(401).end('{"error":{"message":"wrong key upstream-secret-key"}}');
    const refused = await chat(app, { model: 'acme/one', input: 'x' });
    expect(refused.status).to.equal(502);
    expect(JSON.stringify(refused.body)).not.to.contain('upstream-secret-key');
    expect(upstream.requests).to.have.length(2);
  });

  it('bounds each attempt by timeout and answers 504 when every attempt timed out', async () => {
    upstream.script = () => {};
    const response = await chat(app, { model: 'acme/one', input: 'x', timeout: 0.2, max_retries: 1 });
    expect(response.status).to.equal(504);
    expect(response.body.detail).to.equal("Upstream provider 'acme' did not answer in time");
    expect(upstream.requests).to.have.length(2);
  });

  it('refuses max_retries above the documented cap with a 400, before any upstream call', async () => {
    const response = await chat(app, { model: 'acme/one', input: 'x', max_retries: 1_000_000 });
    expect(response.status).to.equal(400);
    expect(response.body.errors).to.deep.equal([`Field 'max_retries': must be at most ${MAX_RETRIES_CAP}`]);
    expect(upstream.requests).to.have.length(0);
    upstream.script = (_req, res) => res.writeHead(503).end();
    // A breaker that would trip first is kept out of the way: this counts the retries alone.
    await app.close();
    app = await startRouteTestApp(
      samplePlugins(),
      { acme: upstream.url },
      { retryPolicy: policy(), breaker: { failureThreshold: MAX_RETRIES_CAP + 1 } },
    );
    expect((await chat(app, { model: 'acme/one', input: 'x', max_retries: MAX_RETRIES_CAP })).status).to.equal(502);
    expect(upstream.requests).to.have.length(MAX_RETRIES_CAP + 1);
  });

  it("stops retrying once the endpoint's breaker opens, and answers 503 while it rests", async () => {
    await app.close();
    app = await startRouteTestApp(
      samplePlugins(),
      { acme: upstream.url },
      { retryPolicy: policy(), breaker: { failureThreshold: 2 } },
    );
    upstream.script = (_req, res) => res.writeHead(502, { 'content-type': 'application/json' }).end('{}');
    expect((await chat(app, { model: 'acme/one', input: 'x', max_retries: 5 })).status).to.equal(502);
    expect(upstream.requests).to.have.length(2);
    const resting = await chat(app, { model: 'acme/one', input: 'x' });
    expect(resting.status).to.equal(503);
    expect(resting.body.detail).to.match(/every endpoint is resting/);
    expect(upstream.requests).to.have.length(2);
    expect(app.exchanges.map((exchange) => exchange.status)).to.deep.equal([502, 503]);
  });

  it('sends a retry to the next endpoint at once, and one exchange is recorded', async () => {
    const other = await ScriptedUpstream.start();
    try {
      await app.close();
      app = await startRouteTestApp(samplePlugins(), { acme: [upstream.url, other.url] }, { retryPolicy: policy() });
      upstream.script = (_req, res) => res.writeHead(503, { 'retry-after': '30' }).end();
      other.script = (_req, res) =>
        res.writeHead(200, { 'content-type': 'application/json' }).end(answer('from the other', 2));
      const response = await chat(app, { model: 'acme/one', input: 'x' });
      expect(response.status).to.equal(200);
      expect(response.body.result).to.deep.equal({ text: 'from the other' });
      expect(sleeps).to.deep.equal([]);
      expect([upstream.requests.length, other.requests.length]).to.deep.equal([1, 1]);
      // The first endpoint rests for its Retry-After: the next request goes straight to the other.
      expect((await chat(app, { model: 'acme/one', input: 'x' })).status).to.equal(200);
      expect([upstream.requests.length, other.requests.length]).to.deep.equal([1, 2]);
      expect(app.exchanges.map((exchange) => [exchange.status, exchange.endpoint, exchange.attempts])).to.deep.equal([
        [200, 'ep1', 2],
        [200, 'ep1', 1],
      ]);
    } finally {
      await other.close();
    }
  });

  it('waits at least the minimum backoff between attempts, even when the upstream says Retry-After: 0', async () => {
    upstream.script = (_req, res) => res.writeHead(429, { 'retry-after': '0', 'retry-after-ms': '0' }).end();
    const response = await chat(app, { model: 'acme/one', input: 'x', max_retries: 3 });
    expect(response.status).to.equal(502);
    expect(sleeps).to.deep.equal([
      DEFAULT_RETRY_POLICY.minDelayMs,
      DEFAULT_RETRY_POLICY.minDelayMs,
      DEFAULT_RETRY_POLICY.minDelayMs,
    ]);
    expect(DEFAULT_RETRY_POLICY.minDelayMs).to.be.greaterThan(0);
  });

  it("bounds each attempt by the gateway's upstream timeout when the caller sends none, or a longer one", async () => {
    await app.close();
    app = await startRouteTestApp(samplePlugins(), { acme: upstream.url }, { retryPolicy: policy(), timeoutMs: 200 });
    upstream.script = () => {};
    const response = await chat(app, { model: 'acme/one', input: 'x', max_retries: 0 });
    expect(response.status).to.equal(504);
    const longer = await chat(app, { model: 'acme/one', input: 'x', max_retries: 0, timeout: 600 });
    expect(longer.status).to.equal(504);
    expect(upstream.requests).to.have.length(2);
  });

  it('ends a request at its total deadline, however many retries are left', async () => {
    await app.close();
    app = await startRouteTestApp(
      samplePlugins(),
      { acme: upstream.url },
      { retryPolicy: { ...policy(), deadlineMs: 300 } },
    );
    upstream.script = () => {};
    const response = await chat(app, { model: 'acme/one', input: 'x', max_retries: 10, timeout: 60 });
    expect(response.status).to.equal(504);
    expect(upstream.requests).to.have.length(1);
    expect(app.exchanges.map((exchange) => exchange.status)).to.deep.equal([504]);
  });

  it('retries a refused connection', async () => {
    const port = new URL(upstream.url).port;
    await upstream.close();
    await app.close();
    app = await startRouteTestApp(samplePlugins(), { acme: `http://127.0.0.1:${port}/v1` }, { retryPolicy: policy() });
    const response = await chat(app, { model: 'acme/one', input: 'x', max_retries: 2 });
    expect(response.status).to.equal(502);
    expect(response.body.detail).to.equal("Upstream provider 'acme' failed: connection refused");
    expect(sleeps).to.have.length(2);
    upstream = await ScriptedUpstream.start();
  });

  it('answers 502 JSON to an upstream answer over the size limit, and keeps serving', async () => {
    upstream.script = (_req, res) =>
      res.writeHead(200, { 'content-type': 'application/json' }).end(Buffer.alloc(2 * 1024 * 1024, 'a'));
    const response = await chat(app, { model: 'acme/one', input: 'x', max_retries: 0 });
    expect(response.status).to.equal(502);
    upstream.script = (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(answer('ok', 1));
    expect((await chat(app, { model: 'acme/one', input: 'x' })).status).to.equal(200);
  });

  it('answers 502 when the upstream reports no usage', async () => {
    upstream.script = (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{"text":"hi"}');
    const response = await chat(app, { model: 'acme/one', input: 'x' });
    expect(response.status).to.equal(502);
    expect(response.body.detail).to.contain('without usage metadata');
  });
});

describe('retry timing', () => {
  it('reads retry-after-ms, Retry-After seconds and HTTP dates', () => {
    expect(retryAfterMs({ 'retry-after-ms': '150' })).to.equal(150);
    expect(retryAfterMs({ 'retry-after': '3' })).to.equal(3000);
    expect(retryAfterMs({ 'retry-after': new Date(10_000).toUTCString() }, 4_000)).to.equal(6000);
    expect(retryAfterMs({ 'retry-after': 'soon' })).to.equal(undefined);
  });

  it('doubles the backoff per retry, jittered between half and all of it, capped', () => {
    const at = (random: number) => ({ ...DEFAULT_RETRY_POLICY, random: () => random });
    expect([0, 1, 2].map((retry) => backoffMs(at(0), retry))).to.deep.equal([250, 500, 1000]);
    expect([0, 1, 2].map((retry) => backoffMs(at(1), retry))).to.deep.equal([500, 1000, 2000]);
    expect(backoffMs(at(1), 10)).to.equal(8000);
  });
});
