import { expect } from 'chai';
import { request } from 'undici';
import { startTestGateway, TEST_KEY, type TestGateway } from '../helpers/test-gateway.ts';

async function chat(test: TestGateway, body: unknown) {
  const response = await request(`${test.url}/v1/chat`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TEST_KEY}` },
    body: JSON.stringify(body),
  });
  return { status: response.statusCode, body: (await response.body.json()) as Record<string, any> };
}

// Per plugin: the model asked for, the upstream it reaches, the path and what the body must hold.
const cases = [
  {
    model: 'alpha-latest',
    vendor: 'alpha',
    canonical: 'alpha/gen-6-astra',
    path: '/v1/responses',
    preset: { reasoning: { effort: 'low' } },
    tokens: 'max_output_tokens',
    search: { tools: [{ type: 'web_search' }] },
  },
  {
    model: 'beta-latest',
    vendor: 'beta',
    canonical: 'beta/beta-fable-5-1',
    path: '/v1/messages',
    preset: { output_config: { effort: 'low' } },
    tokens: 'max_tokens',
    search: { tools: [{ type: 'web_search_20250305', name: 'web_search' }] },
  },
  {
    model: 'gamma/gamma-3.8-flash',
    vendor: 'gamma',
    canonical: 'gamma/gamma-3.8-flash',
    path: '/v1/chat/completions',
    preset: { reasoning_effort: 'low' },
    tokens: 'max_tokens',
    search: { tools: [{ type: 'function', function: { name: 'googleSearch' } }] },
  },
  {
    model: 'delta/delta-4.5',
    vendor: 'delta',
    canonical: 'delta/delta-4.5',
    path: '/v1/chat/completions',
    preset: { reasoning_effort: 'low' },
    tokens: 'max_tokens',
  },
  {
    model: 'epsilon/epsilon-5.2',
    vendor: 'epsilon',
    canonical: 'epsilon/epsilon-5.2',
    path: '/v1/chat/completions',
    preset: { reasoning_effort: 'low' },
    tokens: 'max_tokens',
  },
  {
    model: 'zeta/zeta-k3',
    vendor: 'zeta',
    canonical: 'zeta/zeta-k3',
    path: '/v1/chat/completions',
    preset: { reasoning_effort: 'low' },
    tokens: 'max_tokens',
  },
] as const;

describe('POST /v1/chat end to end, per plugin', function () {
  this.timeout(30_000);
  let test: TestGateway;
  before(async () => (test = await startTestGateway({ mock: { cachedTokens: 2 } })));
  after(async () => test.close());
  beforeEach(() => Object.values(test.upstreams).forEach((upstream) => upstream.reset()));

  for (const entry of cases) {
    it(`${entry.vendor}: sends its own format with the low preset, and maps the answer and usage`, async () => {
      const webSearch = 'search' in entry;
      const response = await chat(test, {
        model: entry.model,
        input: 'What changed today?',
        temperature: 0.2,
        max_output_tokens: 64,
        ...(webSearch ? { web_search: true } : {}),
      });
      expect(response.status, JSON.stringify(response.body)).to.equal(200);
      const upstream = test.upstreams[entry.vendor];
      expect(upstream.requests).to.have.length(1);
      const sent = upstream.requests[0]!;
      expect(sent.path).to.equal(entry.path);
      expect(sent.body.model).to.equal(entry.canonical.split('/')[1]);
      expect(sent.body).to.deep.include({ ...entry.preset, temperature: 0.2, [entry.tokens]: 64 });
      if (webSearch) expect(sent.body).to.deep.include(entry.search);
      else expect(sent.body).not.to.have.property('tools');
      expect(JSON.stringify(sent.body)).to.contain('What changed today?');
      const reported = sent.reportedUsage!;
      expect(response.body.model).to.equal(entry.canonical);
      expect(response.body.result).to.deep.equal({ text: 'Mock reply to: What changed today?' });
      expect(response.body.usage).to.deep.equal({
        input_tokens: reported.inputTokens,
        output_tokens: reported.outputTokens,
        total_tokens: reported.inputTokens + reported.outputTokens,
        cached_tokens: 2,
        charged_tokens: response.body.usage.charged_tokens,
      });
      expect(response.body.usage.charged_tokens).to.equal(reported.inputTokens - 2 + reported.outputTokens + 1);
      await test.gateway.flushUsage();
      const usage = (await (
        await request(`${test.url}/v1/usage`, { headers: { authorization: `Bearer ${TEST_KEY}` } })
      ).body.json()) as { data: { model: string }[] };
      expect(usage.data.map((row) => row.model)).to.include(entry.canonical);
    });
  }

  it('refuses web_search for a model whose plugin has no search tool', async () => {
    const response = await chat(test, { model: 'zeta/zeta-k3', input: 'x', web_search: true });
    expect(response.status).to.equal(400);
    expect(response.body.errors).to.deep.equal([
      "Field 'web_search': the model 'zeta/zeta-k3' has no web search tool; drop the field or pick a model that has one",
    ]);
  });

  it('points a web chat preset to beta-latest and the concrete IDs', async () => {
    const response = await chat(test, { model: 'beta/beta-fable-5-1-thinking', input: 'x' });
    expect(response.status).to.equal(400);
    expect(response.body.errors[0]).to.contain("use 'beta-latest' or a concrete ID such as 'beta/beta-fable-5-1'");
  });

  it("retries the mock upstream's scripted failures and answers once, as one usage record", async () => {
    test.upstreams.delta.enqueue(
      { kind: 'status', status: 503 },
      { kind: 'reset' },
      { kind: 'status', status: 429, headers: { 'retry-after-ms': '10' } },
    );
    const response = await chat(test, { model: 'delta/delta-4.7', input: 'retry me', max_retries: 3 });
    expect(response.status).to.equal(200);
    expect(test.upstreams.delta.requests).to.have.length(4);
  });

  it('gives up after max_retries with a 502 that names the provider and no credential', async () => {
    test.upstreams.epsilon.enqueue({ kind: 'status', status: 500 }, { kind: 'status', status: 500 });
    const response = await chat(test, { model: 'epsilon/epsilon-5.2', input: 'x', max_retries: 1 });
    expect(response.status).to.equal(502);
    expect(response.body.detail).to.equal("Upstream provider 'epsilon' failed: upstream answered 500: mock status 500");
    expect(test.upstreams.epsilon.requests).to.have.length(2);
  });

  it('answers 504 when every attempt outlives timeout', async () => {
    test.upstreams.zeta.enqueue({ kind: 'hang' }, { kind: 'hang' });
    const response = await chat(test, { model: 'zeta/zeta-k3', input: 'x', timeout: 0.3, max_retries: 1 });
    expect(response.status).to.equal(504);
    expect(response.body.detail).to.equal("Upstream provider 'zeta' did not answer in time");
    expect(test.upstreams.zeta.requests).to.have.length(2);
  });
});
