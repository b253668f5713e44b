import { expect } from 'chai';
import { startMockUpstream, type MockUpstream } from '../../mock-upstream/mock-upstream-server.ts';
import { startTestGateway, UPSTREAM_KEY, type TestGateway } from '../helpers/test-gateway.ts';

interface UsageTotals {
  readonly requests: number;
  readonly input_tokens: number;
  readonly output_tokens: number;
}

/** The key's usage read back, summed over its rows. */
async function usageOf(test: TestGateway, key: string): Promise<UsageTotals> {
  await test.gateway.flushUsage();
  const answer = await fetch(`${test.url}/v1/usage`, { headers: { authorization: `Bearer ${key}` } });
  const rows = ((await answer.json()) as { data: UsageTotals[] }).data;
  return rows.reduce(
    (sum, row) => ({
      requests: sum.requests + row.requests,
      input_tokens: sum.input_tokens + row.input_tokens,
      output_tokens: sum.output_tokens + row.output_tokens,
    }),
    { requests: 0, input_tokens: 0, output_tokens: 0 },
  );
}

const post = (test: TestGateway, path: string, key: string, body: unknown, signal?: AbortSignal) =>
  fetch(`${test.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal,
  });

const PROMPT = 'Summarise the history of the printing press in three long paragraphs, please. '.repeat(20);

/**
 * Work the upstream did is charged: an attempt that had the request but whose usage never arrived
 * (a timeout, a client that left, a failover attempt) is charged its input estimate.
 */
describe('usage: an attempt the upstream had is charged its input', function () {
  this.timeout(60_000);
  let zeta: MockUpstream;
  let spare: MockUpstream;
  let test: TestGateway;

  beforeEach(async () => {
    zeta = await startMockUpstream({ apiKey: UPSTREAM_KEY });
    spare = await startMockUpstream({ apiKey: UPSTREAM_KEY });
  });
  afterEach(async () => {
    await test.close();
    await zeta.close();
    await spare.close();
  });

  it("/v1/chat ended by the caller's timeout: its one attempt's input, then twice that for two attempts", async () => {
    test = await startTestGateway({ env: { ZETA_BASE_URL: zeta.url } });
    const { key } = await test.gateway.keys.create({ name: 'impatient' });
    for (let index = 0; index < 3; index += 1) zeta.enqueue({ kind: 'delay', ms: 400 });
    expect(
      (await post(test, '/v1/chat', key, { model: 'zeta/zeta-k3', input: PROMPT, timeout: 0.05, max_retries: 0 }))
        .status,
    ).to.equal(504);
    const one = await usageOf(test, key);
    expect(one.requests).to.equal(1);
    expect(one.input_tokens, 'the prompt the upstream had').to.be.greaterThan(PROMPT.length / 8);
    expect(
      (await post(test, '/v1/chat', key, { model: 'zeta/zeta-k3', input: PROMPT, timeout: 0.05, max_retries: 1 }))
        .status,
    ).to.equal(504);
    const three = await usageOf(test, key);
    expect(three.input_tokens - one.input_tokens).to.equal(2 * one.input_tokens);
  });

  it('/v1/chat whose client leaves during the attempt: its input', async () => {
    test = await startTestGateway({ env: { ZETA_BASE_URL: zeta.url } });
    const { key } = await test.gateway.keys.create({ name: 'leaving' });
    zeta.enqueue({ kind: 'delay', ms: 1000 });
    const leaving = new AbortController();
    const sent = post(test, '/v1/chat', key, { model: 'zeta/zeta-k3', input: PROMPT }, leaving.signal).catch(
      (error: unknown) => error,
    );
    while (zeta.requests.length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
    leaving.abort();
    await sent;
    let used: UsageTotals = { requests: 0, input_tokens: 0, output_tokens: 0 };
    for (let tries = 0; tries < 100 && used.requests === 0; tries += 1) {
      used = await usageOf(test, key);
      if (used.requests === 0) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(used.requests).to.equal(1);
    expect(used.input_tokens).to.be.greaterThan(PROMPT.length / 8);
  });

  it("a stream that failed over from an endpoint that gave no content in time: the served answer plus the first attempt's input", async () => {
    // Affinity off: the requests are one same body, which affinity would send to one endpoint first every time.
    test = await startTestGateway({
      env: {
        ZETA_BASE_URL: `${zeta.url},${spare.url}`,
        ZETA_API_KEY: UPSTREAM_KEY,
        UPSTREAM_FIRST_BYTE_TIMEOUT_MS: '200',
        GATEWAY_ROUTING_AFFINITY: 'false',
      },
    });
    const { key } = await test.gateway.keys.create({ name: 'failing over' });
    // zeta never answers in time (its headers come 2 s after the 200 ms the gateway waits); spare always
    // does. Requests go to either first, by weight.
    for (let index = 0; index < 10; index += 1) zeta.enqueue({ kind: 'delay', ms: 2000 });
    // Until both endpoints were tried first at least once (each request picks by weight; 40 at most).
    let sent = 0;
    while (sent < 40 && (zeta.requests.length === 0 || spare.requests.length === zeta.requests.length)) {
      const answer = await post(test, '/v1/chat/completions', key, {
        model: 'zeta/zeta-k3',
        stream: true,
        messages: [{ role: 'user', content: PROMPT }],
      });
      expect(answer.status).to.equal(200);
      await answer.text();
      sent += 1;
    }
    const used = await usageOf(test, key);
    const reported = spare.requests.reduce((sum, seen) => sum + (seen.reportedUsage?.inputTokens ?? 0), 0);
    expect(spare.requests, 'spare served every request').to.have.length(sent);
    expect(zeta.requests.length, 'some requests went to zeta first').to.be.at.least(1);
    expect(used.input_tokens - reported, 'each timed-out first attempt adds its input').to.be.greaterThan(
      zeta.requests.length * (PROMPT.length / 8),
    );
  });
});
