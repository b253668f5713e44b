import { expect } from 'chai';
import { withinOneWindow } from '../helpers/limit-window.ts';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { request } from 'undici';
import { acceptedRequestId } from '../../src/core/incoming-request.ts';
import { eventually } from '../helpers/eventually.ts';
import { startTestGateway, TEST_KEY, UPSTREAM_KEY, type TestGateway } from '../helpers/test-gateway.ts';

/** Every JSON line the gateway logged, and the raw text for grepping. */
class CapturedLog {
  readonly stream = new PassThrough();
  text = '';
  constructor() {
    this.stream.on('data', (chunk: Buffer) => (this.text += chunk.toString('utf8')));
  }
  lines(): Record<string, any>[] {
    return this.text
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as Record<string, any>);
  }
  accessLines(): Record<string, any>[] {
    return this.lines().filter((line) => line.msg === 'request');
  }
}

async function post(test: TestGateway, path: string, body: unknown, headers: Record<string, string> = {}) {
  const response = await request(`${test.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  return { status: response.statusCode, headers: response.headers, text: await response.body.text() };
}

const chat = (model: string, extra: Record<string, unknown> = {}) => ({
  model,
  messages: [{ role: 'user', content: 'hello there' }],
  ...extra,
});

/** The value of one sample of the exposition text, or undefined when absent. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const match = /^([a-z_:]+)(?:\{([^}]*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const present = Object.fromEntries([...(match[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
    if (Object.entries(labels).every(([key, value]) => present[key] === value)) return Number(match[3]);
  }
  return undefined;
}

describe('request ids', () => {
  it('accepts 1–128 characters of [A-Za-z0-9._:-] and generates an id otherwise', () => {
    expect(acceptedRequestId('abc-123_x.y:z')).to.equal('abc-123_x.y:z');
    expect(acceptedRequestId('a'.repeat(128))).to.equal('a'.repeat(128));
    for (const bad of ['', 'a'.repeat(129), 'has space', 'semi;colon', 'ünï', undefined, ['a', 'b']]) {
      const id = acceptedRequestId(bad as string | string[] | undefined);
      expect(id, String(bad)).to.match(/^[0-9a-f-]{36}$/);
    }
  });
});

describe('access log, request ids and metrics through the gateway', function () {
  this.timeout(60_000);
  let test: TestGateway;
  let log: CapturedLog;

  beforeEach(async () => {
    log = new CapturedLog();
    test = await startTestGateway({
      env: { LOG_LEVEL: 'info', RATE_LIMIT_MAX: '6' },
      mock: { cachedTokens: 2 },
      logTo: log.stream,
    });
  });
  afterEach(async () => test.close());

  it('round-trips a request id: answer, upstream, access log and usage record', async () => {
    const response = await post(test, '/v1/chat/completions', chat('zeta/zeta-k3'), { 'x-request-id': 'trace-42.a:b' });
    expect(response.status, response.text).to.equal(200);
    expect(response.headers['x-request-id']).to.equal('trace-42.a:b');
    expect(response.headers['x-upstream-request-id']).to.match(/^req_/);
    expect(test.upstreams.zeta.requests[0]!.headers['x-request-id']).to.equal('trace-42.a:b');
    await eventually(() => log.accessLines().some((line) => line.request_id === 'trace-42.a:b'), 'the access-log line');
    await test.gateway.flushUsage();
    const journal = await readFile(join(test.dataDir, 'usage.jsonl'), 'utf8');
    expect(
      journal
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line).requestId),
    ).to.include('trace-42.a:b');
  });

  it('replaces an unacceptable id and answers every path with one, Express routes and errors included', async () => {
    const bad = await post(test, '/v1/chat/completions', chat('zeta/zeta-k3'), {
      'x-request-id': 'bad id with spaces',
    });
    expect(bad.headers['x-request-id']).to.match(/^[0-9a-f-]{36}$/);
    expect(test.upstreams.zeta.requests[0]!.headers['x-request-id']).to.equal(bad.headers['x-request-id']);
    const native = await post(test, '/v1/chat', { model: 'zeta/zeta-k3', input: 'hi' }, { 'x-request-id': 'native-1' });
    expect(native.status, native.text).to.equal(200);
    expect(native.headers['x-request-id']).to.equal('native-1');
    expect(test.upstreams.zeta.requests[1]!.headers['x-request-id']).to.equal('native-1');
    for (const [method, path] of [
      ['GET', '/v1/models'],
      ['GET', '/healthz'],
      ['GET', '/nowhere'],
      ['POST', '/v1/messages'],
    ] as const) {
      const response = await request(`${test.url}${path}`, {
        method,
        headers: { 'x-request-id': `id-${path.length}` },
      });
      await response.body.dump();
      expect(response.headers['x-request-id'], path).to.equal(`id-${path.length}`);
    }
  });

  it('logs one JSON line per request with ids, models, status, timings and tokens, and never a credential', async () => {
    await post(test, '/v1/chat/completions', chat('zeta/zeta-k3'), { 'x-request-id': 'json-1' });
    await post(test, '/v1/chat/completions', chat('zeta/zeta-k3', { stream: true }), { 'x-request-id': 'stream-1' });
    await post(
      test,
      '/v1/messages',
      { model: 'beta-latest', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] },
      { 'x-request-id': 'alias-1' },
    );
    const refused = await post(test, '/v1/chat/completions', chat('zeta/zeta-k3'), {
      authorization: 'Bearer sk-not-a-known-key-123',
      'x-request-id': 'refused-1',
    });
    expect(refused.status).to.equal(401);
    await request(`${test.url}/v1/models`, {
      headers: { 'x-request-id': 'catalog-1', 'x-api-key': 'sk-secret-in-x-api-key' },
    }).then((r) => r.body.dump());
    await eventually(() => log.accessLines().length >= 5, 'five access-log lines');
    expect(log.accessLines()).to.have.length(5);
    const byId = Object.fromEntries(log.accessLines().map((line) => [line.request_id, line]));
    expect(byId['json-1']).to.include({
      level: 30,
      route: 'chat-completions',
      requested_model: 'zeta/zeta-k3',
      model: 'zeta/zeta-k3',
      status: 200,
      outcome: 'complete',
      stream: false,
    });
    for (const field of ['duration_ms', 'overhead_ms', 'ttfb_ms', 'input_tokens', 'output_tokens'])
      expect(byId['json-1'], field).to.have.property(field).that.is.a('number');
    expect(byId['json-1']!.overhead_ms).to.be.at.most(byId['json-1']!.duration_ms);
    expect(byId['json-1']!.cached_tokens).to.equal(2);
    expect(byId['json-1']!.key_id).to.be.a('string').and.not.to.contain(TEST_KEY);
    expect(byId['stream-1']).to.include({ stream: true, status: 200, outcome: 'complete' });
    expect(byId['stream-1']!.output_tokens).to.be.above(0);
    expect(byId['alias-1']).to.include({ route: 'messages', requested_model: 'beta-latest', status: 200 });
    expect(byId['alias-1']!.model).to.match(/^beta\//);
    expect(byId['refused-1']).to.include({
      route: 'chat-completions',
      status: 401,
      error_code: 'GW_ERR_UNAUTHENTICATED',
    });
    expect(byId['catalog-1']).to.include({ route: '/v1/models', status: 200 });
    for (const secret of [
      TEST_KEY,
      UPSTREAM_KEY,
      'sk-not-a-known-key-123',
      'sk-secret-in-x-api-key',
      'Bearer',
      'authorization',
    ]) {
      expect(log.text, secret).not.to.contain(secret);
    }
  });

  it('serves every metric, counting requests, tokens, overhead, upstream attempts and rate-limit rejections', async () => {
    await withinOneWindow(15_000);
    for (let i = 0; i < 3; i += 1)
      expect((await post(test, '/v1/chat/completions', chat('zeta/zeta-k3'))).status).to.equal(200);
    expect((await post(test, '/v1/chat/completions', chat('zeta/zeta-k3', { stream: true }))).status).to.equal(200);
    let limited = 0;
    for (let i = 0; i < 6; i += 1)
      if ((await post(test, '/v1/chat/completions', chat('zeta/zeta-k3'))).status === 429) limited += 1;
    expect(limited).to.be.above(0);
    const response = await request(`${test.url}/metrics`);
    expect(response.statusCode).to.equal(200);
    expect(response.headers['content-type']).to.contain('text/plain');
    const text = await response.body.text();
    for (const name of [
      'gateway_requests_total',
      'gateway_request_duration_seconds_bucket',
      'gateway_overhead_seconds_bucket',
      'gateway_time_to_first_byte_seconds_bucket',
      'gateway_tokens_total',
      'gateway_upstream_requests_total',
      'gateway_endpoint_up',
      'gateway_rate_limited_total',
      'gateway_open_streams',
      'gateway_usage_queue_depth',
      'gateway_config_reloads_total',
      'gateway_cached_input_tokens_total',
      'process_cpu_seconds_total',
      'nodejs_eventloop_lag_seconds',
    ]) {
      expect(text, name).to.match(new RegExp(`^${name}`, 'm'));
    }
    expect(
      sample(text, 'gateway_requests_total', { route: 'chat-completions', model: 'zeta/zeta-k3', status: '200' }),
    ).to.equal(10 - limited);
    expect(
      sample(text, 'gateway_requests_total', { route: 'chat-completions', model: 'none', status: '429' }),
    ).to.equal(limited);
    expect(sample(text, 'gateway_rate_limited_total', { reason: 'rate_limit' })).to.equal(limited);
    expect(sample(text, 'gateway_request_duration_seconds_count', { route: 'chat-completions' })).to.equal(10);
    expect(sample(text, 'gateway_overhead_seconds_count', { route: 'chat-completions' })).to.equal(10);
    expect(sample(text, 'gateway_time_to_first_byte_seconds_count', { route: 'chat-completions' })).to.equal(
      10 - limited,
    );
    expect(sample(text, 'gateway_tokens_total', { model: 'zeta/zeta-k3', type: 'input' })).to.be.above(0);
    expect(sample(text, 'gateway_tokens_total', { model: 'zeta/zeta-k3', type: 'output' })).to.be.above(0);
    expect(sample(text, 'gateway_tokens_total', { model: 'zeta/zeta-k3', type: 'cached' })).to.equal(
      2 * (10 - limited),
    );
    // Per endpoint, by its configured name (the index of a single ZETA_BASE_URL).
    expect(sample(text, 'gateway_cached_input_tokens_total', { provider: 'zeta', endpoint: '0' })).to.equal(
      2 * (10 - limited),
    );
    expect(
      sample(text, 'gateway_upstream_requests_total', {
        provider: 'zeta',
        endpoint: test.upstreams.zeta.url.replace(/\/v1$/, ''),
        outcome: 'ok',
      }),
    ).to.equal(10 - limited);
    expect(sample(text, 'gateway_endpoint_up', { provider: 'zeta' })).to.equal(1);
    expect(sample(text, 'gateway_endpoint_up', { provider: 'alpha' })).to.equal(1);
    expect(sample(text, 'gateway_open_streams')).to.equal(0);
    expect(sample(text, 'gateway_config_reloads_total', { result: 'applied' })).to.equal(0);
    expect(text).not.to.contain(TEST_KEY);
  });

  it('names the client address and user agent on every access line, model routes and the others alike', async () => {
    await post(test, '/v1/chat/completions', chat('zeta/zeta-k3'), {
      'x-request-id': 'agent-1',
      'user-agent': 'OpenAI/JS 6.49.0',
    });
    await post(test, '/v1/chat/completions', chat('zeta/zeta-k3', { stream: true }), {
      'x-request-id': 'agent-2',
      'user-agent': 'x'.repeat(1000),
    });
    await request(`${test.url}/v1/models`, { headers: { 'x-request-id': 'agent-3', 'user-agent': 'curl/8.5.0' } }).then(
      (r) => r.body.dump(),
    );
    await post(test, '/v1/chat/completions', chat('zeta/zeta-k3'), {
      'x-request-id': 'agent-4',
      authorization: 'Bearer sk-not-a-known-key-123',
    });
    await eventually(() => log.accessLines().length >= 4, 'four access-log lines');
    const byId = Object.fromEntries(log.accessLines().map((line) => [line.request_id, line]));
    expect(byId['agent-1']).to.include({ client_address: '127.0.0.1', user_agent: 'OpenAI/JS 6.49.0' });
    // A long header is cut: a line stays a line.
    expect(byId['agent-2']).to.include({ client_address: '127.0.0.1', user_agent: 'x'.repeat(256) });
    expect(byId['agent-3']).to.include({ route: '/v1/models', client_address: '127.0.0.1', user_agent: 'curl/8.5.0' });
    expect(byId['agent-4']).to.include({ status: 401, client_address: '127.0.0.1' });
  });

  it('names the client a trusted proxy forwards for, not the proxy', async () => {
    const proxied = new CapturedLog();
    const behind = await startTestGateway({
      env: { LOG_LEVEL: 'info', GATEWAY_TRUSTED_PROXIES: '127.0.0.1' },
      logTo: proxied.stream,
    });
    try {
      await post(behind, '/v1/chat/completions', chat('zeta/zeta-k3'), {
        'x-request-id': 'proxied-1',
        'x-forwarded-for': '2001:db8::7, 203.0.113.9',
      });
      await request(`${behind.url}/healthz`, {
        headers: { 'x-request-id': 'proxied-2', 'x-forwarded-for': '198.51.100.4' },
      }).then((r) => r.body.dump());
      await eventually(() => proxied.accessLines().length >= 2, 'two access-log lines');
      const byId = Object.fromEntries(proxied.accessLines().map((line) => [line.request_id, line]));
      expect(byId['proxied-1']!.client_address).to.equal('203.0.113.9');
      expect(byId['proxied-2']!.client_address).to.equal('198.51.100.4');
    } finally {
      await behind.close();
    }
  });

  it('says which build runs: gateway_build_info with the version, the revision and the Node.js version', async () => {
    const built = await startTestGateway({ env: { GATEWAY_REVISION: '0123abc' } });
    try {
      const text = await (await request(`${built.url}/metrics`)).body.text();
      const version = (
        JSON.parse(await readFile(join(import.meta.dirname, '..', '..', 'package.json'), 'utf8')) as { version: string }
      ).version;
      expect(text).to.contain('# TYPE gateway_build_info gauge');
      expect(
        sample(text, 'gateway_build_info', { version, revision: '0123abc', nodejs_version: process.versions.node }),
      ).to.equal(1);
      const unnamed = await (await request(`${test.url}/metrics`)).body.text();
      expect(sample(unnamed, 'gateway_build_info', { version, revision: 'unknown' })).to.equal(1);
    } finally {
      await built.close();
    }
  });

  it('labels a model by its canonical id, never the alias or the string the client sent', async () => {
    expect(
      (
        await post(test, '/v1/messages', {
          model: 'beta-latest',
          max_tokens: 16,
          messages: [{ role: 'user', content: 'hi' }],
        })
      ).status,
    ).to.equal(200);
    expect((await post(test, '/v1/chat/completions', chat('no-such-model-from-client'))).status).to.equal(400);
    const text = await (await request(`${test.url}/metrics`)).body.text();
    expect(text).not.to.contain('beta-latest');
    expect(text).not.to.contain('no-such-model-from-client');
    expect(text).to.match(/gateway_requests_total\{route="messages",model="beta\/[^"]+",status="200"\} 1/);
  });
});

describe('the access line of a request whose usage is estimated after the client left', function () {
  this.timeout(30_000);
  let test: TestGateway;
  let log: CapturedLog;

  beforeEach(async () => {
    log = new CapturedLog();
    // A slow stream, so the client can leave before the usage event.
    test = await startTestGateway({ env: { LOG_LEVEL: 'info' }, mock: { chunkDelayMs: 40 }, logTo: log.stream });
  });
  afterEach(async () => test.close());

  /** Starts a stream, reads its first chunk and leaves. */
  const leaveMidStream = async (path: string, body: unknown, requestId: string) => {
    const controller = new AbortController();
    const response = await request(`${test.url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json', 'x-request-id': requestId },
      body: JSON.stringify(body),
      signal: controller.signal,
    });
    expect(response.statusCode).to.equal(200);
    await response.body[Symbol.asyncIterator]().next();
    controller.abort();
  };
  const usageRecords = async () => {
    await test.gateway.flushUsage();
    const journal = await readFile(join(test.dataDir, 'usage.jsonl'), 'utf8');
    return Object.fromEntries(
      journal
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as Record<string, any>)
        .map((record) => [record.requestId, record]),
    );
  };

  it('carries the tokens its usage record stores, in its one line', async () => {
    await leaveMidStream('/v1/chat/completions', chat('zeta/zeta-k3', { stream: true }), 'left-chat');
    // Messages streams report their input at the start: the output is estimated beside it.
    await leaveMidStream(
      '/v1/messages',
      { model: 'beta-latest', max_tokens: 64, stream: true, messages: [{ role: 'user', content: 'hello there' }] },
      'left-messages',
    );
    await eventually(
      () => log.accessLines().filter((line) => line.request_id?.startsWith('left-')).length === 2,
      'both access lines',
    );
    const records = await usageRecords();
    expect(records['left-chat']!.estimated, 'no usage reported before the client left').to.equal(true);
    for (const id of ['left-chat', 'left-messages']) {
      const lines = log.accessLines().filter((line) => line.request_id === id);
      expect(lines, id).to.have.length(1);
      const [line] = lines;
      const record = records[id];
      expect(record, id).to.include({ status: 499, outcome: 'client_closed' });
      expect(line, id).to.include({ status: 499, outcome: 'client_closed', stream: true });
      // Flagged exactly when the record is (Messages: only when the counted output beat the reported one).
      expect(line!.tokens_estimated === true, id).to.equal(record!.estimated);
      expect(record!.inputTokens, id).to.be.above(0);
      expect(line!.input_tokens, id).to.equal(record!.inputTokens);
      expect(line!.output_tokens, id).to.equal(record!.outputTokens);
      expect(line!.cached_tokens, id).to.equal(record!.cachedTokens);
    }
  });

  it('leaves the line of a complete request as it was: the reported tokens, no estimate flag', async () => {
    await post(test, '/v1/chat/completions', chat('zeta/zeta-k3', { stream: true }), { 'x-request-id': 'whole' });
    await eventually(() => log.accessLines().some((line) => line.request_id === 'whole'), 'the access line');
    const [line] = log.accessLines().filter((entry) => entry.request_id === 'whole');
    const record = (await usageRecords()).whole!;
    expect(record.estimated).to.equal(false);
    expect(line).not.to.have.property('tokens_estimated');
    expect(line).to.include({
      input_tokens: record.inputTokens,
      output_tokens: record.outputTokens,
      cached_tokens: record.cachedTokens,
    });
  });
});

describe('metrics on their own port', function () {
  this.timeout(30_000);
  it('serves /metrics on METRICS_PORT and not on the main port', async () => {
    const test = await startTestGateway({ env: { METRICS_PORT: '0' } });
    try {
      expect(test.gateway.metricsUrl).to.be.a('string');
      const metrics = await request(`${test.gateway.metricsUrl}/metrics`);
      expect(metrics.statusCode).to.equal(200);
      expect(await metrics.body.text()).to.contain('gateway_requests_total');
      const main = await request(`${test.url}/metrics`);
      expect(main.statusCode).to.equal(404);
      expect(((await main.body.json()) as { detail: string }).detail).to.equal('No route for GET /metrics');
      const other = await request(`${test.gateway.metricsUrl}/other`);
      expect(other.statusCode).to.equal(404);
      expect(other.headers['content-type']).to.contain('application/json');
      await other.body.dump();
    } finally {
      await test.close();
    }
  });
});
