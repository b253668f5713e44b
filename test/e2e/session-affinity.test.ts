import { expect } from 'chai';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { affinityShare } from '../../bench/affinity-share.ts';
import { startMockUpstream, type MockUpstream } from '../../mock-upstream/mock-upstream-server.ts';
import type { UsageRecord } from '../../src/usage/usage-accounting.ts';
import { startTestGateway, TEST_KEY, UPSTREAM_KEY, type TestGateway } from '../helpers/test-gateway.ts';

const COOLDOWN_MS = 400;
const SYSTEM = `You are a patient tutor. ${'Explain each step, and check the learner followed it. '.repeat(20)}`;

async function post(
  test: TestGateway,
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; text: string }> {
  const response = await request(`${test.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  return { status: response.statusCode, text: await response.body.text() };
}

/** A Chat Completions conversation: the system prompt, its first question, and `turn` exchanges since. */
const conversation = (first: string, turn: number) => ({
  model: 'alpha/gen-5.5',
  messages: [
    { role: 'system', content: SYSTEM },
    { role: 'user', content: first },
    ...Array.from({ length: turn }, (_, index) => [
      { role: 'assistant', content: `Step ${index + 1}.` },
      { role: 'user', content: `Next ${index + 1}?` },
    ]).flat(),
  ],
});

async function records(test: TestGateway): Promise<UsageRecord[]> {
  await test.gateway.flushUsage();
  const text = await readFile(join(test.dataDir, 'usage.jsonl'), 'utf8');
  return text
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as UsageRecord);
}

async function cachedTokensMetric(test: TestGateway, provider: string): Promise<Record<string, number>> {
  const { body } = await test.gateway.metrics.scrape();
  const found: Record<string, number> = {};
  for (const [, endpoint, value] of body.matchAll(
    new RegExp(`^gateway_cached_input_tokens_total\\{provider="${provider}",endpoint="([^"]*)"\\} (\\d+)$`, 'gm'),
  ))
    found[endpoint!] = Number(value);
  return found;
}

describe('prompt-cache-aware routing, end to end on real sockets', function () {
  this.timeout(60_000);
  let alpha: MockUpstream[];
  let beta: MockUpstream[];
  let test: TestGateway;
  const served = (pool: MockUpstream[]) => pool.map((upstream) => upstream.requests.length);
  const reset = () => [...alpha, ...beta].forEach((upstream) => upstream.reset());

  before(async () => {
    alpha = await Promise.all([0, 1].map(() => startMockUpstream({ apiKey: UPSTREAM_KEY, promptCache: true })));
    beta = await Promise.all([0, 1].map(() => startMockUpstream({ apiKey: UPSTREAM_KEY, promptCache: true })));
    test = await startTestGateway({
      env: {
        ALPHA_BASE_URL: alpha.map((upstream) => upstream.url).join(','),
        BETA_BASE_URL: beta.map((upstream) => upstream.url).join(','),
        RATE_LIMIT_MAX: '100000',
        FAILOVER_FAILURE_THRESHOLD: '1',
        FAILOVER_COOLDOWN_MS: String(COOLDOWN_MS),
      },
    });
  });
  after(async () => {
    await test?.close();
    await Promise.all([...(alpha ?? []), ...(beta ?? [])].map((upstream) => upstream.close()));
  });
  beforeEach(reset);

  it('sends 12 requests with one x-session-id to one endpoint of a two-endpoint pool, whatever their bodies', async () => {
    for (let index = 0; index < 12; index += 1) {
      // Each body has another first message (another prefix): the header alone keeps them together.
      const answer = await post(test, '/v1/chat/completions', conversation(`Question ${index}`, index % 3), {
        'x-session-id': 'tutoring-7',
      });
      expect(answer.status, answer.text).to.equal(200);
    }
    expect(served(alpha).sort()).to.deep.equal([0, 12]);
  });

  it('keeps a conversation without a session id on one endpoint by its system prompt and first message; records and metrics show the cached input per endpoint', async () => {
    const before = await cachedTokensMetric(test, 'alpha');
    for (let turn = 0; turn < 6; turn += 1)
      expect((await post(test, '/v1/chat/completions', conversation('What is a derivative?', turn))).status).to.equal(
        200,
      );
    const home = alpha.findIndex((upstream) => upstream.requests.length > 0);
    expect(served(alpha)[home]).to.equal(6);
    const cached = alpha[home]!.requests.map((seen) => seen.reportedUsage!.cachedTokens);
    expect(cached[0]).to.equal(0);
    for (const later of cached.slice(1)) expect(later).to.be.greaterThan(0);

    const recorded = (await records(test)).filter((record) => record.model === 'alpha/gen-5.5').slice(-6);
    expect(recorded.map((record) => record.endpoint)).to.deep.equal(Array(6).fill(String(home)));
    expect(recorded.map((record) => record.cachedTokens)).to.deep.equal(cached);
    const after = await cachedTokensMetric(test, 'alpha');
    const sum = cached.reduce((total, tokens) => total + tokens, 0);
    expect(after[String(home)]! - (before[String(home)] ?? 0)).to.equal(sum);
  });

  it('reads the session of Messages and Responses streams from their own prefix, and records their cached input', async () => {
    const messages = (turn: number) => ({
      model: 'beta-opus-4-8',
      max_tokens: 20,
      stream: true,
      system: SYSTEM,
      messages: [
        { role: 'user', content: 'Integrals, please.' },
        ...Array.from({ length: turn }, () => [
          { role: 'assistant', content: 'Sure.' },
          { role: 'user', content: 'More.' },
        ]).flat(),
      ],
    });
    const responses = (turn: number) => ({
      model: 'alpha/gen-5.5',
      stream: true,
      instructions: SYSTEM,
      input: [
        { role: 'user', content: 'Limits, please.' },
        ...Array.from({ length: turn }, () => ({ role: 'user', content: 'And?' })),
      ],
    });
    for (let turn = 0; turn < 4; turn += 1) {
      for (const [path, body] of [
        ['/v1/messages', messages(turn)],
        ['/v1/responses', responses(turn)],
      ] as const) {
        const answer = await post(test, path, body);
        expect(answer.status, answer.text).to.equal(200);
      }
    }
    for (const pool of [alpha, beta]) expect(served(pool).sort()).to.deep.equal([0, 4]);
    const recorded = await records(test);
    for (const model of ['beta/beta-opus-4-8', 'alpha/gen-5.5']) {
      const mine = recorded.filter((record) => record.model === model && record.stream).slice(-4);
      expect(mine[0]!.cachedTokens).to.equal(0);
      for (const later of mine.slice(1)) expect(later.cachedTokens).to.be.greaterThan(0);
    }
  });

  it('keeps /v1/chat requests of one session (x-session-id, else the same input) on one endpoint', async () => {
    for (let index = 0; index < 6; index += 1)
      expect(
        (
          await post(
            test,
            '/v1/chat',
            { model: 'alpha/gen-5.5', input: `Question ${index}` },
            { 'x-session-id': 'native-1' },
          )
        ).status,
      ).to.equal(200);
    expect(served(alpha).sort()).to.deep.equal([0, 6]);
    reset();
    for (let index = 0; index < 6; index += 1)
      expect((await post(test, '/v1/chat', { model: 'alpha/gen-5.5', input: 'The same question' })).status).to.equal(
        200,
      );
    expect(served(alpha).sort()).to.deep.equal([0, 6]);
  });

  it('fails a session over to the other endpoint while its own rests, and brings it back once the rest is over', async () => {
    const ask = async () => {
      const counts = served(alpha);
      const answer = await post(test, '/v1/chat/completions', conversation('anything', 0), {
        'x-session-id': 'resilient',
      });
      expect(answer.status, answer.text).to.equal(200);
      // The endpoint that answered: a new request there, answered 200 (a failed-over one answered 500 first).
      return alpha.findIndex(
        (upstream, index) => upstream.requests.length > counts[index]! && upstream.requests.at(-1)!.status === 200,
      );
    };
    const home = await ask();
    const other = 1 - home;
    alpha[home]!.enqueue({ kind: 'status', status: 500 });
    // The 500 rests the home endpoint (one failure is the threshold here); the request fails over.
    expect(await ask()).to.equal(other);
    expect(alpha[home]!.requests.at(-1)!.status).to.equal(500);
    for (let index = 0; index < 3; index += 1) expect(await ask(), 'while home rests').to.equal(other);
    await sleep(COOLDOWN_MS + 100);
    expect(await ask(), 'the trial after the rest').to.equal(home);
    for (let index = 0; index < 3; index += 1) expect(await ask(), 'home again').to.equal(home);
  });

  it('turns off with GATEWAY_ROUTING_AFFINITY=false: one session id is spread at random again', async () => {
    const spread = await startTestGateway({
      env: {
        ALPHA_BASE_URL: alpha.map((upstream) => upstream.url).join(','),
        GATEWAY_ROUTING_AFFINITY: 'false',
        RATE_LIMIT_MAX: '100000',
      },
    });
    try {
      // Both used after at most 40 random picks but for a chance of 2 in 10^12.
      for (let index = 0; index < 40 && (index < 6 || served(alpha).includes(0)); index += 1) {
        const request = await fetch(`${spread.url}/v1/chat/completions`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${TEST_KEY}`,
            'content-type': 'application/json',
            'x-session-id': 'pinned?',
          },
          body: JSON.stringify(conversation('same', 0)),
        });
        expect(request.status).to.equal(200);
        await request.text();
      }
      expect(served(alpha).every((count) => count > 0)).to.equal(true);
    } finally {
      await spread.close();
    }
  });

  it('measures a higher cached input share with affinity than with random spreading (bench/affinity-share.ts)', async () => {
    const turns = 4;
    const { affinity, random } = await affinityShare({ sessions: 12, turns, endpoints: 2 });
    expect(affinity.requests).to.equal(random.requests);
    expect(affinity.inputTokens).to.equal(random.inputTokens);
    // With affinity every turn after a session's first finds its prefix cached.
    expect(affinity.hitRate).to.equal((turns - 1) / turns);
    expect(affinity.cachedShare).to.be.greaterThan(random.cachedShare);
    expect(affinity.hitRate).to.be.greaterThan(random.hitRate);
  });
});
