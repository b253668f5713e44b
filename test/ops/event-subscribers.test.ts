import { expect } from 'chai';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { ResponsesWS } from 'openai/resources/responses/ws';
import { request } from 'undici';
import { EVENTS } from '../../src/core/diagnostics.ts';
import type { ExchangeView } from '../../src/core/exchange.ts';
import { eventually } from '../helpers/eventually.ts';
import { ScriptedUpstream } from '../helpers/scripted-upstream.ts';
import { startTestGateway, TEST_KEY, type TestGateway } from '../helpers/test-gateway.ts';

const ADMIN = 'admin-token-0001-0123456789abcdef';

/** A plugin whose stream fixup throws on an event that says BOOM (a plugin fault). */
const PLUGIN = `export default {
  contract: 1,
  vendor: 'tau',
  routes: { 'chat-completions': { path: '/chat/completions', format: 'chat-completions', auth: 'bearer' } },
  models: [{ id: 'tau-1', listed: true, routes: ['chat-completions'], pricing: { input: 1, cachedInput: 0, output: 2 } }],
  streamFixups: [{ name: 'no-boom', route: 'chat-completions', models: ['tau/tau-1'], fixup: (event) => { if (event.data.includes('BOOM')) throw new Error('boom'); } }],
};
`;

const chunk = (delta: object, finish: string | null = null) =>
  `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'tau-1', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;

/**
 * An upstream that answers by what the prompt says: `fail` gets a 500; anything else a stream of the
 * prompt's words (a plan, which the guardrail redacts; BOOM, which the plugin's fixup throws on).
 */
function answer(upstream: ScriptedUpstream): void {
  upstream.script = (_req, res, text) => {
    const prompt = (JSON.parse(text) as { messages: { content: string }[] }).messages[0]!.content;
    if (prompt === 'fail')
      return res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":{"message":"down"}}');
    const usage = `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'tau-1', choices: [], usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 } })}\n\n`;
    const words = prompt
      .split(' ')
      .map((word) => chunk({ content: `${word} ` }))
      .join('');
    res
      .writeHead(200, { 'content-type': 'text/event-stream' })
      .end(chunk({ role: 'assistant', content: '' }) + words + chunk({}, 'stop') + usage + 'data: [DONE]\n\n');
  };
}

describe('observing the gateway from outside: a subscriber to its events, and no edit in the request path', function () {
  this.timeout(60_000);
  let dir: string;
  let upstream: ScriptedUpstream;
  let test: TestGateway;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gateway-subscribers-'));
    await mkdir(join(dir, 'plugins', 'tau'), { recursive: true });
    await writeFile(join(dir, 'plugins', 'package.json'), JSON.stringify({ type: 'module' }));
    await writeFile(join(dir, 'plugins', 'manifest.json'), JSON.stringify({ plugins: ['tau'] }));
    await writeFile(join(dir, 'plugins', 'tau', 'index.js'), PLUGIN);
    await writeFile(
      join(dir, 'gateway.yaml'),
      "cache:\n  ttlSeconds: 60\nguardrails:\n  - { name: no-plans, use: regex, on: response, action: redact, patterns: ['plan'] }\n",
    );
    upstream = await ScriptedUpstream.start();
    answer(upstream);
    test = await startTestGateway({
      configFile: join(dir, 'gateway.yaml'),
      env: {
        GATEWAY_PLUGIN_PATH: join(dir, 'plugins'),
        TAU_BASE_URL: upstream.url,
        TAU_API_KEY: 'tau-key',
        GATEWAY_ADMIN_TOKEN: ADMIN,
        LOG_LEVEL: 'silent',
      },
    });
  });
  after(async () => {
    await test?.close();
    await upstream?.close();
    await rm(dir, { recursive: true, force: true });
  });

  const ask = async (prompt: string, key = TEST_KEY) => {
    const response = await request(`${test.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tau/tau-1', stream: true, messages: [{ role: 'user', content: prompt }] }),
    });
    return {
      status: response.statusCode,
      cache: response.headers['x-gateway-cache'],
      text: await response.body.text(),
    };
  };

  it("counts the cache's hits, and sees every event the gateway publishes, with nothing but a subscription", async () => {
    const source = test.gateway.source;
    let hits = 0;
    const seen = new Map<string, number>();
    const off = [
      EVENTS.cache.subscribe(source, ({ result }) => {
        if (result === 'hit') hits += 1;
      }),
      ...Object.values(EVENTS).map((event) =>
        event.subscribe(source, () => seen.set(event.name, (seen.get(event.name) ?? 0) + 1)),
      ),
    ];
    try {
      const created = await request(`${test.url}/admin/keys`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'observed', tpm: 100_000 }),
      });
      expect(created.statusCode).to.equal(201);
      const { key } = (await created.body.json()) as { key: string };
      const refused = await request(`${test.url}/admin/keys`, {
        headers: { authorization: 'Bearer not-the-admin-token-0123456789abcdef' },
      });
      await refused.body.text();
      const signedIn = await request(`${test.url}/account/api/session`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', origin: test.url },
        body: JSON.stringify({ token: ADMIN }),
      });
      await signedIn.body.text();

      const first = await ask('our plan for today', key);
      expect(first).to.include({ status: 200, cache: 'miss' });
      expect(first.text).to.not.include('plan');
      const second = await ask('our plan for today', key);
      expect(second).to.include({ status: 200, cache: 'hit' });
      expect(hits).to.equal(1);

      expect((await ask('fail')).status).to.equal(500);
      expect((await ask('say BOOM now')).text).to.contain('GW_ERR_PLUGIN_FAULT');
      // A Responses WebSocket opened, a message on it answered (nothing to cancel: no usage record), then closed.
      const socket = new ResponsesWS(new OpenAI({ apiKey: key, baseURL: `${test.url}/v1` }));
      const answered = new Promise((resolve) => socket.on('error', resolve));
      socket.send({ type: 'response.cancel' } as never);
      await answered;
      socket.close();
      // A key whose first request (7 tokens) reaches its one alert threshold (1 % of a 100-token daily quota).
      const alerted = await test.gateway.keys.create({ name: 'alerted', quota: { daily: 100 }, alerts: [1] });
      const limited = await request(`${test.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${alerted.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'tau/tau-1', max_tokens: 20, messages: [{ role: 'user', content: 'hello' }] }),
      });
      expect(limited.statusCode, await limited.body.text()).to.equal(200);
      await test.gateway.flushUsage();
      await test.gateway.flushAlerts();

      await eventually(() => Object.values(EVENTS).every((event) => seen.has(event.name)), 'every event seen');
      expect([...seen.keys()].sort()).to.deep.equal(
        Object.values(EVENTS)
          .map((event) => event.name)
          .sort(),
      );
      expect(seen.get(EVENTS.exchangeRecorded.name)).to.equal(5);
      expect(seen.get(EVENTS.limitAlert.name)).to.equal(1);
    } finally {
      off.forEach((unsubscribe) => unsubscribe());
    }
  });

  it('follows only the exchanges it asked to (watch.events): the others publish nothing on the watched channels', async () => {
    const source = test.gateway.source;
    const followed: string[] = [];
    const watched = new Map<string, Set<string>>();
    const all = new Map<string, Set<string>>();
    const note = (into: Map<string, Set<string>>, name: string, message: object) => {
      const exchange = 'exchange' in message ? (message.exchange as ExchangeView) : (message as ExchangeView);
      into.set(name, (into.get(name) ?? new Set()).add(exchange.requestId));
    };
    const off = [
      // Follows the exchanges whose request id ends in an even digit, as a sampler would.
      EVENTS.exchangeStart.subscribe(source, (exchange) => {
        if (!/[02468]$/.test(exchange.requestId)) return;
        exchange.watch.events = true;
        followed.push(exchange.requestId);
      }),
      ...[EVENTS.authenticated, EVENTS.attemptStart, EVENTS.attemptHeaders, EVENTS.exchangeEnd].flatMap((event) => [
        event.subscribeWatched(source, (message: object) => note(watched, event.name, message)),
        event.subscribe(source, (message: object) => note(all, event.name, message)),
      ]),
    ];
    try {
      for (let index = 0; index < 6; index += 1) {
        const response = await request(`${test.url}/v1/chat/completions`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${TEST_KEY}`,
            'content-type': 'application/json',
            'x-request-id': `watched-request-${index}`,
          },
          body: JSON.stringify({
            model: 'tau/tau-1',
            stream: true,
            messages: [{ role: 'user', content: `hello ${index}` }],
          }),
        });
        expect(response.statusCode).to.equal(200);
        await response.body.text();
      }
      expect(followed).to.deep.equal(['watched-request-0', 'watched-request-2', 'watched-request-4']);
      for (const event of [EVENTS.authenticated, EVENTS.attemptStart, EVENTS.attemptHeaders, EVENTS.exchangeEnd]) {
        expect([...(watched.get(event.name) ?? [])], event.name).to.deep.equal(followed);
        expect(
          [...(all.get(event.name) ?? [])].filter((id) => id.startsWith('watched-')),
          event.name,
        ).to.have.length(6);
      }
    } finally {
      off.forEach((unsubscribe) => unsubscribe());
    }
  });

  it("does not see another gateway's requests in the same process", async () => {
    const other = await startTestGateway();
    let mine = 0;
    let theirs = 0;
    const off = [
      EVENTS.exchangeStart.subscribe(test.gateway.source, () => (mine += 1)),
      EVENTS.exchangeStart.subscribe(other.gateway.source, () => (theirs += 1)),
    ];
    try {
      const response = await request(`${other.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'alpha-latest', messages: [{ role: 'user', content: 'hi' }] }),
      });
      expect(response.statusCode).to.equal(200);
      await response.body.text();
      expect({ mine, theirs }).to.deep.equal({ mine: 0, theirs: 1 });
    } finally {
      off.forEach((unsubscribe) => unsubscribe());
      await other.close();
    }
  });
});
