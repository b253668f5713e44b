import { expect } from 'chai';
import { Redis } from 'ioredis';
import { request } from 'undici';
import { TestRedisServer } from '../helpers/redis-server.ts';
import { ScriptedUpstream } from '../helpers/scripted-upstream.ts';
import { startTestGateway, TEST_KEY, type TestGateway } from '../helpers/test-gateway.ts';

const ADMIN = 'admin-token-0001-0123456789abcdef';
const auth = (key = TEST_KEY) => ({ authorization: `Bearer ${key}` });

interface Answer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly bytes: Buffer;
}

async function post(
  test: TestGateway,
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<Answer> {
  const response = await request(`${test.url}${path}`, {
    method: 'POST',
    headers: { ...auth(), 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return {
    status: response.statusCode,
    headers: response.headers,
    bytes: Buffer.from(await response.body.arrayBuffer()),
  };
}

async function usageRows(test: TestGateway, key = TEST_KEY) {
  await test.gateway.flushUsage();
  const response = await request(`${test.url}/v1/usage`, { headers: auth(key) });
  return ((await response.body.json()) as { data: Record<string, number | string>[] }).data;
}

async function newKey(test: TestGateway, fields: Record<string, unknown> = {}): Promise<{ key: string; id: string }> {
  const response = await request(`${test.url}/admin/keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: `cache-${Math.random()}`, ...fields }),
  });
  expect(response.statusCode).to.equal(201);
  return (await response.body.json()) as { key: string; id: string };
}

const chat = (extra: Record<string, unknown> = {}) => ({
  model: 'alpha-latest',
  messages: [{ role: 'user', content: 'Say something worth keeping.' }],
  ...extra,
});
const CASES: readonly [string, string, (stream: boolean) => unknown, 'alpha' | 'beta'][] = [
  ['Chat Completions', '/v1/chat/completions', (stream) => chat({ stream }), 'alpha'],
  [
    'Messages',
    '/v1/messages',
    (stream) => ({ model: 'beta-latest', max_tokens: 64, messages: [{ role: 'user', content: 'Keep me' }], stream }),
    'beta',
  ],
  ['Responses', '/v1/responses', (stream) => ({ model: 'alpha-latest', input: 'Keep me too', stream }), 'alpha'],
];

for (const store of ['embedded', 'redis'] as const) {
  describe(`response cache end to end (${store} store)`, function () {
    this.timeout(60_000);
    let redis: TestRedisServer | undefined;
    let test: TestGateway;
    const start = (env: NodeJS.ProcessEnv = {}) =>
      startTestGateway({
        env: {
          GATEWAY_ADMIN_TOKEN: ADMIN,
          GATEWAY_CACHE_TTL_S: '60',
          ...(redis ? { REDIS_URL: redis.url } : {}),
          ...env,
        },
      });

    beforeEach(async () => {
      redis = store === 'redis' ? await TestRedisServer.start() : undefined;
      test = await start();
    });
    afterEach(async () => {
      await test.close();
      await redis?.close();
    });

    for (const [name, path, body, vendor] of CASES) {
      for (const stream of [false, true]) {
        it(`answers a repeated ${name} ${stream ? 'stream' : 'JSON'} request from the cache, byte for byte, and the upstream sees one`, async () => {
          const first = await post(test, path, body(stream));
          expect(first.status).to.equal(200);
          expect(first.headers['x-gateway-cache']).to.equal('miss');
          const second = await post(test, path, body(stream));
          expect(second.status).to.equal(200);
          expect(second.headers['x-gateway-cache']).to.equal('hit');
          expect(second.headers.age).to.match(/^\d+$/);
          expect(second.headers['content-type']).to.equal(first.headers['content-type']);
          expect(second.bytes.equals(first.bytes)).to.equal(true);
          expect(test.upstreams[vendor].requests).to.have.length(1);
        });
      }
    }

    it('records a hit as one more request with the stored tokens, at no cost, and what it saved', async () => {
      await post(test, '/v1/chat/completions', chat());
      const [once] = await usageRows(test);
      await post(test, '/v1/chat/completions', chat());
      const [twice] = await usageRows(test);
      expect(twice).to.deep.include({
        requests: 2,
        input_tokens: 2 * Number(once!.input_tokens),
        output_tokens: 2 * Number(once!.output_tokens),
        charged_tokens: once!.charged_tokens,
        cost_usd: once!.cost_usd,
        cache_hits: 1,
        saved_usd: once!.cost_usd,
      });
      expect(Number(once!.cost_usd)).to.be.greaterThan(0);
      const metrics = await (await request(`${test.url}/metrics`)).body.text();
      expect(metrics).to.match(/^gateway_cache_requests_total\{result="hit"\} 1$/m);
      expect(metrics).to.match(/^gateway_cache_requests_total\{result="miss"\} 1$/m);
      expect(metrics).to.match(/^gateway_cache_saved_usd_total [0-9.e-]+$/m);
    });

    it('takes nothing of tpm or budget for a hit, but counts it against rpm', async () => {
      const { key, id } = await newKey(test, { tpm: 1_000_000, budget: { daily_usd: 100 }, rpm: 50 });
      const first = await post(test, '/v1/chat/completions', chat(), auth(key));
      expect(first.headers['x-gateway-cache']).to.equal('miss');
      const limits = async () => {
        await test.gateway.flushUsage();
        const view = (await (
          await request(`${test.url}/admin/limits`, { headers: { authorization: `Bearer ${ADMIN}` } })
        ).body.json()) as { keys: { id: string; use: { kind: string; period: string; used: number }[] }[] };
        return view.keys.find((entry) => entry.id === id)!.use;
      };
      await waitForSettled(limits);
      const before = await limits();
      const second = await post(test, '/v1/chat/completions', chat(), auth(key));
      expect(second.headers['x-gateway-cache']).to.equal('hit');
      const after = await limits();
      for (const kind of ['tpm', 'budget']) {
        expect(after.find((use) => use.kind === kind)!.used, kind).to.equal(
          before.find((use) => use.kind === kind)!.used,
        );
      }
      expect(after.find((use) => use.kind === 'tpm')!.used).to.be.greaterThan(0);
      // The draft-8 header of the key's request limit: 50 - 2 requests.
      expect(second.headers.ratelimit).to.match(/r=48;/);
    });

    it('never shares an entry across tenants: another key misses', async () => {
      await post(test, '/v1/chat/completions', chat());
      const other = await newKey(test);
      const answer = await post(test, '/v1/chat/completions', chat(), auth(other.key));
      expect(answer.headers['x-gateway-cache']).to.equal('miss');
      expect(test.upstreams.alpha.requests).to.have.length(2);
    });

    it('misses when one field of the body differs, or one forwarded header does', async () => {
      await post(test, '/v1/messages', {
        model: 'beta-latest',
        max_tokens: 64,
        messages: [{ role: 'user', content: 'Keep me' }],
      });
      const changed = await post(test, '/v1/messages', {
        model: 'beta-latest',
        max_tokens: 65,
        messages: [{ role: 'user', content: 'Keep me' }],
      });
      expect(changed.headers['x-gateway-cache']).to.equal('miss');
      const otherVersion = await post(
        test,
        '/v1/messages',
        { model: 'beta-latest', max_tokens: 64, messages: [{ role: 'user', content: 'Keep me' }] },
        { 'anthropic-beta': 'some-feature-2026-01-01' },
      );
      expect(otherVersion.headers['x-gateway-cache']).to.equal('miss');
      expect(test.upstreams.beta.requests).to.have.length(3);
    });

    it('resolves aliases first: an alias and its concrete model share an entry', async () => {
      await post(test, '/v1/chat/completions', chat());
      const concrete = test.upstreams.alpha.requests[0]!.body.model as string;
      const answer = await post(test, '/v1/chat/completions', chat({ model: `alpha/${concrete}` }));
      expect(answer.headers['x-gateway-cache']).to.equal('hit');
    });

    it('goes upstream for Cache-Control: no-cache and stores the fresh answer; no-store neither reads nor writes', async () => {
      const first = await post(test, '/v1/chat/completions', chat());
      const refreshed = await post(test, '/v1/chat/completions', chat(), { 'cache-control': 'no-cache' });
      expect(refreshed.headers['x-gateway-cache']).to.equal('bypass');
      expect(test.upstreams.alpha.requests).to.have.length(2);
      const after = await post(test, '/v1/chat/completions', chat());
      expect(after.headers['x-gateway-cache']).to.equal('hit');
      expect(after.bytes.equals(refreshed.bytes)).to.equal(true);
      expect(first.status).to.equal(200);

      const unstored = chat({ temperature: 0.5 });
      const skipped = await post(test, '/v1/chat/completions', unstored, { 'cache-control': 'no-store' });
      expect(skipped.headers['x-gateway-cache']).to.equal('bypass');
      const next = await post(test, '/v1/chat/completions', unstored);
      expect(next.headers['x-gateway-cache']).to.equal('miss');
      expect(test.upstreams.alpha.requests).to.have.length(4);
    });

    it('stores no upstream error, no in-band error and no stream that broke off', async () => {
      const twice = async (body: unknown, enqueue: () => void) => {
        enqueue();
        await post(test, '/v1/chat/completions', body).catch(() => undefined);
        const again = await post(test, '/v1/chat/completions', body);
        expect(again.headers['x-gateway-cache'], JSON.stringify(body)).to.equal('miss');
      };
      await twice(chat({ seed: 1 }), () => test.upstreams.alpha.enqueue({ kind: 'status', status: 500 }));
      await twice(chat({ seed: 2 }), () =>
        test.upstreams.alpha.enqueue({
          kind: 'status',
          status: 200,
          body: { error: { message: 'overloaded', type: 'server_error' } },
        }),
      );
      await twice(chat({ seed: 3, stream: true }), () =>
        test.upstreams.alpha.enqueue({ kind: 'drop-mid-stream', afterEvents: 2 }),
      );
      expect(test.upstreams.alpha.requests).to.have.length(6);
    });

    it('never stores count_tokens answers and says nothing of the cache there', async () => {
      const body = { model: 'beta-latest', messages: [{ role: 'user', content: 'x' }] };
      await post(test, '/v1/messages/count_tokens', body);
      const again = await post(test, '/v1/messages/count_tokens', body);
      expect(again.headers['x-gateway-cache']).to.equal(undefined);
      expect(test.upstreams.beta.requests).to.have.length(2);
    });

    it('bypasses the cache for a key with cache: false', async () => {
      const { key } = await newKey(test, { cache: false });
      await post(test, '/v1/chat/completions', chat(), auth(key));
      const again = await post(test, '/v1/chat/completions', chat(), auth(key));
      expect(again.headers['x-gateway-cache']).to.equal('bypass');
      expect(test.upstreams.alpha.requests).to.have.length(2);
    });

    describe('with other settings', () => {
      let other: TestGateway | undefined;
      afterEach(async () => {
        await other?.close();
        other = undefined;
      });

      it('stores no stream that ended without its terminal event, nor one that carried an error event', async () => {
        const upstream = await ScriptedUpstream.start();
        try {
          other = await start({ ALPHA_BASE_URL: upstream.url });
          const chunk = (content: string) =>
            `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gen-5.5","choices":[{"index":0,"delta":{"content":"${content}"},"finish_reason":null}]}\n\n`;
          const usage =
            'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gen-5.5","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}\n\n';
          const streams: Record<string, string> = {
            // Ends cleanly, usage and all, but never says [DONE].
            unterminated: chunk('Hel') + chunk('lo') + usage,
            erred:
              chunk('Hel') +
              'data: {"error":{"message":"overloaded","type":"server_error"}}\n\n' +
              usage +
              'data: [DONE]\n\n',
            whole: chunk('Hel') + chunk('lo') + usage + 'data: [DONE]\n\n',
          };
          upstream.script = (_req, res, body) => {
            res.writeHead(200, { 'content-type': 'text/event-stream' });
            res.end(streams[(JSON.parse(body) as { user: string }).user]);
          };
          for (const [name, expected] of [
            ['unterminated', 'miss'],
            ['erred', 'miss'],
            ['whole', 'hit'],
          ] as const) {
            const body = chat({ stream: true, user: name });
            const first = await post(other, '/v1/chat/completions', body);
            expect(first.status, name).to.equal(200);
            expect((await post(other, '/v1/chat/completions', body)).headers['x-gateway-cache'], name).to.equal(
              expected,
            );
          }
          expect(upstream.requests).to.have.length(5);
        } finally {
          await upstream.close();
        }
      });

      it('stores no answer over cache.maxEntryBytes', async () => {
        other = await start({ GATEWAY_CACHE_MAX_ENTRY_BYTES: '64' });
        await post(other, '/v1/chat/completions', chat());
        const again = await post(other, '/v1/chat/completions', chat());
        expect(again.bytes.length).to.be.greaterThan(64);
        expect(again.headers['x-gateway-cache']).to.equal('miss');
        expect(other.upstreams.alpha.requests).to.have.length(2);
      });

      it('lets an entry expire after its TTL', async () => {
        other = await start({ GATEWAY_CACHE_TTL_S: '1' });
        await post(other, '/v1/chat/completions', chat());
        expect((await post(other, '/v1/chat/completions', chat())).headers['x-gateway-cache']).to.equal('hit');
        await new Promise((resolve) => setTimeout(resolve, 1100));
        expect((await post(other, '/v1/chat/completions', chat())).headers['x-gateway-cache']).to.equal('miss');
        expect(other.upstreams.alpha.requests).to.have.length(2);
      });

      it('says nothing of a cache that is not configured', async () => {
        other = await start({ GATEWAY_CACHE_TTL_S: '0' });
        await post(other, '/v1/chat/completions', chat());
        const again = await post(other, '/v1/chat/completions', chat());
        expect(again.headers['x-gateway-cache']).to.equal(undefined);
        expect(other.upstreams.alpha.requests).to.have.length(2);
      });

      if (store === 'redis') {
        it('serves an entry stored through one instance from a second instance on the same Redis', async () => {
          other = await start();
          const first = await post(test, '/v1/chat/completions', chat({ stream: true }));
          expect(first.headers['x-gateway-cache']).to.equal('miss');
          // The write is not awaited by the first request: wait until it landed, then ask the second instance once.
          const client = new Redis(redis!.url);
          try {
            for (let tries = 0; tries < 100 && (await client.keys('gw-cache:*')).length === 0; tries++)
              await new Promise((resolve) => setTimeout(resolve, 20));
          } finally {
            client.disconnect();
          }
          const answer = await post(other, '/v1/chat/completions', chat({ stream: true }));
          expect(answer.headers['x-gateway-cache']).to.equal('hit');
          expect(answer.bytes.equals(first.bytes)).to.equal(true);
          expect(other.upstreams.alpha.requests).to.have.length(0);
          expect(test.upstreams.alpha.requests).to.have.length(1);
        });
      }
    });
  });
}

/** Waits until a request's reservation is settled to its usage (the limits view stops changing). */
async function waitForSettled(read: () => Promise<{ kind: string; used: number }[]>): Promise<void> {
  let last = JSON.stringify(await read());
  for (let tries = 0; tries < 50; tries++) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    const now = JSON.stringify(await read());
    if (now === last) return;
    last = now;
  }
}
