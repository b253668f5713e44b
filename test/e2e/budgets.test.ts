import { expect } from 'chai';
import { withinOneWindow } from '../helpers/limit-window.ts';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { request } from 'undici';
import { TestRedisServer } from '../helpers/redis-server.ts';
import { startTestGateway, type TestGateway } from '../helpers/test-gateway.ts';
import { metersOfLimits } from '../../src/usage/limit-meters.ts';
import { demandsFor, estimateRequest } from '../../src/usage/reservation.ts';
import { promptCharacters } from '../../src/usage/token-estimate.ts';
import type { Limits } from '../../src/core/limits.ts';

const ADMIN = 'admin-token-for-budget-tests-0001';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits out the end of a UTC minute, so a test's requests all fall in one tokens-per-minute window. */
async function freshMinute(needMs = 15_000): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < needMs) await sleep(left + 50);
}

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  json: any;
}

async function post(url: string, path: string, key: string, body: unknown): Promise<Answer> {
  const response = await request(`${url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await response.body.text();
  return { status: response.statusCode, headers: response.headers, json: text ? JSON.parse(text) : undefined };
}

const chat = (extra: Record<string, unknown> = {}) => ({
  model: 'zeta/zeta-k3',
  messages: [{ role: 'user', content: 'Count to three' }],
  ...extra,
});

/** zeta/zeta-k3's prices (USD per million input and output tokens), as its plugin declares them. */
const ZETA_PRICING = { input: 0.65, cachedInput: 0.065, output: 2.7 };

/**
 * A daily budget (whole micro-USD, as the API takes it) that serves exactly `served` requests of `body`
 * costing `each` USD, one after the other: the last one needs its whole reservation left (its estimate
 * at the model's prices), and after it less than that is.
 */
function budgetServing(served: number, each: number, body: Record<string, unknown>): number {
  const reserved = demandsFor(
    [
      {
        counter: 'x',
        limit: Number.MAX_SAFE_INTEGER,
        kind: 'budget',
        scope: 'key',
        owner: 'x',
        period: 'day',
        resetAt: Date.now() + 1000,
      },
    ],
    estimateRequest(promptCharacters(body), body.max_tokens as number),
    ZETA_PRICING,
  )[0]!.want;
  expect(reserved / 1e9, 'a reservation covers at least what one request costs').to.be.at.least(each);
  return Math.ceil(((served - 1) * each + reserved / 1e9) * 1e6) / 1e6;
}

async function usageOf(
  test: TestGateway,
  keyId: string,
): Promise<{ requests: number; charged_tokens: number; cost_usd: string; output_tokens: number }> {
  type Sum = { requests: number; charged_tokens: number; cost_usd: string; output_tokens: number };
  await test.gateway.flushUsage();
  const response = await request(`${test.url}/admin/usage?key_id=${keyId}`, {
    headers: { authorization: `Bearer ${ADMIN}` },
  });
  const rows = ((await response.body.json()) as { data: Record<string, any>[] }).data;
  return rows.reduce<Sum>(
    (sum, row) => ({
      requests: sum.requests + row.requests,
      charged_tokens: sum.charged_tokens + row.charged_tokens,
      output_tokens: sum.output_tokens + row.output_tokens,
      cost_usd: (Number(sum.cost_usd) + Number(row.cost_usd)).toFixed(9),
    }),
    { requests: 0, charged_tokens: 0, output_tokens: 0, cost_usd: '0' },
  );
}

/** The current values of an owner's token and money counters, by `<kind>:<period>`. */
async function counters(
  test: TestGateway,
  scope: 'key' | 'team',
  owner: string,
  limits: Limits,
): Promise<Record<string, number>> {
  await test.gateway.flushUsage();
  const meters = metersOfLimits(scope, owner, limits, Date.now());
  const values = await test.gateway.limits.peek(meters.map((meter) => meter.counter));
  return Object.fromEntries(meters.map((meter, index) => [`${meter.kind}:${meter.period}`, values[index]!]));
}

/** Seconds from `at` (epoch ms) to the next UTC midnight. */
const secondsToMidnight = (at: number) => {
  const day = new Date(at);
  return (Date.UTC(day.getUTCFullYear(), day.getUTCMonth(), day.getUTCDate() + 1) - at) / 1000;
};

const utcDay = (at: number) => new Date(at).toISOString().slice(0, 10);

/**
 * Checks the Retry-After of a refusal that lasts until the next UTC midnight, decided at some instant
 * between `before` (taken before sending) and `after` (taken once answered): between the seconds to
 * midnight measured after and those measured before, ±1 for rounding. When the UTC day changed in
 * between, the refusal may have been decided on either day: either day's range is accepted.
 */
function expectRetryUntilMidnight(retryAfter: unknown, before: number, after: number): void {
  const seconds = Number(retryAfter);
  const ranges: [number, number][] =
    utcDay(before) === utcDay(after)
      ? [[secondsToMidnight(after) - 1, secondsToMidnight(before) + 1]]
      : [
          [0, secondsToMidnight(before) + 1],
          [secondsToMidnight(after) - 1, 86_400 + 1],
        ];
  const fits = ranges.some(([low, high]) => seconds >= low && seconds <= high);
  expect(
    fits,
    `Retry-After ${String(retryAfter)} within ${ranges.map(([low, high]) => `[${low}, ${high}]`).join(' or ')}`,
  ).to.equal(true);
}

/** Where the UTC minute window holding `at` (epoch ms) ends. */
const minuteEnd = (at: number) => (Math.floor(at / 60_000) + 1) * 60_000;

for (const store of ['embedded', 'redis'] as const) {
  describe(`budgets: reserve at admission, settle on the real usage (${store} store)`, function () {
    this.timeout(120_000);
    let redis: TestRedisServer | undefined;
    let test: TestGateway;

    beforeEach(async () => {
      redis = store === 'redis' ? await TestRedisServer.start() : undefined;
      test = await startTestGateway({
        env: { GATEWAY_ADMIN_TOKEN: ADMIN, ...(redis ? { REDIS_URL: redis.url } : {}) },
      });
    });
    afterEach(async () => {
      await test.close();
      await redis?.close();
    });

    it('lets exactly the requests whose reservations fit a tpm reach a slow upstream, 429 with Retry-After for the rest', async () => {
      // Each reserves its input estimate (14 characters / 4 + 8 = 12) and max_tokens 100: 112 tokens.
      const { key } = await test.gateway.keys.create({ name: 'tpm', tpm: 1120 });
      await freshMinute();
      test.upstreams.zeta.enqueue(...Array.from({ length: 50 }, () => ({ kind: 'delay' as const, ms: 1000 })));
      const answers = await Promise.all(
        Array.from({ length: 50 }, () => post(test.url, '/v1/chat/completions', key, chat({ max_tokens: 100 }))),
      );
      const refused = answers.filter((answer) => answer.status === 429);
      expect(answers.filter((answer) => answer.status === 200)).to.have.length(10);
      expect(refused).to.have.length(40);
      expect(test.upstreams.zeta.requests).to.have.length(10);
      for (const answer of refused) {
        expect(Number(answer.headers['retry-after'])).to.be.within(1, 60);
        expect(answer.json.error.code).to.equal('GW_ERR_TOKEN_RATE_LIMITED');
        expect(answer.json.error.message).to.match(
          /^Token rate limit exceeded: 1120 tokens per 1 minute; \d+ left this minute, this request reserves 112$/,
        );
      }
      const metrics = await (await request(`${test.url}/metrics`)).body.text();
      expect(metrics).to.include('gateway_limit_refusals_total{kind="tpm",scope="key"} 40');
      expect(metrics).to.include('gateway_limit_refusals_total{kind="budget",scope="key"} 0');
      const served = answers.find((answer) => answer.status === 200)!;
      expect(served.headers['x-ratelimit-limit-tokens']).to.equal('1120');
      expect(Number(served.headers['x-ratelimit-remaining-tokens'])).to.be.within(0, 1120 - 112);
      expect(served.headers['x-ratelimit-reset-tokens']).to.match(/^\d+(\.\d+)?s$|^\d+ms$/);
      expect(served.headers['x-ratelimit-limit-requests']).to.equal('100');
    });

    it('keeps a daily quota of 30 charged tokens within its bound under 20 requests at once, then refuses until the next UTC day', async () => {
      const { key, record } = await test.gateway.keys.create({ name: 'daily 30', quota: { daily: 30 } });
      const answers = await Promise.all(
        Array.from({ length: 20 }, () => post(test.url, '/v1/chat/completions', key, chat({ max_tokens: 4 }))),
      );
      const served = answers.filter((answer) => answer.status === 200).length;
      const used = await usageOf(test, record.id);
      expect(used.requests).to.equal(served);
      // The bound: a limit is exceeded at most by the output of the requests admitted while it had room.
      expect(used.charged_tokens).to.be.at.most(30 + used.output_tokens);
      expect(served).to.be.within(1, 3);
      const sentAt = Date.now();
      const after = await post(test.url, '/v1/chat/completions', key, chat({ max_tokens: 4 }));
      const answeredAt = Date.now();
      expect(after.status).to.equal(429);
      expect(after.json.error.code).to.equal('GW_ERR_QUOTA_EXCEEDED');
      expectRetryUntilMidnight(after.headers['retry-after'], sentAt, answeredAt);
      expect((await counters(test, 'key', record.id, { quota: { daily: 30 } }))['quota:day']).to.equal(
        used.charged_tokens,
      );
    });

    it('serves the N requests a daily money budget fits, then 429; the usage cost equals what was served', async () => {
      const probe = await test.gateway.keys.create({ name: 'probe' });
      expect((await post(test.url, '/v1/chat/completions', probe.key, chat({ max_tokens: 50 }))).status).to.equal(200);
      const each = Number((await usageOf(test, probe.record.id)).cost_usd);
      expect(each).to.be.greaterThan(0);
      const budget = { daily_usd: budgetServing(5, each, chat({ max_tokens: 50 })) };
      const { key, record } = await test.gateway.keys.create({ name: 'five requests', budget });
      const statuses: number[] = [];
      for (let index = 0; index < 7; index += 1) {
        const sentAt = Date.now();
        const answer = await post(test.url, '/v1/chat/completions', key, chat({ max_tokens: 50 }));
        const answeredAt = Date.now();
        statuses.push(answer.status);
        if (answer.status === 429) {
          expect(answer.json.error.code).to.equal('GW_ERR_BUDGET_EXCEEDED');
          expectRetryUntilMidnight(answer.headers['retry-after'], sentAt, answeredAt);
        }
        await test.gateway.flushUsage();
      }
      expect(statuses).to.deep.equal([200, 200, 200, 200, 200, 429, 429]);
      const used = await usageOf(test, record.id);
      expect(used.requests).to.equal(5);
      expect(Number(used.cost_usd)).to.be.closeTo(each * 5, 1e-9);
      expect((await counters(test, 'key', record.id, { budget }))['budget:day']).to.equal(Math.round(each * 5 * 1e9));
    });

    it('settles a stream past its reservation to the real figure, a cut stream to its estimate, an upstream 400 to nothing', async () => {
      const limits: Limits = { quota: { daily: 1_000_000 }, tpm: 1_000_000 };
      const { key, record } = await test.gateway.keys.create({ name: 'settle', ...limits });
      await freshMinute();
      // max_tokens 1 reserves 13 tokens; the upstream writes more than one token regardless.
      const long = await post(test.url, '/v1/chat/completions', key, chat({ max_tokens: 1 }));
      expect(long.status).to.equal(200);
      const real = await usageOf(test, record.id);
      expect(real.output_tokens).to.be.greaterThan(1);
      expect(await counters(test, 'key', record.id, limits)).to.deep.include({ 'quota:day': real.charged_tokens });

      test.upstreams.zeta.enqueue({ kind: 'drop-mid-stream', afterEvents: 2 });
      const cut = await request(`${test.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}` },
        body: JSON.stringify(chat({ stream: true })),
      });
      await cut.body.text().catch(() => '');
      await test.gateway.flushUsage();
      const afterCut = await usageOf(test, record.id);
      expect(afterCut.requests).to.equal(2);
      expect(await counters(test, 'key', record.id, limits)).to.deep.include({ 'quota:day': afterCut.charged_tokens });

      test.upstreams.zeta.enqueue({ kind: 'status', status: 400 });
      expect((await post(test.url, '/v1/chat/completions', key, chat())).status).to.equal(400);
      expect(await counters(test, 'key', record.id, limits)).to.deep.include({ 'quota:day': afterCut.charged_tokens });

      // A retried attempt (the native route retries a 503) holds the one reservation made at admission.
      test.upstreams.zeta.enqueue({ kind: 'status', status: 503 });
      const retried = await post(test.url, '/v1/chat', key, {
        model: 'zeta/zeta-k3',
        input: 'Count to three',
        max_output_tokens: 1,
      });
      expect(retried.status).to.equal(200);
      const afterRetry = await usageOf(test, record.id);
      expect(afterRetry.requests).to.equal(4);
      expect(test.upstreams.zeta.requests.filter((entry) => entry.path.endsWith('/chat/completions')).length).to.equal(
        5,
      );
      expect(await counters(test, 'key', record.id, limits)).to.deep.include({
        'quota:day': afterRetry.charged_tokens,
      });
    });

    it('gives the openai SDK its x-ratelimit-* headers, and its retry waits out the 429 Retry-After', async () => {
      const { key } = await test.gateway.keys.create({ name: 'sdk', rpm: 1, tpm: 100_000 });
      await withinOneWindow(10_000);
      const client = new OpenAI({ apiKey: key, baseURL: `${test.url}/v1`, maxRetries: 0 });
      const { response } = await client.chat.completions.create(chat({ max_tokens: 10 }) as never).withResponse();
      expect(response.headers.get('x-ratelimit-limit-requests')).to.equal('1');
      expect(response.headers.get('x-ratelimit-remaining-requests')).to.equal('0');
      expect(response.headers.get('x-ratelimit-limit-tokens')).to.equal('100000');
      expect(Number(response.headers.get('x-ratelimit-remaining-tokens'))).to.be.below(100_000);
      const refused = await client.chat.completions.create(chat() as never).catch((error: unknown) => error);
      expect(refused).to.be.instanceOf(OpenAI.RateLimitError);
      expect(Number((refused as InstanceType<typeof OpenAI.RateLimitError>).headers?.get('retry-after'))).to.be.within(
        1,
        60,
      );
    });
  });
}

describe('budgets: the openai SDK retry honours Retry-After', function () {
  this.timeout(60_000);
  let test: TestGateway;
  before(async () => {
    test = await startTestGateway({ env: { GATEWAY_ADMIN_TOKEN: ADMIN, RATE_LIMIT_WINDOW_MS: '3000' } });
  });
  after(async () => test.close());

  it('waits the seconds the 429 names, then succeeds', async () => {
    const { key } = await test.gateway.keys.create({ name: 'retry', rpm: 1 });
    // One retry: only a wait for Retry-After (up to the 3 s window's end) gets it through; the SDK's own backoff (0.5
    // s) would not.
    const client = new OpenAI({ apiKey: key, baseURL: `${test.url}/v1`, maxRetries: 1 });
    // Both requests in one 3 s window (aligned on the epoch): the second is refused until it ends.
    await withinOneWindow(2500, 3000);
    await client.chat.completions.create(chat() as never);
    const started = Date.now();
    const second = await client.chat.completions.create(chat() as never);
    expect(second.choices[0]!.message.content).to.be.a('string');
    // Retry-After names whole seconds up to the window's end (2 or 3 here); the SDK waited for it.
    expect(Date.now() - started).to.be.at.least(1500);
    expect(test.upstreams.zeta.requests).to.have.length(2);
  });
});

describe("budgets: rate-limit headers are the caller's, in each format's own style", function () {
  this.timeout(60_000);
  let test: TestGateway;
  before(async () => {
    test = await startTestGateway({ env: { GATEWAY_ADMIN_TOKEN: ADMIN } });
  });
  after(async () => test.close());

  it('answers Messages with anthropic-ratelimit-* headers the Anthropic SDK reads', async () => {
    const { key } = await test.gateway.keys.create({ name: 'messages', rpm: 7, tpm: 5000 });
    const client = new Anthropic({ apiKey: key, baseURL: test.url, maxRetries: 0 });
    const sentAt = Date.now();
    const { response } = await client.messages
      .create({ model: 'beta-opus-4-8', max_tokens: 20, messages: [{ role: 'user', content: 'Count to three' }] })
      .withResponse();
    const answeredAt = Date.now();
    expect(response.headers.get('anthropic-ratelimit-requests-limit')).to.equal('7');
    expect(response.headers.get('anthropic-ratelimit-requests-remaining')).to.equal('6');
    expect(response.headers.get('anthropic-ratelimit-tokens-limit')).to.equal('5000');
    // 14 characters / 4 + 8 = 12 input tokens and max_tokens 20 reserved.
    expect(response.headers.get('anthropic-ratelimit-tokens-remaining')).to.equal(String(5000 - 32));
    // The end of the UTC minute the request was admitted in (RFC 3339, whole seconds): of the minute
    // when it was sent, or of the next one if a minute ended before it was answered.
    const reset = Date.parse(response.headers.get('anthropic-ratelimit-tokens-reset')!);
    expect(reset, response.headers.get('anthropic-ratelimit-tokens-reset')!).to.be.within(
      minuteEnd(sentAt),
      minuteEnd(answeredAt),
    );
    expect(response.headers.get('x-ratelimit-limit-requests')).to.equal(null);
  });

  it("never passes the upstream's own rate-limit headers on as the caller's", async () => {
    const upstreamLimits = {
      'x-ratelimit-limit-requests': '5000',
      'x-ratelimit-remaining-requests': '4999',
      'x-ratelimit-limit-tokens': '800000',
      'x-ratelimit-remaining-tokens': '799000',
      'anthropic-ratelimit-requests-limit': '5000',
    };
    const completion = {
      id: 'chatcmpl-1',
      object: 'chat.completion',
      created: 1,
      model: 'zeta-k3',
      choices: [{ index: 0, message: { role: 'assistant', content: 'one two three' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 12, completion_tokens: 3, total_tokens: 15 },
    };
    test.upstreams.zeta.enqueue({ kind: 'status', status: 200, body: completion, headers: upstreamLimits });
    const { key } = await test.gateway.keys.create({ name: 'no upstream limits' });
    const answer = await post(test.url, '/v1/chat/completions', key, chat());
    expect(answer.status).to.equal(200);
    expect(answer.headers['x-ratelimit-limit-requests']).to.equal('100');
    expect(answer.headers['x-ratelimit-remaining-requests']).to.equal('99');
    expect(answer.headers).not.to.have.property('x-ratelimit-limit-tokens');
    expect(answer.headers).not.to.have.property('anthropic-ratelimit-requests-limit');
  });
});

describe('budgets: exact across gateway instances on one Redis', function () {
  this.timeout(120_000);
  let redis: TestRedisServer;
  let instances: TestGateway[];

  before(async () => {
    redis = await TestRedisServer.start();
    instances = [];
    for (let index = 0; index < 3; index += 1)
      instances.push(await startTestGateway({ env: { GATEWAY_ADMIN_TOKEN: ADMIN, REDIS_URL: redis.url } }));
  });
  after(async () => {
    await Promise.all(instances.map((instance) => instance.close()));
    await redis.close();
  });

  it('lets exactly the 10 requests a tpm fits through three instances sharing 50 (17/17/16)', async () => {
    const { key } = await instances[0]!.gateway.keys.create({ name: 'shared tpm', tpm: 1120 });
    await freshMinute();
    for (const instance of instances)
      instance.upstreams.zeta.enqueue(...Array.from({ length: 17 }, () => ({ kind: 'delay' as const, ms: 1000 })));
    const shares = [17, 17, 16];
    const answers = await Promise.all(
      shares.flatMap((count, index) =>
        Array.from({ length: count }, () =>
          post(instances[index]!.url, '/v1/chat/completions', key, chat({ max_tokens: 100 })),
        ),
      ),
    );
    expect(answers.filter((answer) => answer.status === 200)).to.have.length(10);
    const refused = answers.filter((answer) => answer.status === 429);
    expect(refused).to.have.length(40);
    for (const answer of refused) expect(Number(answer.headers['retry-after'])).to.be.within(1, 60);
    expect(instances.reduce((sum, instance) => sum + instance.upstreams.zeta.requests.length, 0)).to.equal(10);
  });

  it('holds a team budget shared by two keys across both keys and across instances', async () => {
    const [first, second] = instances as [TestGateway, TestGateway];
    const probe = await first.gateway.keys.create({ name: 'team probe' });
    expect((await post(first.url, '/v1/chat/completions', probe.key, chat({ max_tokens: 50 }))).status).to.equal(200);
    const each = Number((await usageOf(first, probe.record.id)).cost_usd);
    const created = await request(`${first.url}/admin/teams`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        name: 'research',
        budget: { daily_usd: budgetServing(3, each, chat({ max_tokens: 50 })) },
      }),
    });
    expect(created.statusCode).to.equal(201);
    await created.body.dump();
    const alice = await first.gateway.keys.create({ name: 'alice', team: 'research' });
    const bob = await second.gateway.keys.create({ name: 'bob', team: 'research' });
    const statuses: number[] = [];
    const codes: string[] = [];
    for (let index = 0; index < 6; index += 1) {
      const [instance, key] = index % 2 === 0 ? [first, alice.key] : [second, bob.key];
      const answer = await post(instance.url, '/v1/chat/completions', key, chat({ max_tokens: 50 }));
      statuses.push(answer.status);
      if (answer.status === 429) codes.push(answer.json.error.code, answer.json.error.message);
      await instance.gateway.flushUsage();
    }
    // The budget (rounded to whole micro-USD) fits three requests, whichever key and instance sends them.
    expect(statuses.filter((status) => status === 200)).to.have.length(3);
    expect(statuses.slice(0, 3)).to.deep.equal([200, 200, 200]);
    expect(statuses.slice(3)).to.deep.equal([429, 429, 429]);
    expect(codes[0]).to.equal('GW_ERR_BUDGET_EXCEEDED');
    expect(codes[1]).to.match(/used today \(UTC\) \(team 'research'\), this request reserves up to \$[0-9.]+$/);
  });
});
