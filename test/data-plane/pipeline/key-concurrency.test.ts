import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';
import { expect } from 'chai';
import { request, type Dispatcher } from 'undici';
import { loadConfig } from '../../../src/config/gateway-config.ts';
import { KeyConcurrency } from '../../../src/data-plane/pipeline/admit.ts';
import { isGatewayError } from '../../../src/core/gateway-errors.ts';
import { eventually } from '../../helpers/eventually.ts';
import { ScriptedUpstream } from '../../helpers/scripted-upstream.ts';
import { startTestGateway, TEST_KEY, type TestGateway } from '../../helpers/test-gateway.ts';

const ADMIN_TOKEN = 'admin-token-for-concurrency-tests-0001';
const FIRST = 'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}\n\n';
const LAST =
  'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}\n\ndata: [DONE]\n\n';

const body = (stream: boolean) =>
  JSON.stringify({ model: 'zeta/zeta-k3', stream, messages: [{ role: 'user', content: 'x' }] });

interface HeldStream {
  readonly response: Dispatcher.ResponseData;
  readonly events: AsyncIterator<Buffer>;
  /** Lets the upstream finish this stream. */
  finish(): void;
}

describe('concurrent requests per API key', function () {
  this.timeout(30_000);
  let upstream: ScriptedUpstream;
  let test: TestGateway;
  // What finishes each stream the upstream holds open; every one is called after each test.
  let waiting: (() => void)[] = [];

  before(async () => {
    upstream = await ScriptedUpstream.start();
    upstream.script = async (_req, res, text) => {
      if (!(JSON.parse(text) as { stream?: boolean }).stream) {
        res
          .writeHead(200, { 'content-type': 'application/json' })
          .end(
            '{"choices":[{"index":0,"message":{"role":"assistant","content":"ok"}}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}',
          );
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(FIRST);
      await new Promise<void>((resolve) => waiting.push(resolve));
      res.end(LAST);
    };
    test = await startTestGateway({
      env: { ZETA_BASE_URL: upstream.url, GATEWAY_KEY_CONCURRENCY: '3', GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN },
    });
  });
  beforeEach(() => {
    waiting = [];
  });
  afterEach(() => waiting.forEach((finish) => finish()));
  after(async () => {
    await test.close();
    await upstream.close();
  });

  const post = (key: string, stream: boolean, path = '/v1/chat/completions') =>
    request(`${test.url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: body(stream),
    });

  /** A stream that has started (its first event read) and stays open until `finish`. */
  async function holdStream(key: string): Promise<HeldStream> {
    const heldBefore = waiting.length;
    const response = await post(key, true);
    expect(response.statusCode).to.equal(200);
    const events = response.body[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
    expect(String((await events.next()).value)).to.contain('"Hi"');
    // The upstream queued its finisher as it wrote the event just read.
    expect(waiting).to.have.length(heldBefore + 1);
    return { response, events, finish: waiting.at(-1)! };
  }

  async function readRest(held: HeldStream): Promise<string> {
    held.finish();
    let rest = '';
    for (let next = await held.events.next(); !next.done; next = await held.events.next()) rest += String(next.value);
    return rest;
  }

  it('refuses the N+1th request of a key with 429 and Retry-After while N streams run, and serves one again once a stream ends', async () => {
    const held = [await holdStream(TEST_KEY), await holdStream(TEST_KEY), await holdStream(TEST_KEY)];

    const refused = await post(TEST_KEY, false);
    expect(refused.statusCode).to.equal(429);
    expect(refused.headers['retry-after']).to.equal('1');
    expect(refused.headers['x-ratelimit-limit-concurrency']).to.equal('3');
    expect(refused.headers['x-ratelimit-remaining-concurrency']).to.equal('0');
    const answer = (await refused.body.json()) as any;
    expect(answer.error).to.deep.equal({
      message: 'Concurrency limit exceeded: at most 3 requests at once; retry when one of them has finished',
      type: 'rate_limit_error',
      param: null,
      code: 'GW_ERR_RATE_LIMITED',
    });
    // Per key, whatever the route or the way in (the Messages envelope and header style; a path Express serves).
    const messages = await post(TEST_KEY, false, '/v1/messages');
    expect(messages.statusCode).to.equal(429);
    expect(messages.headers['anthropic-ratelimit-concurrency-limit']).to.equal('3');
    expect(messages.headers['anthropic-ratelimit-concurrency-remaining']).to.equal('0');
    expect(((await messages.body.json()) as any).error.type).to.equal('rate_limit_error');
    const viaExpress = await post(TEST_KEY, false, '/v1/chat/completions/');
    expect(viaExpress.statusCode).to.equal(429);
    await viaExpress.body.dump();

    expect(await readRest(held.shift()!)).to.contain('[DONE]');
    const served = await post(TEST_KEY, false);
    expect(served.statusCode).to.equal(200);
    await served.body.dump();
    await Promise.all(held.map(readRest));
  });

  it('frees the slot of a client that leaves mid-stream', async () => {
    const held = [await holdStream(TEST_KEY), await holdStream(TEST_KEY), await holdStream(TEST_KEY)];
    expect((await post(TEST_KEY, false)).statusCode).to.equal(429);
    held.shift()!.response.body.destroy();
    await eventually(async () => {
      const response = await post(TEST_KEY, false);
      await response.body.dump();
      return response.statusCode === 200;
    }, 'a slot to be free again once the client left');
    await Promise.all(held.map(readRest));
  });

  it("counts each key on its own, with a key's own concurrency from the admin API over the default", async () => {
    const created = await request(`${test.url}/admin/keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'one at a time', concurrency: 1 }),
    });
    expect(created.statusCode).to.equal(201);
    const { key, concurrency } = (await created.body.json()) as { key: string; concurrency: number };
    expect(concurrency).to.equal(1);

    const held = await holdStream(key);
    const refused = await post(key, false);
    expect(refused.statusCode).to.equal(429);
    expect(((await refused.body.json()) as any).error.message).to.contain('at most 1 requests at once');
    const other = await post(TEST_KEY, false);
    expect(other.statusCode).to.equal(200);
    await other.body.dump();
    await readRest(held);
  });
});

/** A response as KeyConcurrency sees it: closes when told. */
function fakeResponse(destroyed = false): ServerResponse & { close(): void } {
  const emitter = Object.assign(new EventEmitter(), { destroyed, close: () => emitter.emit('close') });
  return emitter as unknown as ServerResponse & { close(): void };
}

describe('KeyConcurrency', () => {
  it('holds a slot per response until it closes, per key', () => {
    const slots = new KeyConcurrency(2);
    const key = { id: 'key_a' };
    const first = fakeResponse();
    slots.acquire(key, first);
    slots.acquire(key, fakeResponse());
    let refusal: unknown;
    try {
      slots.acquire(key, fakeResponse());
    } catch (error) {
      refusal = error;
    }
    expect(isGatewayError(refusal) && refusal.status).to.equal(429);
    slots.acquire({ id: 'key_b' }, fakeResponse());
    expect(slots.inFlight('key_b')).to.equal(1);
    first.close();
    expect(slots.inFlight('key_a')).to.equal(1);
    slots.acquire(key, fakeResponse());
    expect(slots.inFlight('key_a')).to.equal(2);
  });

  it('counts nothing without a cap: no key concurrency, no default, no team cap', () => {
    const slots = new KeyConcurrency();
    for (let index = 0; index < 1000; index += 1)
      slots.acquire({ id: 'key_a', team: { id: 'research', name: 'research', rpm: 5 } }, fakeResponse());
    expect(slots.inFlight('key_a')).to.equal(0);
  });

  it("holds a team's slots across its keys, naming the team in the refusal", () => {
    const slots = new KeyConcurrency();
    const team = { id: 'team_research', name: 'research', concurrency: 2 };
    const first = fakeResponse();
    slots.acquire({ id: 'key_a', team }, first);
    slots.acquire({ id: 'key_b', team }, fakeResponse());
    let refusal: unknown;
    try {
      slots.acquire({ id: 'key_c', team }, fakeResponse(), 'anthropic');
    } catch (error) {
      refusal = error;
    }
    expect(isGatewayError(refusal) && refusal.detail).to.equal(
      "Concurrency limit exceeded: at most 2 requests at once (team 'research'); retry when one of them has finished",
    );
    expect(isGatewayError(refusal) && refusal.headers).to.deep.equal({
      'anthropic-ratelimit-concurrency-limit': '2',
      'anthropic-ratelimit-concurrency-remaining': '0',
      'Retry-After': '1',
    });
    expect(isGatewayError(refusal) && refusal.limit).to.deep.equal({ kind: 'concurrency', scope: 'team' });
    first.close();
    slots.acquire({ id: 'key_c', team }, fakeResponse());
  });

  it("takes no slot for a response whose client already left, and a key's own limit wins", () => {
    const slots = new KeyConcurrency(1);
    slots.acquire({ id: 'key_a' }, fakeResponse(true));
    expect(slots.inFlight('key_a')).to.equal(0);
    slots.acquire({ id: 'key_a', concurrency: 2 }, fakeResponse());
    slots.acquire({ id: 'key_a', concurrency: 2 }, fakeResponse());
    expect(slots.inFlight('key_a')).to.equal(2);
  });
});

describe('GATEWAY_KEY_CONCURRENCY', () => {
  it('is off by default and takes a positive integer', () => {
    expect(loadConfig({}, '/nonexistent').keyConcurrency).to.equal(undefined);
    expect(loadConfig({ GATEWAY_KEY_CONCURRENCY: '8' }, '/nonexistent').keyConcurrency).to.equal(8);
    expect(() => loadConfig({ GATEWAY_KEY_CONCURRENCY: '0' }, '/nonexistent')).to.throw(
      "GATEWAY_KEY_CONCURRENCY must be an integer >= 1, got '0'",
    );
  });
});

describe('concurrent streams of one key on default settings', function () {
  this.timeout(120_000);
  const STREAMS = 500;
  let upstream: ScriptedUpstream;
  let test: TestGateway;
  let started = 0;
  let release: () => void = () => {};
  const allStarted = new Promise<void>((resolve) => (release = resolve));

  before(async () => {
    upstream = await ScriptedUpstream.start();
    upstream.script = async (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(FIRST);
      started += 1;
      if (started === STREAMS) release();
      // Every stream stays open until all of them are open at once.
      await allStarted;
      res.end(LAST);
    };
    // Every setting at its default; the key's own rpm only lets 500 requests into one minute.
    test = await startTestGateway({ env: { ZETA_BASE_URL: upstream.url } });
  });
  after(async () => {
    release();
    await test.close();
    await upstream.close();
  });

  it(`serves ${STREAMS} streams of one key at once, every one 200 with its whole stream`, async () => {
    const { key } = await test.gateway.keys.create({ name: 'batch job', rpm: 10_000 });
    const stream = async () => {
      const response = await request(`${test.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: body(true),
      });
      return { status: response.statusCode, text: await response.body.text() };
    };
    const answers = await Promise.all(Array.from({ length: STREAMS }, stream));
    expect(
      answers.filter((answer) => answer.status !== 200).map((answer) => `${answer.status} ${answer.text}`),
    ).to.deep.equal([]);
    expect(answers.every((answer) => answer.text.endsWith('data: [DONE]\n\n'))).to.equal(true);
    expect(started).to.equal(STREAMS);
  });
});
