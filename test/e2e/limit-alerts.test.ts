import { expect } from 'chai';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import { request } from 'undici';
import { EVENTS, type LimitAlert } from '../../src/core/diagnostics.ts';
import { demandsFor, estimateRequest } from '../../src/usage/reservation.ts';
import { promptCharacters } from '../../src/usage/token-estimate.ts';
import { eventually } from '../helpers/eventually.ts';
import { TestRedisServer } from '../helpers/redis-server.ts';
import { startTestGateway, type TestGateway } from '../helpers/test-gateway.ts';

const ADMIN = 'admin-token-for-alert-tests-0001-abcdef';
const SECRET = 'alert-webhook-secret-0001-0123456789abcdef';
/** zeta/zeta-k3's prices (USD per million input and output tokens), as its plugin declares them. */
const ZETA_PRICING = { input: 0.65, cachedInput: 0.065, output: 2.7 };
const MESSAGES = [{ role: 'user' as const, content: 'Count to three' }];

/** One POST the receiver took: its headers, its body as sent, and its answer (open while held). */
interface Received {
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
  readonly res: ServerResponse;
}

/**
 * A webhook receiver on a real socket: each POST answered with the next status of `statuses` (200 once
 * they run out), or held unanswered (`hold`).
 */
async function startReceiver(options: { statuses?: number[]; hold?: boolean } = {}) {
  const received: Received[] = [];
  const statuses = [...(options.statuses ?? [])];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), res });
      if (options.hold) return;
      res.writeHead(statuses.shift() ?? 200).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks/alerts`;
  return {
    url,
    received,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** A receiver's own check, written out apart from the gateway's code: HMAC-SHA256 of `<timestamp>.<body>`. */
function signatureHolds(received: Received): boolean {
  const timestamp = String(received.headers['x-gateway-timestamp']);
  const expected = Buffer.from(
    `sha256=${createHmac('sha256', SECRET).update(`${timestamp}.${received.body}`).digest('hex')}`,
  );
  const given = Buffer.from(String(received.headers['x-gateway-signature']));
  const fresh = Math.abs(Date.now() / 1000 - Number(timestamp)) <= 300;
  return fresh && given.length === expected.length && timingSafeEqual(given, expected);
}

async function adminGet(url: string, path: string): Promise<{ data: unknown }> {
  const response = await request(`${url}${path}`, { headers: { authorization: `Bearer ${ADMIN}` } });
  expect(response.statusCode).to.equal(200);
  return (await response.body.json()) as { data: unknown };
}

async function adminSend(url: string, method: 'POST' | 'PATCH', path: string, body: unknown): Promise<number> {
  const response = await request(`${url}${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  await response.body.text();
  return response.statusCode;
}

const webhookEnv = (url: string, extra: Record<string, string> = {}) => ({
  GATEWAY_ADMIN_TOKEN: ADMIN,
  GATEWAY_ALERT_WEBHOOK_URL: url,
  GATEWAY_ALERT_WEBHOOK_SECRET: SECRET,
  ...extra,
});

/** Every limit alert the gateways publish, as their subscribers see them. */
function collectAlerts(instances: readonly TestGateway[]): { alerts: LimitAlert[]; stop(): void } {
  const alerts: LimitAlert[] = [];
  const keep = (alert: LimitAlert) => void alerts.push(alert);
  const stops = instances.map(({ gateway }) => EVENTS.limitAlert.subscribe(gateway.source, keep));
  return { alerts, stop: () => stops.forEach((stop) => stop()) };
}

describe('limit alerts: a budget crossing 50, 80 and 100 % across three instances on one Redis', function () {
  this.timeout(120_000);
  let redis: TestRedisServer;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let instances: TestGateway[];

  before(async () => {
    redis = await TestRedisServer.start();
    receiver = await startReceiver();
    instances = [];
    for (let index = 0; index < 3; index += 1) {
      instances.push(await startTestGateway({ env: { ...webhookEnv(receiver.url), REDIS_URL: redis.url } }));
    }
  });
  after(async () => {
    await Promise.all(instances.map((instance) => instance.close()));
    await receiver.close();
    await redis.close();
  });

  it('fires exactly three signed webhooks, one per threshold, when the settled use reaches each', async () => {
    const [first] = instances as [TestGateway];
    // What one request costs: a probe key's first request, as its usage records it.
    const probe = await first.gateway.keys.create({ name: 'probe' });
    const probeClient = new OpenAI({ apiKey: probe.key, baseURL: `${first.url}/v1`, maxRetries: 0 });
    await probeClient.chat.completions.create({ model: 'zeta/zeta-k3', messages: MESSAGES, max_tokens: 1 });
    await first.gateway.flushUsage();
    const rows = (await adminGet(first.url, `/admin/usage?key_id=${probe.record.id}`)).data as { cost_usd: string }[];
    const each = Number(rows[0]!.cost_usd);
    // Ten such requests make the budget (whole micro-USD, rounded down): 5, 8 and 10 of them reach 50, 80 and 100 %.
    const daily = Math.floor(each * 10 * 1e6) / 1e6;
    const body = { model: 'zeta/zeta-k3', messages: MESSAGES, max_tokens: 1 };
    const meter = {
      counter: 'x',
      limit: Number.MAX_SAFE_INTEGER,
      kind: 'budget',
      scope: 'key',
      owner: 'x',
      period: 'day',
      resetAt: Date.now() + 1000,
    } as const;
    const reserves = demandsFor([meter], estimateRequest(promptCharacters(body), 1), ZETA_PRICING)[0]!.want / 1e9;
    expect(reserves, 'the tenth request has room for its reservation').to.be.below(daily - 9 * each);

    const { key, record } = await first.gateway.keys.create({ name: 'alerted', budget: { daily_usd: daily } });
    const collected = collectAlerts(instances);
    const firedAfter: number[] = [];
    try {
      for (let index = 0; index < 10; index += 1) {
        const instance = instances[index % 3]!;
        const client = new OpenAI({ apiKey: key, baseURL: `${instance.url}/v1`, maxRetries: 0 });
        const answer = await client.chat.completions.create(body);
        expect(answer.choices[0]!.message.content).to.be.a('string');
        await instance.gateway.flushUsage();
        for (const each of instances) await each.gateway.flushAlerts();
        firedAfter.push(collected.alerts.length);
      }
    } finally {
      collected.stop();
    }
    // Reached after the 5th, the 8th and the 10th request, whichever instance served them; never again.
    expect(firedAfter).to.deep.equal([0, 0, 0, 0, 1, 1, 1, 2, 2, 3]);
    expect(collected.alerts.map((alert) => alert.threshold)).to.deep.equal([50, 80, 100]);

    expect(receiver.received).to.have.length(3);
    for (const received of receiver.received) expect(signatureHolds(received), received.body).to.equal(true);
    const bodies = receiver.received.map((received) => JSON.parse(received.body) as Record<string, unknown>);
    expect(bodies.map((sent) => sent.threshold)).to.have.members([50, 80, 100]);
    expect(bodies.map((sent) => sent.id)).to.have.members(collected.alerts.map((alert) => alert.id));
    for (const sent of bodies) {
      expect(sent).to.include({
        type: 'limit.threshold',
        scope: 'key',
        owner: record.id,
        kind: 'budget',
        period: 'day',
        unit: 'usd',
        limit: daily,
      });
      expect(Object.keys(sent)).to.have.members([
        'id',
        'type',
        'scope',
        'owner',
        'kind',
        'period',
        'threshold',
        'used',
        'limit',
        'unit',
        'window_end',
        'fired_at',
      ]);
      expect((sent.used as number) * 100).to.be.at.least(daily * (sent.threshold as number));
    }
    const deliveryIds = new Set(receiver.received.map((received) => received.headers['x-gateway-delivery']));
    expect(deliveryIds.size).to.equal(3);
    // A signature made with another secret, or over another body, does not hold.
    const forged = {
      ...receiver.received[0]!,
      body: receiver.received[0]!.body.replace('"threshold":', '"threshold":1'),
    };
    expect(signatureHolds(forged)).to.equal(false);

    // Every instance reads the same firings (Redis), and the delivery log the three deliveries.
    const firings = (await adminGet(instances[2]!.url, '/admin/alerts')).data as { threshold: number; owner: string }[];
    const thresholds = firings.filter((firing) => firing.owner === record.id).map((firing) => firing.threshold);
    expect(thresholds.sort((a, b) => a - b)).to.deep.equal([50, 80, 100]);
    const deliveries = (await adminGet(instances[1]!.url, '/admin/alerts/deliveries')).data as {
      outcome: string;
      attempt: number;
      delivery: string;
    }[];
    expect(deliveries.map((entry) => [entry.outcome, entry.attempt])).to.deep.equal([
      ['delivered', 1],
      ['delivered', 1],
      ['delivered', 1],
    ]);
    expect(new Set(deliveries.map((entry) => entry.delivery))).to.deep.equal(deliveryIds);
  });
  it("fires a budget group's own thresholds once each, for the group, whichever team's key spent", async () => {
    const [first, second, third] = instances as [TestGateway, TestGateway, TestGateway];
    const probe = await first.gateway.keys.create({ name: 'group probe' });
    const probeClient = new OpenAI({ apiKey: probe.key, baseURL: `${first.url}/v1`, maxRetries: 0 });
    const body = { model: 'zeta/zeta-k3', messages: MESSAGES, max_tokens: 1 };
    await probeClient.chat.completions.create(body);
    await first.gateway.flushUsage();
    const rows = (await adminGet(first.url, `/admin/usage?key_id=${probe.record.id}`)).data as { cost_usd: string }[];
    const each = Number(rows[0]!.cost_usd);
    // Four such requests make the group's budget: the 2nd reaches 50 %, the 4th 100 %.
    const daily = Math.floor(each * 4 * 1e6) / 1e6;
    expect(
      await adminSend(second.url, 'POST', '/admin/groups', { name: 'dept', budget: { daily_usd: daily } }),
    ).to.equal(201);
    expect(await adminSend(third.url, 'PATCH', '/admin/groups/dept', { alerts: [50, 100] })).to.equal(200);
    for (const name of ['sales', 'support']) {
      expect(await adminSend(first.url, 'POST', '/admin/teams', { name, group: 'dept', alerts: [] })).to.equal(201);
    }
    const keys = [
      await first.gateway.keys.create({ name: 'sales key', team: 'sales', alerts: [] }),
      await first.gateway.keys.create({ name: 'support key', team: 'support', alerts: [] }),
    ];
    const before = receiver.received.length;
    const collected = collectAlerts(instances);
    const firedAfter: number[] = [];
    try {
      for (let index = 0; index < 4; index += 1) {
        const instance = instances[index % 3]!;
        const client = new OpenAI({ apiKey: keys[index % 2]!.key, baseURL: `${instance.url}/v1`, maxRetries: 0 });
        await client.chat.completions.create(body);
        await instance.gateway.flushUsage();
        for (const each of instances) await each.gateway.flushAlerts();
        firedAfter.push(collected.alerts.length);
      }
    } finally {
      collected.stop();
    }
    expect(firedAfter).to.deep.equal([0, 1, 1, 2]);
    await eventually(() => receiver.received.length === before + 2, 'the two webhooks');
    const sent = receiver.received.slice(before);
    for (const received of sent) expect(signatureHolds(received), received.body).to.equal(true);
    const bodies = sent.map((received) => JSON.parse(received.body) as Record<string, unknown>);
    expect(bodies.map((each) => each.threshold)).to.have.members([50, 100]);
    for (const each of bodies) expect(each).to.include({ scope: 'group', owner: 'dept', kind: 'budget', limit: daily });
  });
});

describe('limit alerts: webhook retries and the delivery log', function () {
  this.timeout(60_000);
  const retries = {
    GATEWAY_ALERT_WEBHOOK_ATTEMPTS: '3',
    GATEWAY_ALERT_WEBHOOK_BACKOFF_MS: '20',
    GATEWAY_ALERT_WEBHOOK_MAX_BACKOFF_MS: '40',
  };

  /** One request of a key whose first request reaches its only threshold (1 % of a 1000-token daily quota). */
  async function fireOnce(test: TestGateway): Promise<void> {
    const { key } = await test.gateway.keys.create({ name: 'alerted', quota: { daily: 1000 }, alerts: [1] });
    const client = new OpenAI({ apiKey: key, baseURL: `${test.url}/v1`, maxRetries: 0 });
    await client.chat.completions.create({ model: 'zeta/zeta-k3', messages: MESSAGES, max_tokens: 20 });
    await test.gateway.flushUsage();
    await test.gateway.flushAlerts();
  }

  it('retries a receiver that answers 503 until it takes the delivery, with the same delivery id, each attempt signed', async () => {
    const receiver = await startReceiver({ statuses: [503, 503] });
    const test = await startTestGateway({ env: webhookEnv(receiver.url, retries) });
    try {
      await fireOnce(test);
      expect(receiver.received).to.have.length(3);
      for (const received of receiver.received) expect(signatureHolds(received)).to.equal(true);
      expect(new Set(receiver.received.map((received) => received.headers['x-gateway-delivery'])).size).to.equal(1);
      const log = (await adminGet(test.url, '/admin/alerts/deliveries')).data as Record<string, unknown>[];
      expect(log.map((entry) => [entry.attempt, entry.outcome, entry.status])).to.deep.equal([
        [3, 'delivered', 200],
        [2, 'retrying', 503],
        [1, 'retrying', 503],
      ]);
      expect(log[1]!.next_attempt_at).to.be.a('string');
    } finally {
      await test.close();
      await receiver.close();
    }
  });

  it('retries a receiver that is down, then gives up, and the delivery log says so', async () => {
    const gone = await startReceiver();
    const url = gone.url;
    await gone.close();
    const test = await startTestGateway({ env: webhookEnv(url, retries) });
    try {
      await fireOnce(test);
      const log = (await adminGet(test.url, '/admin/alerts/deliveries')).data as Record<string, unknown>[];
      expect(log.map((entry) => [entry.attempt, entry.outcome, entry.error, entry.status])).to.deep.equal([
        [3, 'failed', 'connection refused', null],
        [2, 'retrying', 'connection refused', null],
        [1, 'retrying', 'connection refused', null],
      ]);
      expect(new Set(log.map((entry) => entry.delivery)).size).to.equal(1);
      expect(log[0]!.next_attempt_at).to.equal(null);
      // Neither the log nor the firing shows where the webhook goes or its secret.
      const shown = JSON.stringify(log) + JSON.stringify(await adminGet(test.url, '/admin/alerts'));
      expect(shown).to.not.include(url).and.not.include(SECRET);
    } finally {
      await test.close();
    }
  });

  it('answers every request while a receiver holds the webhooks unanswered', async () => {
    const receiver = await startReceiver({ hold: true });
    const test = await startTestGateway({
      env: webhookEnv(receiver.url, { GATEWAY_ALERT_WEBHOOK_TIMEOUT_MS: '600000' }),
    });
    try {
      // What one request charges (a probe key's), so that each of three requests reaches the next threshold.
      const probe = await test.gateway.keys.create({ name: 'probe' });
      const probeClient = new OpenAI({ apiKey: probe.key, baseURL: `${test.url}/v1`, maxRetries: 0 });
      await probeClient.chat.completions.create({ model: 'zeta/zeta-k3', messages: MESSAGES, max_tokens: 20 });
      await test.gateway.flushUsage();
      const charged = (
        (await adminGet(test.url, `/admin/usage?key_id=${probe.record.id}`)).data as { charged_tokens: number }[]
      )[0]!.charged_tokens;
      const { key } = await test.gateway.keys.create({
        name: 'held',
        quota: { daily: charged * 10 },
        alerts: [10, 20, 30],
      });
      const client = new OpenAI({ apiKey: key, baseURL: `${test.url}/v1`, maxRetries: 0 });
      const ask = () => client.chat.completions.create({ model: 'zeta/zeta-k3', messages: MESSAGES, max_tokens: 20 });
      await ask();
      await eventually(() => receiver.received.length === 1, 'the first webhook at the receiver', 10_000);
      // The first webhook is held open: the next requests are answered all the same, one after the other.
      await ask();
      await eventually(() => receiver.received.length === 2, 'the second webhook at the receiver', 10_000);
      const third = await ask();
      expect(third.choices[0]!.message.content).to.be.a('string');
      await eventually(() => receiver.received.length === 3, 'the third webhook at the receiver', 10_000);
      // Every answer came while the webhooks before it were still unanswered: none has been answered yet.
      expect(receiver.received.map((received) => received.res.writableEnded)).to.deep.equal([false, false, false]);
      expect((await adminGet(test.url, '/admin/alerts/deliveries')).data).to.deep.equal([]);
      expect(((await adminGet(test.url, '/admin/alerts')).data as unknown[]).length).to.equal(3);
    } finally {
      // Closing ends the attempts in flight rather than waiting for the receiver.
      await test.close();
      await receiver.close();
    }
  });
});
