import { expect } from 'chai';
import OpenAI from 'openai';
import type { ServerResponse } from 'node:http';
import { request } from 'undici';
import { ScriptedUpstream } from '../helpers/scripted-upstream.ts';
import { TestRedisServer } from '../helpers/redis-server.ts';
import { startTestGateway, type TestGateway } from '../helpers/test-gateway.ts';
import { endUserHolders, endUserMeters } from '../../src/usage/limit-meters.ts';
import { demandsFor, estimateRequest } from '../../src/usage/reservation.ts';
import { promptCharacters } from '../../src/usage/token-estimate.ts';

const ADMIN = 'admin-token-for-end-user-tests-0001';
/** zeta/zeta-k3's prices (USD per million input and output tokens), as its plugin declares them. */
const ZETA_PRICING = { input: 0.65, cachedInput: 0.065, output: 2.7 };
const END_USERS = 10;
const EACH = 3;

type ChatBody = {
  readonly model: string;
  readonly messages: { role: 'user'; content: string }[];
  readonly max_tokens: number;
};

/** What one request reserves on a money budget, in nano-USD: its estimate at the model's prices. */
function reservationOf(body: ChatBody): number {
  const meter = {
    counter: 'x',
    limit: Number.MAX_SAFE_INTEGER,
    kind: 'budget',
    scope: 'end_user',
    owner: 'x',
    period: 'day',
    resetAt: Date.now() + 1000,
  } as const;
  return demandsFor([meter], estimateRequest(promptCharacters(body), body.max_tokens), ZETA_PRICING)[0]!.want;
}

/**
 * Answers every request after a pause (so the burst overlaps on every instance), billing what the
 * gateway reserved for it: the prompt at its estimate and the output at its cap, the most a request may
 * cost within the documented bound.
 */
function billingUpstream(upstream: ScriptedUpstream): void {
  upstream.script = async (_req, res: ServerResponse, text) => {
    await new Promise((resolve) => setTimeout(resolve, 300));
    const body = JSON.parse(text) as ChatBody;
    const prompt = estimateRequest(promptCharacters(body), body.max_tokens).inputTokens;
    const usage = { prompt_tokens: prompt, completion_tokens: body.max_tokens, total_tokens: prompt + body.max_tokens };
    const choices = [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'length' }];
    res
      .writeHead(200, { 'content-type': 'application/json' })
      .end(JSON.stringify({ id: 'x', object: 'chat.completion', model: body.model, choices, usage }));
  };
}

async function admin<T>(instance: TestGateway, path: string, body?: unknown): Promise<{ status: number; json: T }> {
  const response = await request(`${instance.url}/admin${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  return { status: response.statusCode, json: (await response.body.json()) as T };
}

describe('end users: a per-end-user daily budget, exact across three gateway instances on one Redis', function () {
  this.timeout(120_000);
  let redis: TestRedisServer;
  let upstream: ScriptedUpstream;
  let instances: TestGateway[];

  before(async () => {
    redis = await TestRedisServer.start();
    upstream = await ScriptedUpstream.start();
    billingUpstream(upstream);
    instances = [];
    for (let index = 0; index < 3; index += 1) {
      const env = {
        GATEWAY_ADMIN_TOKEN: ADMIN,
        REDIS_URL: redis.url,
        ZETA_BASE_URL: upstream.url,
        ZETA_API_KEY: 'k',
        LOG_LEVEL: 'silent',
      };
      instances.push(await startTestGateway({ env }));
    }
  });
  after(async () => {
    await Promise.all(instances.map((instance) => instance.close()));
    await upstream.close();
    await redis.close();
  });

  it('30 requests at once from 10 end users of one key: each end user is charged within its budget and refused once over it, the others not', async () => {
    const body: ChatBody = {
      model: 'zeta/zeta-k3',
      max_tokens: 200,
      messages: [{ role: 'user', content: 'Write a short poem about the sea' }],
    };
    const reserved = reservationOf(body);
    // Two reservations fit each end user's budget (rounded up to whole micro-USD), a third does not,
    // whether the first two are still in flight or settled (each is billed what it reserved).
    const budget = Math.ceil((2 * reserved) / 1000) / 1e6;
    const created = await admin<{ id: string; key: string }>(instances[0]!, '/keys', {
      name: 'product',
      end_user: { budget: { daily_usd: budget } },
    });
    expect(created.status).to.equal(201);
    const { id: keyId, key } = created.json;
    const clients = instances.map(
      (instance) => new OpenAI({ apiKey: key, baseURL: `${instance.url}/v1`, maxRetries: 0 }),
    );
    const users = Array.from({ length: END_USERS }, (_, index) => `user-${index}@example.com`);

    // Even end users are named by the OpenAI `user` field, odd ones by the x-gateway-end-user header;
    // the three requests of each end user go to the three instances.
    const send = (user: string, index: number, instance: number) => {
      const client = clients[instance]!;
      if (index % 2 === 0) return client.chat.completions.create({ ...body, user });
      return client.chat.completions.create(body, { headers: { 'x-gateway-end-user': user } });
    };
    const outcomes = await Promise.all(
      users.flatMap((user, index) =>
        Array.from({ length: EACH }, (_, attempt) =>
          send(user, index, (index + attempt) % 3).then(
            () => ({ user, status: 200, message: '' }),
            (error: unknown) => {
              if (!(error instanceof OpenAI.APIError)) throw error;
              const code = (error.error as { code?: string } | undefined)?.code;
              return { user, status: error.status, message: error.message, code };
            },
          ),
        ),
      ),
    );
    expect(outcomes).to.have.length(END_USERS * EACH);
    for (const user of users) {
      const own = outcomes.filter((outcome) => outcome.user === user);
      expect(
        own.filter((outcome) => outcome.status === 200),
        `${user} is served what its budget fits`,
      ).to.have.length(2);
      const refused = own.filter((outcome) => outcome.status !== 200);
      expect(refused, `${user} is refused once over its budget`).to.have.length(1);
      expect(refused[0]).to.deep.include({ status: 429, code: 'GW_ERR_BUDGET_EXCEEDED' });
      expect(refused[0]!.message).to.contain(`(end user '${user}' of key ${keyId})`);
    }

    // What each end user was charged, from its usage and from its counter: within its budget.
    await Promise.all(instances.map((instance) => instance.gateway.flushUsage()));
    const rows = (
      await admin<{ data: { end_user: string | null; requests: number; cost_usd: number }[] }>(
        instances[1]!,
        `/usage?group_by=end_user&key_id=${keyId}`,
      )
    ).json.data;
    expect(rows.map((row) => row.end_user)).to.deep.equal([...users].sort());
    const holder = endUserHolders({ id: keyId, end_user: { budget: { daily_usd: budget } } })[0]!;
    const budgetCounters = users.map((user) => endUserMeters(holder, user, Date.now())[0]!.counter);
    const counters = await instances[2]!.gateway.limits.peek(budgetCounters);
    for (const row of rows) {
      expect(row.requests, row.end_user!).to.equal(2);
      expect(row.cost_usd, row.end_user!).to.be.above(0).and.at.most(budget);
      expect(counters[users.indexOf(row.end_user!)]! / 1e9, `${row.end_user} counter`).to.be.at.most(budget);
    }

    // Once over, an end user stays refused; an end user the key has not seen, and the key itself, are served.
    const again = await clients[2]!.chat.completions
      .create({ ...body, user: users[0]! })
      .catch((error: unknown) => error);
    expect(again).to.be.instanceOf(OpenAI.RateLimitError);
    expect((await clients[0]!.chat.completions.create({ ...body, user: 'newcomer' })).choices).to.have.length(1);
    expect((await clients[1]!.chat.completions.create(body)).choices).to.have.length(1);

    // The upstream saw only the served requests, and never the gateway's end-user header.
    expect(upstream.requests).to.have.length(END_USERS * 2 + 2);
    for (const seen of upstream.requests) expect(seen.headers).to.not.have.property('x-gateway-end-user');
  });
});
