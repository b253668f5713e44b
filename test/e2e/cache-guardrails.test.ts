import { expect } from 'chai';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { TestRedisServer } from '../helpers/redis-server.ts';
import { startTestGateway, TEST_KEY, type TestGateway } from '../helpers/test-gateway.ts';

/** A moderation webhook on 127.0.0.1 whose verdict the test sets: `allow`, `block`, or `down` (it answers 500). */
class Moderation {
  verdict: 'allow' | 'block' | 'down' = 'allow';
  asked = 0;
  private constructor(private readonly server: Server) {}

  static async start(): Promise<Moderation> {
    let moderation!: Moderation;
    const server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        moderation.asked += 1;
        if (moderation.verdict === 'down') return void res.writeHead(500).end();
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ action: moderation.verdict }));
      });
    });
    moderation = new Moderation(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return moderation;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/check`;
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

const body = (stream: boolean) => ({
  model: 'alpha-latest',
  messages: [{ role: 'user', content: 'Tell me the plan.' }],
  stream,
});

for (const store of ['embedded', 'redis'] as const) {
  describe(`the response cache keeps only answers every guardrail passed (${store} store)`, function () {
    this.timeout(60_000);
    let redis: TestRedisServer | undefined;
    let moderation: Moderation;
    let dir: string;
    let test: TestGateway;

    const ask = async (stream: boolean, headers: Record<string, string> = {}) => {
      const response = await request(`${test.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json', ...headers },
        body: JSON.stringify(body(stream)),
      });
      return {
        status: response.statusCode,
        cache: response.headers['x-gateway-cache'],
        text: await response.body.text(),
      };
    };

    beforeEach(async () => {
      redis = store === 'redis' ? await TestRedisServer.start() : undefined;
      moderation = await Moderation.start();
      dir = await mkdtemp(join(tmpdir(), 'gateway-cache-guardrails-'));
      const config = join(dir, 'gateway.yaml');
      await writeFile(
        config,
        `cache:\n  ttlSeconds: 60\nguardrails:\n  - { name: moderation, use: webhook, on: response, url: '${moderation.url}', timeoutMs: 500, failMode: open }\n`,
      );
      test = await startTestGateway({ configFile: config, env: redis ? { REDIS_URL: redis.url } : {} });
    });
    afterEach(async () => {
      await test.close();
      await moderation.close();
      await redis?.close();
      await rm(dir, { recursive: true, force: true });
    });

    for (const stream of [false, true]) {
      it(`never stores an answer a webhook that did not answer let through unchecked (${stream ? 'stream' : 'JSON'})`, async () => {
        moderation.verdict = 'down';
        const first = await ask(stream);
        expect(first.status).to.equal(200);
        expect(first.cache).to.equal('miss');
        moderation.verdict = 'block';
        const second = await ask(stream);
        expect(second.cache, 'nothing was stored: the request went upstream again').to.equal('miss');
        expect(
          second.status === 400 || second.text.includes('GW_ERR_GUARDRAIL'),
          'the webhook, up again, blocked it',
        ).to.equal(true);
        expect(test.upstreams.alpha.requests).to.have.length(2);
      });

      it(`drops the stored answer when a no-cache refresh of it is blocked (${stream ? 'stream' : 'JSON'})`, async () => {
        const first = await ask(stream);
        expect(first.cache).to.equal('miss');
        expect((await ask(stream)).cache).to.equal('hit');
        moderation.verdict = 'block';
        const refreshed = await ask(stream, { 'cache-control': 'no-cache' });
        expect(refreshed.cache).to.equal('bypass');
        expect(refreshed.status === 400 || refreshed.text.includes('GW_ERR_GUARDRAIL')).to.equal(true);
        moderation.verdict = 'allow';
        const after = await ask(stream);
        expect(after.cache, 'the entry the refresh found blocked is gone').to.equal('miss');
      });
    }
  });
}
