import { expect } from 'chai';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ServerResponse } from 'node:http';
import { request } from 'undici';
import { ScriptedUpstream } from '../helpers/scripted-upstream.ts';
import { TestRedisServer } from '../helpers/redis-server.ts';
import { startTestGateway, type TestGateway } from '../helpers/test-gateway.ts';

const ADMIN = 'admin-token-for-budget-bound-tests-0001';
const BURST = 30;
/** What a provider bills at most for one image at the sizes it accepts (reservations assume the same). */
const IMAGE_PART_TOKENS = 1600;

interface ChatBody {
  readonly messages: { content: string | { type: string; text?: string }[] }[];
  readonly max_tokens?: number;
  readonly n?: number;
}

/**
 * What a provider bills at most for a Chat Completions request, as a real one may: the prompt at four
 * characters a token plus framing, each image at the figure reservations assume, and every answer (`n`)
 * written to its cap, or to the model's most (32,768) when none is sent.
 */
function mostBilled(body: ChatBody): { prompt: number; completion: number } {
  let chars = 0;
  let images = 0;
  for (const message of body.messages) {
    if (typeof message.content === 'string') chars += message.content.length;
    else for (const part of message.content) part.type === 'text' ? (chars += part.text!.length) : (images += 1);
  }
  return {
    prompt: Math.ceil(chars / 4) + 8 + images * IMAGE_PART_TOKENS,
    completion: (body.max_tokens ?? 32_768) * (body.n ?? 1),
  };
}

/** Answers every request after a pause (so a burst overlaps), billing the most a provider may. */
function billingUpstream(upstream: ScriptedUpstream, state: { failing: boolean }): void {
  upstream.script = async (_req, res: ServerResponse, text) => {
    await new Promise((resolve) => setTimeout(resolve, 200));
    if (state.failing)
      return void res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":{"message":"down"}}');
    const body = JSON.parse(text) as ChatBody & { model: string };
    const { prompt, completion } = mostBilled(body);
    const choices = Array.from({ length: body.n ?? 1 }, (_, index) => ({
      index,
      message: { role: 'assistant', content: 'ok' },
      finish_reason: 'length',
    }));
    res
      .writeHead(200, { 'content-type': 'application/json' })
      .end(
        JSON.stringify({
          id: 'x',
          object: 'chat.completion',
          model: body.model,
          choices,
          usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion },
        }),
      );
  };
}

for (const store of ['embedded', 'redis'] as const) {
  describe(`budgets: a reservation bounds what a burst is charged (${store} store)`, function () {
    this.timeout(120_000);
    let redis: TestRedisServer | undefined;
    let zeta: ScriptedUpstream;
    let gamma: ScriptedUpstream;
    let test: TestGateway;
    let dir: string;
    const zetaState = { failing: false };

    before(async () => {
      if (store === 'redis') redis = await TestRedisServer.start();
      zeta = await ScriptedUpstream.start();
      gamma = await ScriptedUpstream.start();
      billingUpstream(zeta, zetaState);
      billingUpstream(gamma, { failing: false });
      dir = await mkdtemp(join(tmpdir(), 'gateway-bounds-'));
      const configFile = join(dir, 'gateway.yaml');
      // The fallback costs more than the model asked for: 2 and 12 USD per million against 0.65 and 2.7.
      await writeFile(configFile, 'fallbacks:\n  zeta/zeta-k3: [gamma/gamma-3.1-pro-preview]\n');
      test = await startTestGateway({
        configFile,
        env: {
          GATEWAY_ADMIN_TOKEN: ADMIN,
          ZETA_BASE_URL: zeta.url,
          ZETA_API_KEY: 'k',
          GAMMA_BASE_URL: gamma.url,
          GAMMA_API_KEY: 'k',
          LOG_LEVEL: 'silent',
          ...(redis && { REDIS_URL: redis.url }),
        },
      });
    });
    after(async () => {
      await test.close();
      await zeta.close();
      await gamma.close();
      await redis?.close();
      await rm(dir, { recursive: true, force: true });
    });

    /**
     * Sends BURST copies of a request at once with a fresh key of these limits; gives its statuses and what the key was
     * charged.
     */
    async function burst(limits: Record<string, unknown>, body: Record<string, unknown>) {
      const { key, record } = await test.gateway.keys.create({ name: 'burst', rpm: 1000, ...limits });
      const statuses = await Promise.all(
        Array.from({ length: BURST }, async () => {
          const answer = await request(`${test.url}/v1/chat/completions`, {
            method: 'POST',
            headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
            body: JSON.stringify({ model: 'zeta/zeta-k3', ...body }),
          });
          await answer.body.dump();
          return answer.statusCode;
        }),
      );
      await test.gateway.flushUsage();
      const usage = await request(`${test.url}/admin/usage?key_id=${record.id}`, {
        headers: { authorization: `Bearer ${ADMIN}` },
      });
      const rows = (
        (await usage.body.json()) as { data: { requests: number; charged_tokens: number; cost_usd: number }[] }
      ).data;
      const charged = rows.reduce((sum, row) => sum + row.charged_tokens, 0);
      const cost = rows.reduce((sum, row) => sum + row.cost_usd, 0);
      const served = statuses.filter((status) => status === 200).length;
      expect(
        statuses.every((status) => status === 200 || status === 429),
        statuses.join(),
      ).to.equal(true);
      expect(served, 'some of the burst is served').to.be.at.least(1);
      return { served, charged, cost };
    }

    it('n = 10: ten answers each up to the cap are reserved, so a daily quota holds', async () => {
      const quota = 20_000;
      const { charged } = await burst(
        { quota: { daily: quota } },
        { n: 10, max_tokens: 500, messages: [{ role: 'user', content: 'Write ten haiku' }] },
      );
      expect(charged).to.be.at.most(quota);
    });

    it('images: each image part reserves its figure whatever its URL, so a daily quota holds', async () => {
      const quota = 30_000;
      const image = { type: 'image_url', image_url: { url: 'https://images.example/cat.png' } };
      const { charged } = await burst(
        { quota: { daily: quota } },
        {
          max_tokens: 50,
          messages: [{ role: 'user', content: [{ type: 'text', text: 'Describe these' }, image, image, image] }],
        },
      );
      expect(charged).to.be.at.most(quota);
    });

    it("no cap sent: the model's most output is reserved, so a money budget holds", async () => {
      const budget = 0.5;
      const { cost } = await burst(
        { budget: { daily_usd: budget } },
        { messages: [{ role: 'user', content: 'Tell me everything' }] },
      );
      expect(cost).to.be.at.most(budget);
    });

    it('a fallback to a pricier model: the highest price of the chain is reserved, so a money budget holds', async () => {
      zetaState.failing = true;
      try {
        const budget = 0.05;
        const { cost } = await burst(
          { budget: { daily_usd: budget } },
          { max_tokens: 1000, messages: [{ role: 'user', content: 'Fall back, please' }] },
        );
        expect(cost).to.be.at.most(budget);
      } finally {
        zetaState.failing = false;
      }
    });

    it("refuses what it cannot bound from a key with limits (prior context, background), and an output cap beyond the model's, naming the field", async () => {
      const { key } = await test.gateway.keys.create({ name: 'bounded', budget: { daily_usd: 1 } });
      const post = async (path: string, body: Record<string, unknown>, bearer = key) => {
        const answer = await request(`${test.url}${path}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
        return {
          status: answer.statusCode,
          body: (await answer.body.json()) as { error: { param: string | null; message: string } },
        };
      };
      for (const field of [{ previous_response_id: 'resp_123' }, { background: true }]) {
        const refused = await post('/v1/responses', { model: 'alpha/gen-5.5', input: 'go on', ...field });
        expect(refused.status).to.equal(400);
        expect(refused.body.error.param).to.equal(Object.keys(field)[0]);
      }
      for (const max_tokens of [32_769, 1e308, 9007199254740993]) {
        const refused = await post('/v1/chat/completions', {
          model: 'zeta/zeta-k3',
          max_tokens,
          messages: [{ role: 'user', content: 'x' }],
        });
        expect(refused.status, String(max_tokens)).to.equal(400);
        expect(refused.body.error.param).to.equal('max_tokens');
      }
      // 1e999 reads as Infinity: sent as the literal, as a client's own JSON may spell it.
      const tooBig = await request(`${test.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: '{"model":"zeta/zeta-k3","max_tokens":1e999,"messages":[{"role":"user","content":"x"}]}',
      });
      expect(tooBig.statusCode).to.equal(400);
      expect(((await tooBig.body.json()) as { error: { param: string } }).error.param).to.equal('max_tokens');
    });
  });
}
