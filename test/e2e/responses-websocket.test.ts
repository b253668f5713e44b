import { expect } from 'chai';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { request as httpRequest, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { WebSocket } from 'ws';
import { EVENTS } from '../../src/core/diagnostics.ts';
import type { ExchangeRecord } from '../../src/core/exchange.ts';
import { metersOfLimits, requestMeter } from '../../src/usage/limit-meters.ts';
import type { UsageRecord } from '../../src/usage/usage-accounting.ts';
import { eventually } from '../helpers/eventually.ts';
import { withinOneWindow } from '../helpers/limit-window.ts';
import { handshake, SdkSocket, type ServerEvent } from '../helpers/responses-socket.ts';
import { ScriptedUpstream } from '../helpers/scripted-upstream.ts';
import { startTestGateway, TEST_KEY, type TestGateway } from '../helpers/test-gateway.ts';

const BEARER = { authorization: `Bearer ${TEST_KEY}` };

/** The same request without the handshake, answered at once by the data plane (405): what "at once" takes here. */
async function plainGet(url: string, path: string): Promise<number> {
  const started = performance.now();
  const response = await request(`${url}${path}`);
  await response.body.text();
  expect(response.statusCode).to.equal(405);
  return performance.now() - started;
}

/** A plain HTTP request (method, path, headers, body): its status, `Allow` and text. */
interface PlainRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: Record<string, string | number>;
}

function plain(url: string, options: PlainRequest, body = '') {
  const { hostname, port } = new URL(url);
  return new Promise<{ status: number; allow: unknown; text: string }>((resolve, reject) => {
    const req = httpRequest({ host: hostname, port, ...options });
    req.on('response', (res) => {
      let text = '';
      res.on('data', (chunk: Buffer) => (text += chunk.toString()));
      res.on('end', () => resolve({ status: res.statusCode!, allow: res.headers.allow, text }));
    });
    req.on('upgrade', () => reject(new Error('switched protocols')));
    req.on('error', reject);
    req.end(body);
  });
}

async function records(test: TestGateway): Promise<UsageRecord[]> {
  await test.gateway.flushUsage();
  const text = await readFile(join(test.dataDir, 'usage.jsonl'), 'utf8').catch(() => '');
  return text
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as UsageRecord);
}

/** The value of a metric series in the gateway's `/metrics` (0 when absent). */
async function metric(test: TestGateway, series: string): Promise<number> {
  const text = await (await request(`${test.url}/metrics`)).body.text();
  const line = text.split('\n').find((entry) => entry.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

function drained(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}

const create = (input: string, extra: Record<string, unknown> = {}) => ({ model: 'alpha/gen-5.5', input, ...extra });
const textOf = (events: ServerEvent[]): string => events.at(-1)!.response!.output[0]!.content[0]!.text;
const isError = (event: ServerEvent) => event.type === 'error';

describe('Responses over WebSocket, with the official SDK (ResponsesWS)', function () {
  this.timeout(120_000);
  let test: TestGateway;
  const sockets: SdkSocket[] = [];
  const open = (key: string) => {
    const socket = new SdkSocket(test.url, key);
    sockets.push(socket);
    return socket;
  };

  before(async () => {
    test = await startTestGateway({ env: { GATEWAY_ADMIN_TOKEN: 'admin-token-for-websocket-tests-0001' } });
  });
  afterEach(() => sockets.splice(0).forEach((socket) => socket.close()));
  after(async () => {
    await test.close();
  });

  it('runs three response.create in sequence: events in order, three exact usage records, rpm and tpm', async () => {
    await withinOneWindow(30_000);
    const { key, record } = await test.gateway.keys.create({ name: 'socket', tpm: 1_000_000 });
    const recorded: ExchangeRecord[] = [];
    const off = EVENTS.exchangeRecorded.subscribe(test.gateway.source, ({ record: taken }) => recorded.push(taken));
    const before = test.allRequests().length;
    const inputs = ['first turn', 'second turn', 'third turn'];
    try {
      const socket = open(key);
      const answers: ServerEvent[][] = [];
      for (const input of inputs) {
        const transport = { stream: false, background: false };
        answers.push(await socket.respond(create(input, { ...transport, metadata: { turn: input } })));
      }

      const upstream = test.allRequests().slice(before);
      expect(upstream).to.have.length(3);
      answers.forEach((events, index) => {
        // The Responses stream's events, one message each, in the order sent.
        expect(events.map((event) => event.sequence_number)).to.deep.equal(events.map((_, at) => at));
        expect(events[0]!.type).to.equal('response.created');
        expect(events.at(-1)!.type).to.equal('response.completed');
        const deltas = events.filter((event) => event.type === 'response.output_text.delta').map(({ delta }) => delta);
        expect(deltas.join('')).to.equal(`Mock reply to: ${inputs[index]}`);
        expect(textOf(events)).to.equal(deltas.join(''));
        // Forwarded as POST /v1/responses with stream: true, the transport's fields left out, the rest as sent.
        const forwarded = upstream[index]!;
        expect(forwarded.path).to.equal('/v1/responses');
        expect(forwarded.rawBody.startsWith('{"stream":true,')).to.equal(true);
        const input = inputs[index];
        expect(forwarded.body).to.deep.equal({ stream: true, model: 'gen-5.5', input, metadata: { turn: input } });
      });

      // One usage record per response, exactly what the upstream reported for it.
      await test.gateway.flushUsage();
      expect(recorded).to.have.length(3);
      recorded.forEach((taken, index) => {
        const reported = upstream[index]!.reportedUsage!;
        expect(taken).to.deep.include({ keyId: record.id, route: 'responses', status: 200, stream: true });
        expect(taken.outcome).to.equal('complete');
        expect(taken.usage).to.deep.include({ inputTokens: reported.inputTokens, outputTokens: reported.outputTokens });
      });
      expect(new Set(recorded.map((taken) => taken.requestId)).size).to.equal(3);

      // The key's request and token limits counted each response.
      const now = Date.now();
      const rpm = requestMeter('key', record.id, 100, 60_000, now);
      const [tpm] = metersOfLimits('key', record.id, { tpm: 1_000_000 }, now);
      const [requests, tokens] = await test.gateway.limits.peek([rpm.counter, tpm!.counter]);
      expect(requests).to.equal(3);
      const totals = upstream.map(({ reportedUsage }) => reportedUsage!.inputTokens + reportedUsage!.outputTokens);
      const used = totals.reduce((sum, total) => sum + total, 0);
      expect(tokens).to.equal(used);
    } finally {
      off();
    }
  });

  it('refuses a bad key with 401 before any upgrade, in JSON; takes a bearer token or x-api-key', async () => {
    const badKey = 'sk-not-a-key-of-this-gateway-0123456789';
    for (const headers of [{ authorization: `Bearer ${badKey}` }, {}] as Record<string, string>[]) {
      const refused = await handshake(test.url, '/v1/responses', headers);
      expect(refused.status).to.equal(401);
      expect(refused.headers).to.include({ 'content-type': 'application/json; charset=utf-8', connection: 'close' });
      expect(refused.body.error).to.include({ type: 'authentication_error', code: 'GW_ERR_UNAUTHENTICATED' });
    }
    // The SDK sees the handshake refused: an error naming the status, and the socket closed.
    const socket = open(badKey);
    const errors: string[] = [];
    socket.ws.on('error', (error) => errors.push(error.message));
    expect((await socket.whenClosed()).code).to.equal(1006);
    expect(errors.join()).to.include('401');

    const byApiKey = await handshake(test.url, '/v1/responses', { 'x-api-key': TEST_KEY });
    expect(byApiKey.status).to.equal(101);
    expect(byApiKey.headers['x-request-id']).to.match(/^[0-9a-f-]{36}$/);
  });

  it('refuses in JSON, before anything is switched, a handshake no WebSocket can come of', async () => {
    const noKey = await handshake(test.url, '/v1/responses', { ...BEARER, 'sec-websocket-key': 'short' });
    expect(noKey.status).to.equal(400);
    expect(noKey.body.error!.message).to.include('Sec-WebSocket-Key');
    const version = await handshake(test.url, '/v1/responses', { ...BEARER, 'sec-websocket-version': '12' });
    expect(version.status).to.equal(400);
    const protocol = await handshake(test.url, '/v1/responses', { ...BEARER, 'sec-websocket-protocol': 'a b' });
    expect(protocol.status).to.equal(400);
    expect(protocol.body.error!.message).to.include('Sec-WebSocket-Protocol');
    const headers = { ...BEARER, connection: 'Upgrade', upgrade: 'websocket' };
    const posted = await plain(test.url, { method: 'POST', path: '/V1/Responses/', headers });
    expect(posted).to.deep.include({ status: 405, allow: 'GET' });
  });

  it('checks the key at each response: one revoked while open is refused in band, then closed', async () => {
    const { key, record } = await test.gateway.keys.create({ name: 'revoked while open' });
    const socket = open(key);
    expect((await socket.respond(create('before'))).at(-1)!.type).to.equal('response.completed');
    await test.gateway.keys.revoke(record.id);
    const message = 'This API key has been revoked';
    expect(await socket.respond(create('after'))).to.deep.equal([
      {
        type: 'error',
        status: 403,
        code: 'GW_ERR_FORBIDDEN',
        message,
        param: null,
        detail: message,
        error: { message, type: 'permission_error', param: null, code: 'GW_ERR_FORBIDDEN' },
      },
    ]);
    expect(await socket.whenClosed()).to.deep.equal({ code: 1008, reason: 'API key not accepted' });
  });

  it('answers an upgrade on another route at once: 426, JSON naming the route that takes one', async () => {
    // What an answer given at once takes on this machine now: the slowest of plain requests the data plane refuses.
    const plainTimes = await Promise.all([0, 1, 2, 3, 4].map(() => plainGet(test.url, '/v1/chat/completions')));
    const answered = await handshake(test.url, '/v1/chat/completions', BEARER);
    expect(answered.status).to.equal(426);
    expect(answered.headers).to.include({ 'content-type': 'application/json; charset=utf-8', connection: 'close' });
    expect(answered.body.websocket_routes).to.deep.equal(['/v1/responses']);
    expect(answered.body.error).to.include({ code: 'GW_ERR_WEBSOCKET_NOT_SERVED', type: 'invalid_request_error' });
    expect(answered.body.error!.message).to.include('GET /v1/responses');
    // Within 50 ms of what the plain requests took: nothing waited on a handshake or a timeout.
    expect(answered.ms).to.be.at.most(Math.max(...plainTimes) + 50);

    const control = await handshake(test.url, '/healthz');
    expect(control.status).to.equal(426);
    expect(control.body.detail).to.include('GET /v1/responses');
  });

  it('serves a request upgrading to something else (Upgrade: h2c) as plain HTTP, body and all', async () => {
    const body = JSON.stringify(create('over h2c'));
    const headers = {
      ...BEARER,
      connection: 'Upgrade, HTTP2-Settings',
      upgrade: 'h2c',
      'http2-settings': 'AAMAAABkAAQCAAAAAAIAAAAA',
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
    };
    const answer = await plain(test.url, { method: 'POST', path: '/v1/responses', headers }, body);
    expect(answer.status).to.equal(200);
    expect(JSON.parse(answer.text).output[0].content[0].text).to.equal('Mock reply to: over h2c');
  });

  it('holds 500 sockets of one key on default settings: each answers, responses count on its rpm', async () => {
    await withinOneWindow(40_000);
    const { key } = await test.gateway.keys.create({ name: 'five hundred sockets' });
    const many = Array.from({ length: 500 }, () => open(key));
    // Each socket answers a message of its own (nothing to cancel: no request is counted for it).
    for (const socket of many) socket.send({ type: 'response.cancel' });
    const answers = await Promise.all(many.map((socket) => socket.until(0, isError)));
    for (const [answer] of answers) expect(answer).to.include({ code: 'GW_ERR_NOTHING_TO_CANCEL', status: 400 });
    expect(await metric(test, 'gateway_websocket_connections')).to.equal(500);

    // The key's 100 requests a minute (the default), one response each on 100 of the sockets at once.
    const hundred = many.slice(0, 100);
    const responses = await Promise.all(hundred.map((socket, index) => socket.respond(create(`socket ${index}`))));
    responses.forEach((events, index) => expect(textOf(events)).to.equal(`Mock reply to: socket ${index}`));
    // The 101st is refused in band, and its socket stays open and answers.
    const refused = await many[100]!.respond(create('one too many'));
    expect(refused).to.have.length(1);
    expect(refused[0]).to.include({ type: 'error', status: 429, code: 'GW_ERR_RATE_LIMITED' });
    expect((await many[100]!.respond(create('still over the limit')))[0]).to.include({ status: 429 });
    expect(many.every((socket) => socket.closed === undefined)).to.equal(true);

    many.forEach((socket) => socket.close());
    await eventually(async () => (await metric(test, 'gateway_websocket_connections')) === 0, 'every socket closed');
  });

  it('answers a message it does not take with an error event, keeps the socket, counts it all', async () => {
    const socket = open(TEST_KEY);
    socket.ws.sendRaw(new TextEncoder().encode('not json'));
    socket.send({ type: 'session.update' });
    socket.send({ type: 'response.create', model: 'alpha/gen-5.5', input: 'warm up', generate: false });
    const errors = await socket.until(0, (event) => event.param === 'generate');
    expect(errors.map((event) => [event.type, event.status, event.code])).to.deep.equal([
      ['error', 400, 'GW_ERR_INVALID_JSON'],
      ['error', 400, 'GW_ERR_BAD_REQUEST'],
      ['error', 400, 'GW_ERR_BAD_REQUEST'],
    ]);
    // A body the responses route refuses over HTTP is refused the same way here, in band.
    const invalid = await socket.respond({ model: 'alpha/gen-5.5', input: 42 });
    expect(invalid[0]).to.include({ type: 'error', status: 400, code: 'GW_ERR_VALIDATION' });
    expect((await socket.respond(create('after the errors'))).at(-1)!.type).to.equal('response.completed');
    expect(await metric(test, 'gateway_websocket_messages_received_total{type="invalid"}')).to.be.at.least(3);
    socket.close();
    const closes = () => metric(test, 'gateway_websocket_closes_total{code="1000"}');
    await eventually(async () => (await closes()) >= 1, 'the close counted by its code');
  });
});

describe('Responses over WebSocket: one response at a time, cancel, idle, caps, drain', function () {
  this.timeout(60_000);
  let test: TestGateway;
  let closed = false;
  let sockets: SdkSocket[] = [];
  const open = (key = TEST_KEY) => {
    const socket = new SdkSocket(test.url, key);
    sockets.push(socket);
    return socket;
  };

  beforeEach(async () => {
    closed = false;
    // Every stream event 60 ms apart: a response lasts long enough to act on it meanwhile.
    test = await startTestGateway({
      mock: { chunkDelayMs: 60 },
      env: {
        GATEWAY_KEY_WEBSOCKETS: '2',
        GATEWAY_WEBSOCKET_IDLE_TIMEOUT_MS: '2000',
        GATEWAY_AUTH_FAILURES_PER_MINUTE: '2',
      },
    });
  });
  afterEach(async () => {
    sockets.forEach((socket) => socket.close());
    sockets = [];
    if (!closed) await test.close();
  });

  it('runs one response at a time: a create sent meanwhile waits for it, one more is refused with 409', async () => {
    const socket = open();
    for (const input of ['one', 'two', 'three']) socket.send({ type: 'response.create', ...create(input) });
    const secondEnded = (event: ServerEvent) => event.type === 'response.completed' && textOf([event]).endsWith('two');
    const events = await socket.until(0, secondEnded);
    expect(events.find(isError)).to.include({ status: 409, code: 'GW_ERR_RESPONSE_IN_FLIGHT' });
    const responses = events.filter((event) => !isError(event));
    const firstEnd = responses.findIndex((event) => event.type === 'response.completed');
    // The second response's events all come after the first one's end, never interleaved.
    expect(responses[firstEnd + 1]!.type).to.equal('response.created');
    const first = responses.slice(0, firstEnd + 1);
    expect(first.map((event) => event.sequence_number)).to.deep.equal(first.map((_, at) => at));
    expect(test.allRequests().map((entry) => entry.body.input)).to.deep.equal(['one', 'two']);
  });

  it('cancels the response in flight: upstream dropped, what it used recorded, socket kept', async () => {
    const socket = open();
    const input = 'a reply long enough to cancel halfway through, word after word after word';
    socket.send({ type: 'response.create', ...create(input) });
    const deltaCame = await socket.until(0, (event) => event.type === 'response.output_text.delta');
    const id = deltaCame[0]!.response!.id;
    // Another response's id cancels nothing.
    socket.send({ type: 'response.cancel', response_id: 'resp_another' });
    const started = await socket.until(0, (event) => isError(event));
    expect(started.at(-1)).to.include({ code: 'GW_ERR_NOTHING_TO_CANCEL', param: 'response_id' });
    socket.send({ type: 'response.cancel', response_id: id });
    const ended = await socket.until(started.length, (event) => event.type === 'response.cancelled');
    expect(ended.at(-1)).to.deep.equal({ type: 'response.cancelled', response_id: id });
    expect(ended.some((event) => event.type === 'response.completed')).to.equal(false);
    // Nothing left to cancel: said so in band; the socket takes the next response (within its idle timeout).
    socket.send({ type: 'response.cancel' });
    const nothing = await socket.until(started.length + ended.length, isError);
    expect(nothing.at(-1)).to.include({ code: 'GW_ERR_NOTHING_TO_CANCEL' });
    expect((await socket.respond(create('next'))).at(-1)!.type).to.equal('response.completed');

    const [upstream] = test.allRequests();
    await eventually(() => upstream!.status === 200 && !upstream!.completed, 'the upstream stream dropped');
    // The cancelled response's record may land after the next one's: they are told apart by outcome.
    await eventually(async () => (await records(test)).length === 2, 'both responses recorded');
    const cancelled = (await records(test)).find((record) => record.outcome !== 'complete');
    expect(cancelled).to.deep.include({ route: 'responses', status: 499, stream: true, outcome: 'client_closed' });
    expect(cancelled!.inputTokens).to.be.greaterThan(0);
  });

  it('closes a socket idle past the idle timeout (1000), never one whose response runs longer', async () => {
    const busy = open();
    const idle = open();
    // A response of about 3 s (40 deltas 60 ms apart): more than the 2 s idle timeout.
    const answer = busy.respond(create(Array.from({ length: 80 }, (_, index) => `word${index}`).join(' ')));
    expect(await idle.whenClosed()).to.deep.equal({ code: 1000, reason: 'idle timeout' });
    expect((await answer).at(-1)!.type).to.equal('response.completed');
    expect(busy.closed).to.equal(undefined);
    expect(await busy.whenClosed()).to.deep.include({ code: 1000 });
  });

  it('counts refused keys per address: past the throttle a good key is refused 429 before upgrade', async () => {
    for (const attempt of [0, 1]) {
      const wrong = { authorization: `Bearer sk-wrong-key-${attempt}-0123456789abcdefghij` };
      expect((await handshake(test.url, '/v1/responses', wrong)).status).to.equal(401);
    }
    const throttled = await handshake(test.url, '/v1/responses', BEARER);
    expect(throttled.status).to.equal(429);
    expect(throttled.body.error).to.include({ type: 'rate_limit_error' });
  });

  it("refuses a key's sockets past its cap with 429 before upgrade, takes one once one closed", async () => {
    const first = open();
    const second = open();
    first.send({ type: 'response.cancel' });
    second.send({ type: 'response.cancel' });
    await Promise.all([first.until(0, isError), second.until(0, isError)]);
    const refused = await handshake(test.url, '/v1/responses', BEARER);
    expect(refused.status).to.equal(429);
    expect(refused.headers['retry-after']).to.equal('1');
    expect(refused.body.error).to.include({ code: 'GW_ERR_RATE_LIMITED' });
    first.close();
    await first.whenClosed();
    const again = async () => (await handshake(test.url, '/v1/responses', BEARER)).status === 101;
    await eventually(again, 'a socket taken again');
  });

  it('drains on shutdown: a response in flight ends, then its socket closes (1001); idle ones at once', async () => {
    const recorded: ExchangeRecord[] = [];
    const off = EVENTS.exchangeRecorded.subscribe(test.gateway.source, ({ record }) => recorded.push(record));
    const busy = open();
    const idle = open();
    const answer = busy.respond(create('a reply that is still streaming when the shutdown begins'));
    await busy.until(0, (event) => event.type === 'response.output_text.delta');
    idle.send({ type: 'response.cancel' });
    await idle.until(0, isError);
    closed = true;
    const closing = test.close();
    expect(await idle.whenClosed()).to.deep.equal({ code: 1001, reason: 'server shutting down' });
    expect(busy.closed).to.equal(undefined);
    expect((await answer).at(-1)!.type).to.equal('response.completed');
    expect(await busy.whenClosed()).to.deep.equal({ code: 1001, reason: 'server shutting down' });
    await closing;
    off();
    expect(recorded).to.have.length(1);
    expect(recorded[0]).to.deep.include({ status: 200, outcome: 'complete' });
  });
});

describe('Responses over WebSocket: the connection caps', function () {
  this.timeout(60_000);

  it('counts each socket as the connection it is: one past the per-address cap is refused 429 and closed', async () => {
    const test = await startTestGateway({ env: { GATEWAY_MAX_CONNECTIONS_PER_ADDRESS: '2' } });
    const held = [new SdkSocket(test.url, TEST_KEY), new SdkSocket(test.url, TEST_KEY)];
    try {
      for (const socket of held) socket.send({ type: 'response.cancel' });
      await Promise.all(held.map((socket) => socket.until(0, isError)));
      const refused = await handshake(test.url, '/v1/responses', BEARER);
      expect(refused.status).to.equal(429);
      expect(refused.headers).to.include({ 'retry-after': '1', connection: 'close' });
      held[0]!.close();
      await held[0]!.whenClosed();
      const again = async () => (await handshake(test.url, '/v1/responses', BEARER)).status === 101;
      await eventually(again, 'a socket taken again');
    } finally {
      held.forEach((socket) => socket.close());
      await test.close();
    }
  });
});

describe('Responses over WebSocket: the same pipeline as POST /v1/responses', function () {
  this.timeout(60_000);

  it('answers a repeated request from the response cache and refuses a prompt a guardrail blocks', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'websocket-guardrails-'));
    const configFile = join(dir, 'gateway.yaml');
    const guardrail = "{ name: no-codes, use: regex, on: both, action: block, patterns: ['PROJECT-[0-9]{4}'] }";
    await writeFile(configFile, `guardrails:\n  - ${guardrail}\n`);
    const test = await startTestGateway({ configFile, env: { GATEWAY_CACHE_TTL_S: '60', LOG_LEVEL: 'silent' } });
    const socket = new SdkSocket(test.url, TEST_KEY);
    try {
      const first = await socket.respond(create('the same question'));
      const second = await socket.respond(create('the same question'));
      // The second is the first one's events as the first client got them, from the cache.
      expect(second).to.deep.equal(first);
      expect(test.allRequests()).to.have.length(1);
      const blocked = await socket.respond(create('what is PROJECT-1234?'));
      expect(blocked).to.have.length(1);
      expect(blocked[0]).to.include({ type: 'error', status: 400, code: 'GW_ERR_GUARDRAIL' });
      expect(test.allRequests()).to.have.length(1);
      const kept = await records(test);
      expect(kept.map((entry) => [entry.status, entry.outcome, entry.cache])).to.deep.equal([
        [200, 'complete', undefined],
        [200, 'complete', 'hit'],
        [400, 'guardrail_blocked', undefined],
      ]);
    } finally {
      socket.close();
      await test.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('Responses over WebSocket: a client that stops reading', function () {
  this.timeout(60_000);

  it('is closed past the write timeout, upstream dropped, recorded client_stalled; others not slowed', async () => {
    const upstream = await ScriptedUpstream.start();
    let upstreamClosed = 0;
    const sse = (type: string, data: Record<string, unknown>) =>
      `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
    const usage = { input_tokens: 3, output_tokens: 2, total_tokens: 5 };
    const completed = sse('response.completed', { response: { id: 'resp_1', usage } });
    // A short answer for the reader; for the other, 16 KiB deltas for as long as the gateway takes them.
    upstream.script = async (_req, res, body) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(sse('response.created', { response: { id: 'resp_1' } }));
      if ((JSON.parse(body) as { input: string }).input === 'meanwhile') {
        res.end(sse('response.output_text.delta', { delta: 'short' }) + completed);
        return;
      }
      res.on('close', () => (upstreamClosed += 1));
      const delta = sse('response.output_text.delta', { delta: 'x'.repeat(16 * 1024) });
      while (!res.destroyed) if (!res.write(delta)) await drained(res);
    };
    const env = { GATEWAY_CLIENT_WRITE_TIMEOUT_MS: '500', ALPHA_BASE_URL: upstream.url };
    const test = await startTestGateway({ env });
    const closes: number[] = [];
    const off = EVENTS.webSocketClose.subscribe(test.gateway.source, ({ code }) => closes.push(code));
    try {
      // A ws client that stops reading its socket (ws keeps it as `_socket`) once the answer began.
      const stalled = new WebSocket(`${test.url.replace('http', 'ws')}/v1/responses`, { headers: BEARER });
      stalled.on('error', () => {});
      await new Promise((resolve) => stalled.once('open', resolve));
      stalled.once('message', () => (stalled as unknown as { _socket: { pause(): void } })._socket.pause());
      stalled.send(JSON.stringify({ type: 'response.create', ...create('a lot') }));
      await eventually(() => upstream.requests.length === 1, 'the long answer started');

      const reader = new SdkSocket(test.url, TEST_KEY);
      const events = await reader.respond(create('meanwhile'));
      const types = events.map((event) => event.type);
      expect(types).to.deep.equal(['response.created', 'response.output_text.delta', 'response.completed']);

      await eventually(() => closes.includes(1006), 'the stalled socket cut', 20_000);
      expect(upstreamClosed).to.equal(1);
      const stalledRecord = (await records(test)).find((entry) => entry.outcome !== 'complete');
      expect(stalledRecord).to.deep.include({ route: 'responses', status: 200, stream: true });
      expect(stalledRecord!.outcome).to.equal('client_stalled');
      expect(reader.closed).to.equal(undefined);
      reader.close();
      stalled.terminate();
    } finally {
      off();
      await test.close();
      await upstream.close();
    }
  });
});
