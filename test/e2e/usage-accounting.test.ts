import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import type { ReportedUsage } from '../../mock-upstream/mock-upstream-server.ts';
import { TestRedisServer } from '../helpers/redis-server.ts';
import { startTestGateway, TEST_KEY, type TestGateway } from '../helpers/test-gateway.ts';

const auth = { authorization: `Bearer ${TEST_KEY}` };

async function post(test: TestGateway, path: string, body: unknown, headers: Record<string, string> = {}) {
  const response = await request(`${test.url}${path}`, {
    method: 'POST',
    headers: { ...auth, ...headers },
    body: JSON.stringify(body),
  });
  return { status: response.statusCode, text: await response.body.text() };
}

async function usageRows(test: TestGateway, query = '') {
  await test.gateway.flushUsage();
  const response = await request(`${test.url}/v1/usage${query}`, { headers: auth });
  const body = (await response.body.json()) as { data?: Record<string, any>[] };
  if (!body.data) throw new Error(`usage read-back answered ${response.statusCode}: ${JSON.stringify(body)}`);
  return body.data;
}

function sumReported(test: TestGateway): ReportedUsage & { requests: number } {
  const requests = test.allRequests().filter((entry) => entry.reportedUsage);
  return requests.reduce(
    (sum, entry) => ({
      requests: sum.requests + 1,
      inputTokens: sum.inputTokens + entry.reportedUsage!.inputTokens,
      outputTokens: sum.outputTokens + entry.reportedUsage!.outputTokens,
      cachedTokens: sum.cachedTokens + entry.reportedUsage!.cachedTokens,
    }),
    { requests: 0, inputTokens: 0, outputTokens: 0, cachedTokens: 0 },
  );
}

const chat = (model: string, extra: Record<string, unknown> = {}) => ({
  model,
  messages: [{ role: 'user', content: 'How many tokens is this?' }],
  ...extra,
});
const messages = (model: string, extra: Record<string, unknown> = {}) => ({
  model,
  max_tokens: 50,
  messages: [{ role: 'user', content: 'Count me' }],
  ...extra,
});

for (const store of ['redis', 'embedded'] as const) {
  describe(`usage accounting end to end (${store} store)`, function () {
    this.timeout(60_000);
    let redis: TestRedisServer | undefined;
    let test: TestGateway;

    beforeEach(async () => {
      redis = store === 'redis' ? await TestRedisServer.start() : undefined;
      test = await startTestGateway({
        env: { GATEWAY_ADMIN_TOKEN: 'admin-token-0001-0123456789abcdef', ...(redis ? { REDIS_URL: redis.url } : {}) },
        mock: { cachedTokens: 3 },
      });
    });
    afterEach(async () => {
      await test.close();
      await redis?.close();
    });

    const cases: [string, string, (stream: boolean) => unknown, string][] = [
      ['Chat Completions', '/v1/chat/completions', (stream) => chat('alpha/gen-5.5', { stream }), 'alpha/gen-5.5'],
      ['Responses', '/v1/responses', (stream) => ({ model: 'gen-5.5', input: 'Count me', stream }), 'alpha/gen-5.5'],
      ['Messages', '/v1/messages', (stream) => messages('beta-opus-4-8', { stream }), 'beta/beta-opus-4-8'],
    ];
    for (const [name, path, body, model] of cases) {
      for (const stream of [false, true]) {
        it(`records exactly what the upstream reported: ${name} ${stream ? 'stream' : 'JSON'}`, async () => {
          expect((await post(test, path, body(stream))).status).to.equal(200);
          const reported = sumReported(test);
          expect(reported.requests).to.equal(1);
          expect(await usageRows(test)).to.deep.equal([
            {
              model,
              requests: 1,
              input_tokens: reported.inputTokens,
              output_tokens: reported.outputTokens,
              cached_tokens: 3,
              total_tokens: reported.inputTokens + reported.outputTokens,
              charged_tokens: reported.inputTokens - 3 + reported.outputTokens + 1,
              cost_usd: (await usageRows(test))[0]!.cost_usd,
              cache_hits: 0,
              saved_usd: 0,
            },
          ]);
          expect((await usageRows(test))[0]!.cost_usd).to.be.greaterThan(0);
        });
      }
    }

    it('aggregates an alias and its concrete ID, native and prefixed Responses IDs, as one model each', async () => {
      await post(test, '/v1/chat/completions', chat('alpha-latest'));
      await post(test, '/v1/chat/completions', chat('alpha/gen-6-astra', { stream: true }));
      await post(test, '/v1/responses', { model: 'gen-6-astra', input: 'x' });
      await post(test, '/v1/responses', { model: 'alpha-latest', input: 'x', stream: true });
      await post(test, '/v1/messages', messages('beta-latest'));
      await post(test, '/v1/messages', messages('beta-fable-5-1', { stream: true }));
      await post(test, '/v1/chat/completions', chat('beta/beta-fable-5-1'));
      const rows = await usageRows(test);
      expect(rows.map((row) => [row.model, row.requests])).to.deep.equal([
        ['alpha/gen-6-astra', 4],
        ['beta/beta-fable-5-1', 3],
      ]);
      const reported = sumReported(test);
      expect(rows.reduce((sum, row) => sum + row.output_tokens, 0)).to.equal(reported.outputTokens);
      expect(rows.reduce((sum, row) => sum + row.input_tokens, 0)).to.equal(reported.inputTokens);
    });

    it("takes the gamma upstream's last running total instead of summing its chunks", async () => {
      await post(test, '/v1/chat/completions', chat('gamma-latest', { stream: true, mock_profile: 'running-usage' }));
      const [row] = await usageRows(test);
      expect(row!.output_tokens).to.equal(sumReported(test).outputTokens);
    });

    it('records upstream errors and count_tokens with zero tokens, and estimates a stream that broke off', async () => {
      test.upstreams.delta.enqueue({ kind: 'status', status: 500 });
      expect((await post(test, '/v1/chat/completions', chat('delta/delta-4.7'))).status).to.equal(500);
      await post(test, '/v1/messages/count_tokens', {
        model: 'beta-latest',
        messages: [{ role: 'user', content: 'x' }],
      });
      test.upstreams.zeta.enqueue({ kind: 'drop-mid-stream', afterEvents: 2 });
      await post(test, '/v1/chat/completions', chat('zeta/zeta-k3', { stream: true })).catch(() => undefined);
      const rows = await usageRows(test);
      const byModel = Object.fromEntries(rows.map((row) => [row.model, row]));
      expect(byModel['delta/delta-4.7']).to.deep.include({ requests: 1, input_tokens: 0, output_tokens: 0 });
      expect(byModel['beta/beta-fable-5-1']).to.deep.include({ requests: 1, input_tokens: 0, output_tokens: 0 });
      expect(byModel['zeta/zeta-k3']!.input_tokens).to.be.greaterThan(0);
      expect(byModel['zeta/zeta-k3']!.output_tokens).to.be.greaterThan(0);
    });

    it('answers 502 for a Chat Completions answer without usage, and records it', async () => {
      test.upstreams.alpha.enqueue({ kind: 'no-usage' });
      const response = await post(test, '/v1/chat/completions', chat('alpha-latest'));
      expect(response.status).to.equal(502);
      expect(JSON.parse(response.text).detail).to.contain('usage metadata');
    });

    it('groups by day and refuses a bad query with a 400 listing every field', async () => {
      await post(test, '/v1/chat/completions', chat('zeta/zeta-k3'));
      const today = new Date().toISOString().slice(0, 10);
      expect(
        (await usageRows(test, `?group_by=day&from=${today}&to=${today}`)).map((row) => [row.day, row.requests]),
      ).to.deep.equal([[today, 1]]);
      expect(await usageRows(test, '?to=2000-01-01')).to.deep.equal([]);
      const bad = await request(`${test.url}/v1/usage?group_by=week&from=yesterday&x=1`, { headers: auth });
      expect(bad.statusCode).to.equal(400);
      expect(((await bad.body.json()) as { errors: string[] }).errors).to.have.members([
        "Field 'query.x': is not a parameter of this route",
      ]);
      const invalid = await request(`${test.url}/v1/usage?group_by=week&from=yesterday`, { headers: auth });
      expect(((await invalid.body.json()) as { errors: string[] }).errors).to.have.members([
        "Field 'query.from': must be an ISO date (YYYY-MM-DD) or date-time",
        "Field 'query.group_by': must be 'model' or 'day'",
      ]);
    });

    it("shows every key's usage, or one key's, on the admin API only", async () => {
      const { key, record } = await test.gateway.keys.create({ name: 'other' });
      await post(test, '/v1/chat/completions', chat('zeta/zeta-k3'));
      await post(test, '/v1/chat/completions', chat('delta/delta-4.5'), { authorization: `Bearer ${key}` });
      await test.gateway.flushUsage();
      const admin = async (query: string) => {
        const response = await request(`${test.url}/admin/usage${query}`, {
          headers: { authorization: 'Bearer admin-token-0001-0123456789abcdef' },
        });
        return ((await response.body.json()) as { data: Record<string, any>[] }).data.map((row) => [
          row.model,
          row.requests,
        ]);
      };
      expect(await admin('')).to.deep.equal([
        ['delta/delta-4.5', 1],
        ['zeta/zeta-k3', 1],
      ]);
      expect(await admin(`?key_id=${record.id}`)).to.deep.equal([['delta/delta-4.5', 1]]);
      expect((await usageRows(test)).map((row) => row.model)).to.deep.equal(['zeta/zeta-k3']);
      expect((await request(`${test.url}/admin/usage`, { headers: auth })).statusCode).to.equal(401);
    });

    it('refuses a key over its daily quota with 429 before dispatch', async () => {
      // Room for the first request's whole reservation (24 characters / 4 + 8 = 14 input, 6 output), not for a second
      // one.
      const { key } = await test.gateway.keys.create({ name: 'quota', quota: { daily: 20 } });
      const headers = { authorization: `Bearer ${key}` };
      expect(
        (await post(test, '/v1/chat/completions', chat('zeta/zeta-k3', { max_tokens: 6 }), headers)).status,
      ).to.equal(200);
      await test.gateway.flushUsage();
      const refused = await post(test, '/v1/chat/completions', chat('zeta/zeta-k3', { max_tokens: 6 }), headers);
      expect(refused.status).to.equal(429);
      expect(JSON.parse(refused.text).detail).to.match(
        /^Quota exceeded: \d+ of 20 charged tokens used today \(UTC\), this request reserves 20$/,
      );
      expect(test.upstreams.zeta.requests).to.have.length(1);
    });
  });
}

describe('usage through gateway restarts and Redis outages', function () {
  this.timeout(120_000);

  it('keeps every total across a gateway restart with the embedded store', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'usage-restart-'));
    try {
      const first = await startTestGateway({ dataDir });
      for (let index = 0; index < 5; index += 1)
        await post(first, '/v1/chat/completions', chat('delta/delta-4.6', { stream: index % 2 === 0 }));
      const reported = sumReported(first);
      await first.close();
      const second = await startTestGateway({ dataDir });
      const [row] = await usageRows(second);
      expect(row).to.deep.include({
        model: 'delta/delta-4.6',
        requests: 5,
        input_tokens: reported.inputTokens,
        output_tokens: reported.outputTokens,
      });
      await second.close();
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });

  it('under load, with redis-server killed and restarted mid-run, totals equal what the upstreams reported', async () => {
    const redis = await TestRedisServer.start({ args: ['--appendonly', 'yes', '--appendfsync', 'always'] });
    const test = await startTestGateway({
      env: { REDIS_URL: redis.url, RATE_LIMIT_MAX: '100000' },
      mock: { chunkDelayMs: 3 },
    });
    try {
      const models = ['alpha-latest', 'beta/beta-sonnet-4-6', 'gamma/gamma-3.8-flash', 'epsilon/epsilon-5.3-flash'];
      let sent = 0;
      let running = true;
      const worker = async () => {
        for (let index = 0; running; index += 1) {
          const model = models[(sent += 1) % models.length]!;
          const response = await post(test, '/v1/chat/completions', chat(model, { stream: index % 2 === 1 }));
          expect(response.status).to.equal(200);
        }
      };
      const load = Promise.all(Array.from({ length: 8 }, worker));
      const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
      await pause(300);
      const sentBeforeKill = sent;
      await redis.stop();
      await pause(500);
      const sentDuringOutage = sent - sentBeforeKill;
      await redis.restart();
      await pause(300);
      running = false;
      await load;
      // The kill really fell mid-run: requests were answered before, during and after it.
      expect(sentBeforeKill).to.be.greaterThan(0);
      expect(sentDuringOutage).to.be.greaterThan(0);
      expect(sent - sentBeforeKill - sentDuringOutage).to.be.greaterThan(0);
      const reported = sumReported(test);
      expect(reported.requests).to.equal(sent);
      let rows: Record<string, any>[] = [];
      const deadline = Date.now() + 20_000;
      do {
        await new Promise((resolve) => setTimeout(resolve, 100));
        rows = await usageRows(test).catch(() => []);
      } while (rows.reduce((sum, row) => sum + row.requests, 0) < sent && Date.now() < deadline);
      expect(rows.reduce((sum, row) => sum + row.requests, 0)).to.equal(sent);
      expect(rows.reduce((sum, row) => sum + row.input_tokens, 0)).to.equal(reported.inputTokens);
      expect(rows.reduce((sum, row) => sum + row.output_tokens, 0)).to.equal(reported.outputTokens);
    } finally {
      await test.close();
      await redis.close();
    }
  });
});
