import { expect } from 'chai';
import OpenAI from 'openai';
import { request } from 'undici';
import { TestRedisServer } from '../helpers/redis-server.ts';
import { startTestGateway, type TestGateway } from '../helpers/test-gateway.ts';
import { demandsFor, estimateRequest } from '../../src/usage/reservation.ts';
import { promptCharacters } from '../../src/usage/token-estimate.ts';

const ADMIN = 'admin-token-for-budget-group-tests-0001';
const BURST = 30;

/** zeta/zeta-k3's prices (USD per million input and output tokens), as its plugin declares them. */
const ZETA_PRICING = { input: 0.65, cachedInput: 0.065, output: 2.7 };
const BODY = {
  model: 'zeta/zeta-k3',
  max_tokens: 50,
  messages: [{ role: 'user' as const, content: 'Count to three' }],
};

/** What one request of {@link BODY} reserves on a money budget (nano-USD): its estimate at the model's prices. */
function reservedNano(): number {
  const meter = {
    counter: 'x',
    limit: Number.MAX_SAFE_INTEGER,
    kind: 'budget',
    scope: 'group',
    owner: 'x',
    period: 'day',
    resetAt: Date.now() + 1000,
  } as const;
  return demandsFor([meter], estimateRequest(promptCharacters(BODY), BODY.max_tokens), ZETA_PRICING)[0]!.want;
}

interface Answer {
  readonly status: number;
  readonly json: any;
}

type Use = { kind: string; period: string };

async function admin(url: string, method: string, path: string, body?: unknown): Promise<Answer> {
  const response = await request(`${url}${path}`, {
    method: method as 'GET',
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.body.text();
  return { status: response.statusCode, json: text ? JSON.parse(text) : undefined };
}

/** What the keys were charged (USD) and how many of their requests were recorded, every instance's usage flushed. */
async function charged(
  instances: readonly TestGateway[],
  keyIds: readonly string[],
): Promise<{ requests: number; cost: number }> {
  await Promise.all(instances.map((instance) => instance.gateway.flushUsage()));
  let requests = 0;
  let cost = 0;
  for (const keyId of keyIds) {
    const { json } = await admin(instances[0]!.url, 'GET', `/admin/usage?key_id=${keyId}`);
    for (const row of json.data as { requests: number; cost_usd: number | string }[]) {
      requests += row.requests;
      cost += Number(row.cost_usd);
    }
  }
  return { requests, cost };
}

interface Sent {
  readonly status: number;
  readonly error?: { readonly code: string; readonly message: string };
}

/** Sends a chat completion with the official client; its status and, for a refusal, the error body. */
async function send(instance: TestGateway, key: string): Promise<Sent> {
  const client = new OpenAI({ apiKey: key, baseURL: `${instance.url}/v1`, maxRetries: 0 });
  try {
    await client.chat.completions.create(BODY);
    return { status: 200 };
  } catch (error) {
    if (!(error instanceof OpenAI.APIError)) throw error;
    const body = error.error as { code?: string; message?: string } | undefined;
    return { status: error.status ?? 0, error: { code: String(body?.code), message: String(body?.message) } };
  }
}

describe('budget groups: one daily budget shared by two teams, exact across three instances on one Redis', function () {
  this.timeout(180_000);
  let redis: TestRedisServer;
  let instances: TestGateway[];

  before(async () => {
    redis = await TestRedisServer.start();
    instances = [];
    for (let index = 0; index < 3; index += 1) {
      const env = { GATEWAY_ADMIN_TOKEN: ADMIN, REDIS_URL: redis.url, LOG_LEVEL: 'silent' };
      instances.push(await startTestGateway({ env }));
    }
  });
  after(async () => {
    await Promise.all(instances.map((instance) => instance.close()));
    await redis.close();
  });

  it('charges the group within its bound under 30 requests at once from two teams, then refuses them', async () => {
    const [first, second, third] = instances as [TestGateway, TestGateway, TestGateway];
    // What one request costs, measured with a key outside any group.
    const probe = await first.gateway.keys.create({ name: 'probe' });
    expect((await send(first, probe.key)).status).to.equal(200);
    const each = (await charged(instances, [probe.record.id])).cost;
    const reserved = reservedNano() / 1e9;
    expect(each).to.be.greaterThan(0);
    expect(reserved, 'a reservation covers what one request costs: the bound is the budget').to.be.at.least(each);
    // Exactly ten requests fit, one after another: nine at their cost, and the tenth's whole reservation.
    const fits = 10;
    const dailyUsd = Math.ceil(((fits - 1) * each + reserved) * 1e6) / 1e6;
    expect(BURST * each, 'the burst costs more than the budget').to.be.greaterThan(dailyUsd);

    const group = await admin(second.url, 'POST', '/admin/groups', { name: 'dept', budget: { daily_usd: dailyUsd } });
    expect(group.status).to.equal(201);
    for (const name of ['sales', 'support']) {
      expect((await admin(third.url, 'POST', '/admin/teams', { name, group: 'dept' })).status).to.equal(201);
    }
    expect((await admin(first.url, 'POST', '/admin/teams', { name: 'outside' })).status).to.equal(201);
    const sales = await first.gateway.keys.create({ name: 'sales key', team: 'sales' });
    const support = await second.gateway.keys.create({ name: 'support key', team: 'support' });
    const outsider = await third.gateway.keys.create({ name: 'outside key', team: 'outside' });
    const members = [sales, support];

    const burst = await Promise.all(
      Array.from({ length: BURST }, (_, index) => send(instances[index % 3]!, members[index % 2]!.key)),
    );
    const outsideDuring = await send(first, outsider.key);
    const served = burst.filter((answer) => answer.status === 200).length;
    const refused = burst.filter((answer) => answer.status === 429);
    const other = burst.filter((answer) => answer.status !== 200 && answer.status !== 429);
    expect(served + refused.length, JSON.stringify(other)).to.equal(BURST);
    expect(served).to.be.within(1, fits);
    expect(refused.length).to.be.at.least(BURST - fits);
    for (const answer of refused) {
      expect(answer.error!.code).to.equal('GW_ERR_BUDGET_EXCEEDED');
      expect(answer.error!.message).to.match(/ today \(UTC\) \(group 'dept'\), this request reserves up to \$[\d.]+$/);
    }
    expect(outsideDuring.status, 'a key outside the group is not refused').to.equal(200);

    // What room the burst left (its reservations given back) sequential requests use up, then are refused.
    const after: number[] = [];
    for (let index = 0; index < BURST && after.at(-1) !== 429; index += 1) {
      after.push((await send(instances[index % 3]!, members[index % 2]!.key)).status);
      await Promise.all(instances.map((instance) => instance.gateway.flushUsage()));
    }
    expect(after.at(-1)).to.equal(429);
    expect(after.slice(0, -1).every((status) => status === 200)).to.equal(true);
    const everywhere = [
      [first, sales],
      [second, support],
      [third, support],
      [third, sales],
    ] as const;
    for (const [instance, member] of everywhere) {
      const answer = await send(instance, member.key);
      expect(answer.status, 'every key of the group on every instance is refused once it is over').to.equal(429);
      expect(answer.error!.message).to.include("(group 'dept')");
    }

    const used = await charged(
      instances,
      members.map((member) => member.record.id),
    );
    expect(used.requests).to.equal(served + after.length - 1);
    // The bound (docs/budgets.md): within the budget, as no request cost more than it reserved.
    expect(used.cost).to.be.at.most(dailyUsd);
    // Refused only when the next reservation no longer fit: exactly the requests the budget fits were served.
    expect(used.requests).to.equal(fits);
    expect(used.cost).to.be.closeTo(fits * each, 1e-9);

    const shown = await admin(first.url, 'GET', '/admin/groups/dept');
    expect(shown.json.members).to.deep.equal({ teams: ['sales', 'support'], keys: [] });
    const day = shown.json.use.find((entry: Use) => entry.kind === 'budget' && entry.period === 'day');
    expect(day).to.include({ unit: 'usd', limit: dailyUsd });
    expect(day.used).to.be.closeTo(used.cost, 1e-9);

    expect((await send(second, outsider.key)).status, 'a key outside the group is still served').to.equal(200);
  });
});
