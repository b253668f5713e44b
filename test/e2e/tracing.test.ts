import { expect } from 'chai';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { eventually } from '../helpers/eventually.ts';
import { OtlpReceiver, type ReceivedSpan } from '../helpers/otlp-receiver.ts';
import { ScriptedUpstream } from '../helpers/scripted-upstream.ts';
import { startTestGateway, TEST_KEY, UPSTREAM_KEY, type TestGateway } from '../helpers/test-gateway.ts';

const TRACE_ID = '0af7651916cd43dd8448eb211c80319c';
const CLIENT_SPAN = 'b7ad6b7169203331';
const TRACEPARENT = `00-${TRACE_ID}-${CLIENT_SPAN}-01`;
const SERVER = 2;
const CLIENT = 3;
const ERROR = 2;

/** Export at once and often, so that a test waits on the receiver for milliseconds. */
const fastExport = (receiver: OtlpReceiver, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv => ({
  OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
  OTEL_BSP_SCHEDULE_DELAY: '20',
  OTEL_METRIC_EXPORT_INTERVAL: '100',
  RATE_LIMIT_MAX: '100000',
  LOG_LEVEL: 'silent',
  ...extra,
});

interface Answer {
  readonly status: number;
  readonly requestId: string;
  readonly text: string;
}

async function post(
  test: TestGateway,
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
  key = TEST_KEY,
): Promise<Answer> {
  const response = await request(`${test.url}${path}`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${key}`,
      'x-api-key': key,
      'anthropic-version': '2023-06-01',
      'content-type': 'application/json',
      ...headers,
    },
    body: JSON.stringify(body),
  });
  return {
    status: response.statusCode,
    requestId: String(response.headers['x-request-id']),
    text: await response.body.text(),
  };
}

/** The server span of a request (by the gateway's request id) and its attempt spans, once all are exported. */
async function spansOf(
  receiver: OtlpReceiver,
  requestId: string,
  attempts = 1,
): Promise<{ server: ReceivedSpan; attempts: ReceivedSpan[] }> {
  let server: ReceivedSpan | undefined;
  // A cut stream's server span ends once its usage estimate is recorded (the tokenizer thread may be starting).
  await eventually(
    () => (server = receiver.spans.find((span) => span.attributes['gateway.request_id'] === requestId)) !== undefined,
    `the server span of ${requestId}`,
    20_000,
  );
  const children = () => receiver.spans.filter((span) => span.parentSpanId === server!.spanId && span.kind === CLIENT);
  await eventually(() => children().length >= attempts, `${attempts} attempt span(s) of ${requestId}`);
  expect(receiver.problems).to.deep.equal([]);
  return {
    server: server!,
    attempts: children().sort(
      (a, b) => Number(a.attributes['gateway.attempt']) - Number(b.attributes['gateway.attempt']),
    ),
  };
}

const parsedTraceparent = (value: unknown) => {
  const match = /^00-([0-9a-f]{32})-([0-9a-f]{16})-(0[01])$/.exec(String(value));
  expect(match, `a W3C traceparent, got ${String(value)}`).to.not.equal(null);
  return { traceId: match![1]!, spanId: match![2]!, flags: match![3]! };
};

async function scrape(test: TestGateway): Promise<string> {
  return (await test.gateway.metrics.scrape()).body;
}

function metricValue(text: string, name: string, labels: Record<string, string> = {}): number {
  const wanted = Object.entries(labels).map(([key, value]) => `${key}="${value}"`);
  const line = text
    .split('\n')
    .find(
      (candidate) =>
        (candidate.startsWith(`${name}{`) || candidate.startsWith(`${name} `)) &&
        wanted.every((label) => candidate.includes(label)),
    );
  return line ? Number(line.split(' ').at(-1)) : 0;
}

for (const protocol of ['http/protobuf', 'http/json'] as const) {
  describe(`tracing over OTLP (${protocol}), end to end against a collector on a real socket`, function () {
    this.timeout(60_000);
    let receiver: OtlpReceiver;
    let test: TestGateway;

    before(async () => {
      receiver = await OtlpReceiver.start();
      test = await startTestGateway({
        env: fastExport(receiver, {
          OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
          OTEL_SERVICE_NAME: 'gateway-under-test',
          OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=test',
        }),
        mock: { cachedTokens: 3 },
      });
    });
    after(async () => {
      await test?.close();
      await receiver?.close();
    });

    it('exports a request that came with a traceparent in that trace: the server span, the GenAI client span and their attributes', async () => {
      const answer = await post(
        test,
        '/v1/chat/completions',
        { model: 'alpha/gen-5.5', max_tokens: 40, temperature: 0.3, messages: [{ role: 'user', content: 'Hello' }] },
        { traceparent: TRACEPARENT, tracestate: 'vendor=opaque' },
      );
      expect(answer.status).to.equal(200);
      const { server, attempts } = await spansOf(receiver, answer.requestId);
      expect(receiver.contentTypes[0]).to.equal(
        protocol === 'http/json' ? 'application/json' : 'application/x-protobuf',
      );

      expect(server).to.include({
        traceId: TRACE_ID,
        parentSpanId: CLIENT_SPAN,
        name: 'POST /v1/chat/completions',
        kind: SERVER,
      });
      expect(server.attributes).to.include({
        'http.request.method': 'POST',
        'http.route': '/v1/chat/completions',
        'url.path': '/v1/chat/completions',
        'http.response.status_code': 200,
        'gateway.request_id': answer.requestId,
        'gateway.model': 'alpha/gen-5.5',
        'gateway.outcome': 'complete',
        'gateway.attempts': 1,
      });
      expect(server.status.code).to.equal(0);
      expect(server.events.map((event) => event.name)).to.include('gateway.auth');
      expect(server.resource).to.include({
        'service.name': 'gateway-under-test',
        'deployment.environment.name': 'test',
      });

      const [attempt] = attempts;
      const reported = test.upstreams.alpha.requests.at(-1)!.reportedUsage!;
      expect(attempt!).to.include({ traceId: TRACE_ID, name: 'chat gen-5.5', kind: CLIENT });
      expect(attempt!.attributes).to.include({
        'gen_ai.operation.name': 'chat',
        'gen_ai.provider.name': 'alpha',
        'gen_ai.request.model': 'gen-5.5',
        'gen_ai.response.model': 'gen-5.5',
        'gen_ai.request.max_tokens': 40,
        'gen_ai.request.temperature': 0.3,
        'gen_ai.usage.input_tokens': reported.inputTokens,
        'gen_ai.usage.output_tokens': reported.outputTokens,
        'gen_ai.usage.cache_read.input_tokens': 3,
        'server.address': '127.0.0.1',
        'server.port': test.upstreams.alpha.port,
        'gateway.endpoint': '0',
        'gateway.attempt.outcome': 'served',
        'http.response.status_code': 200,
      });
      expect(attempt!.attributes['gen_ai.response.finish_reasons']).to.deep.equal(['stop']);
      expect(attempt!.status.code).to.equal(0);

      // The upstream got its own traceparent: the client's trace, the attempt span's id; never the client's tracestate.
      const sent = test.upstreams.alpha.requests.at(-1)!.headers;
      expect(parsedTraceparent(sent.traceparent)).to.deep.equal({
        traceId: TRACE_ID,
        spanId: attempt!.spanId,
        flags: '01',
      });
      expect(sent.tracestate).to.equal(undefined);
    });

    it('starts a trace for a request without a traceparent, and sends the upstream that trace', async () => {
      const answer = await post(test, '/v1/chat/completions', {
        model: 'alpha/gen-5.5',
        messages: [{ role: 'user', content: 'Hello' }],
      });
      const { server, attempts } = await spansOf(receiver, answer.requestId);
      expect(server.parentSpanId).to.equal('');
      expect(server.traceId)
        .to.match(/^[0-9a-f]{32}$/)
        .and.not.equal(TRACE_ID);
      expect(parsedTraceparent(test.upstreams.alpha.requests.at(-1)!.headers.traceparent)).to.deep.equal({
        traceId: server.traceId,
        spanId: attempts[0]!.spanId,
        flags: '01',
      });
      expect(attempts[0]!.attributes).to.not.have.property('gen_ai.request.max_tokens');
      expect(attempts[0]!.attributes).to.not.have.property('gen_ai.request.temperature');
    });

    it("shows a stream's time to first token on its attempt span (a Messages stream)", async () => {
      const answer = await post(
        test,
        '/v1/messages',
        { model: 'beta-fable-5-1', max_tokens: 64, stream: true, messages: [{ role: 'user', content: 'Hello' }] },
        { traceparent: TRACEPARENT },
      );
      expect(answer.status).to.equal(200);
      const { server, attempts } = await spansOf(receiver, answer.requestId);
      const attempt = attempts[0]!;
      expect(attempt.name).to.equal('chat beta-fable-5-1');
      expect(attempt.attributes).to.include({
        'gen_ai.request.stream': true,
        'gen_ai.response.model': 'beta-fable-5-1',
        'gateway.attempt.outcome': 'served',
      });
      expect(attempt.attributes['gen_ai.response.finish_reasons']).to.deep.equal(['end_turn']);
      const ttft = attempt.attributes['gen_ai.response.time_to_first_chunk'] as number;
      expect(ttft).to.be.a('number').and.greaterThan(0);
      const first = attempt.events.find((event) => event.name === 'gateway.first_token');
      expect(first, 'the first token event').to.not.equal(undefined);
      expect(
        first!.timeUnixNano > attempt.startTimeUnixNano && first!.timeUnixNano <= attempt.endTimeUnixNano,
      ).to.equal(true);
      expect(attempt.parentSpanId).to.equal(server.spanId);
    });

    it('sends the GenAI metrics over OTLP as well as on /metrics', async () => {
      await post(test, '/v1/chat/completions', {
        model: 'alpha/gen-5.5',
        stream: true,
        messages: [{ role: 'user', content: 'Hello' }],
      });
      const names = [
        'gen_ai.client.token.usage',
        'gen_ai.client.operation.duration',
        'gen_ai.client.operation.time_to_first_chunk',
        'gen_ai.client.operation.time_per_output_chunk',
      ];
      await eventually(
        () => names.every((name) => receiver.metrics.some((metric) => metric.name === name)),
        'the GenAI metrics over OTLP',
      );
      const usage = receiver.metrics
        .filter((metric) => metric.name === 'gen_ai.client.token.usage')
        .flatMap((metric) => metric.points);
      expect(usage.map((point) => point.attributes['gen_ai.token.type'])).to.include.members(['input', 'output']);
      expect(usage[0]!.attributes).to.include({
        'gen_ai.operation.name': 'chat',
        'gen_ai.provider.name': 'alpha',
        'gen_ai.request.model': 'gen-5.5',
      });
      const text = await scrape(test);
      const labels = { gen_ai_operation_name: 'chat', gen_ai_provider_name: 'alpha', gen_ai_request_model: 'gen-5.5' };
      expect(
        metricValue(text, 'gen_ai_client_token_usage_count', { ...labels, gen_ai_token_type: 'output' }),
      ).to.be.greaterThan(0);
      expect(metricValue(text, 'gen_ai_client_operation_duration_seconds_count', labels)).to.be.greaterThan(0);
      expect(metricValue(text, 'gen_ai_client_operation_time_to_first_chunk_seconds_count', labels)).to.be.greaterThan(
        0,
      );
      expect(
        metricValue(text, 'gen_ai_client_operation_time_per_output_chunk_seconds_count', labels),
      ).to.be.greaterThan(0);
      expect(metricValue(text, 'gateway_trace_spans_exported_total')).to.be.greaterThan(0);
    });
  });
}

describe('tracing: failover, refusals and plugin faults as spans', function () {
  this.timeout(60_000);
  let receiver: OtlpReceiver;
  let broken: ScriptedUpstream;
  let hooky: ScriptedUpstream;
  let dir: string;
  let test: TestGateway;

  before(async () => {
    receiver = await OtlpReceiver.start();
    broken = await ScriptedUpstream.start();
    broken.script = (_req, res) =>
      void res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":{"message":"upstream trouble"}}');
    hooky = await ScriptedUpstream.start();
    hooky.script = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const chunk = (delta: object, finish: string | null = null) =>
        `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
      res.end(
        chunk({ role: 'assistant', content: '' }) +
          chunk({ content: 'Hello' }) +
          chunk({}, 'stop') +
          'data: [DONE]\n\n',
      );
    };
    dir = await mkdtemp(join(tmpdir(), 'gateway-tracing-'));
    // A plugin whose stream fixup throws (below), and a pool whose first endpoint answers 500.
    // The pool: its first endpoint, by far the heaviest, is tried first; `healthy` comes after.
    const writePool = (healthy: string) =>
      writeFile(
        join(dir, 'gateway.yaml'),
        [
          'routing: { affinity: false }',
          'providers:',
          '  alpha:',
          '    endpoints:',
          `      - { name: broken, baseUrl: '${broken.url}', weight: 1000000000 }`,
          `      - { name: healthy, baseUrl: '${healthy}', weight: 1 }`,
        ].join('\n'),
      );
    await writePool('http://127.0.0.1:1/v1');
    await mkdir(join(dir, 'plugins', 'hooky'), { recursive: true });
    await writeFile(join(dir, 'plugins', 'package.json'), JSON.stringify({ type: 'module' }));
    await writeFile(join(dir, 'plugins', 'manifest.json'), JSON.stringify({ plugins: ['hooky'] }));
    await writeFile(
      join(dir, 'plugins', 'hooky', 'index.js'),
      `export default {
  contract: 1,
  vendor: 'hooky',
  routes: { 'chat-completions': { path: '/chat/completions', format: 'chat-completions', auth: 'bearer' } },
  models: [{ id: 'boom', listed: false, routes: ['chat-completions'], pricing: { input: 1, cachedInput: 0, output: 2 } }],
  streamFixups: [{ name: 'boom', route: 'chat-completions', models: ['hooky/boom'], fixup: () => { throw new Error('boom'); } }],
};
`,
    );
    test = await startTestGateway({
      env: fastExport(receiver, {
        GATEWAY_PLUGIN_PATH: join(dir, 'plugins'),
        HOOKY_BASE_URL: hooky.url,
        HOOKY_API_KEY: 'hooky-upstream-key',
        GATEWAY_CONFIG: join(dir, 'gateway.yaml'),
        ALPHA_BASE_URL: '',
      }),
      configFile: join(dir, 'gateway.yaml'),
    });
    // The healthy endpoint: the test gateway's own alpha mock (the file named a placeholder).
    await writePool(test.upstreams.alpha.url);
    expect(test.gateway.reloadConfig('test').applied).to.equal(true);
  });
  after(async () => {
    await test?.close();
    await Promise.all([receiver?.close(), broken?.close(), hooky?.close()]);
    await rm(dir, { recursive: true, force: true });
  });

  it('shows a failover over a pool whose first endpoint answers 500 as two attempt spans, the first with its error', async () => {
    const answer = await post(
      test,
      '/v1/chat/completions',
      { model: 'alpha/gen-5.5', messages: [{ role: 'user', content: 'Hello' }] },
      { traceparent: TRACEPARENT },
    );
    expect(answer.status).to.equal(200);
    const { server, attempts } = await spansOf(receiver, answer.requestId, 2);
    expect(attempts).to.have.length(2);
    const [failed, served] = attempts;
    expect(failed!.attributes).to.include({
      'gateway.endpoint': 'broken',
      'gateway.attempt': 1,
      'gateway.attempt.outcome': 'failed_over',
      'http.response.status_code': 500,
      'error.type': '500',
    });
    expect(failed!.status).to.deep.equal({ code: ERROR, message: 'answered 500' });
    const failover = failed!.events.find((event) => event.name === 'gateway.failover');
    expect(failover?.attributes).to.deep.equal({
      'gateway.failover.reason': 'answered 500',
      'gateway.failover.next_endpoint': 'healthy',
    });
    expect(served!.attributes).to.include({
      'gateway.endpoint': 'healthy',
      'gateway.attempt': 2,
      'gateway.attempt.outcome': 'served',
    });
    expect(served!.status.code).to.equal(0);
    expect(server.attributes).to.include({ 'gateway.attempts': 2, 'http.response.status_code': 200 });
    // Each attempt carried its own span's traceparent, in the client's trace.
    expect(parsedTraceparent(broken.requests.at(-1)!.headers.traceparent)).to.deep.equal({
      traceId: TRACE_ID,
      spanId: failed!.spanId,
      flags: '01',
    });
    expect(parsedTraceparent(test.upstreams.alpha.requests.at(-1)!.headers.traceparent)).to.deep.equal({
      traceId: TRACE_ID,
      spanId: served!.spanId,
      flags: '01',
    });
  });

  it('shows a plugin fault (a stream fixup that throws) as an event and an error status', async () => {
    const answer = await post(test, '/v1/chat/completions', {
      model: 'hooky/boom',
      stream: true,
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(answer.status).to.equal(502);
    const { server, attempts } = await spansOf(receiver, answer.requestId);
    const attempt = attempts[0]!;
    expect(attempt.attributes).to.include({ 'gateway.attempt.outcome': 'plugin_fault' });
    expect(attempt.status.code).to.equal(ERROR);
    const fault = attempt.events.find((event) => event.name === 'gateway.stream_fixup_fault');
    expect(fault?.attributes).to.deep.equal({
      'gateway.plugin.name': 'hooky',
      'gateway.plugin.hook': 'streamFixups.boom',
    });
    expect(server.status.code).to.equal(ERROR);
    expect(server.attributes).to.include({ 'http.response.status_code': 502, 'gateway.outcome': 'plugin_error' });
    expect(server.attributes['gateway.error.code'])
      .to.equal(server.status.message)
      .and.match(/^GW_ERR_/);
  });

  it("shows a limit refusal as the server span's error status, with the limit in its attributes", async () => {
    const { key } = await test.gateway.keys.create({ name: 'small tpm', tpm: 50 });
    const answer = await post(
      test,
      '/v1/chat/completions',
      { model: 'alpha/gen-5.5', max_tokens: 100, messages: [{ role: 'user', content: 'Hello' }] },
      {},
      key,
    );
    expect(answer.status).to.equal(429);
    let server: ReceivedSpan | undefined;
    await eventually(
      () =>
        (server = receiver.spans.find((span) => span.attributes['gateway.request_id'] === answer.requestId)) !==
        undefined,
      "the refused request's span",
    );
    expect(server!.status).to.deep.equal({ code: ERROR, message: 'GW_ERR_TOKEN_RATE_LIMITED' });
    expect(server!.attributes).to.include({
      'http.response.status_code': 429,
      'gateway.error.code': 'GW_ERR_TOKEN_RATE_LIMITED',
      'error.type': 'GW_ERR_TOKEN_RATE_LIMITED',
      'gateway.limit.kind': 'tpm',
      'gateway.limit.scope': 'key',
    });
    expect(server!.events.map((event) => event.name)).to.include('gateway.limits.refused');
    expect(receiver.spans.filter((span) => span.parentSpanId === server!.spanId)).to.deep.equal([]);
  });

  it('shows the reservation and its settlement as events of an admitted request', async () => {
    const { key } = await test.gateway.keys.create({ name: 'roomy tpm', tpm: 1_000_000 });
    const answer = await post(
      test,
      '/v1/chat/completions',
      { model: 'alpha/gen-5.5', max_tokens: 100, messages: [{ role: 'user', content: 'Hello' }] },
      {},
      key,
    );
    expect(answer.status).to.equal(200);
    const { server, attempts } = await spansOf(receiver, answer.requestId);
    const reserve = server.events.find((event) => event.name === 'gateway.limits.reserve');
    expect(reserve?.attributes['gateway.limits.kinds']).to.deep.equal(['key:tpm:minute']);
    const settle = server.events.find((event) => event.name === 'gateway.limits.settle');
    // The pool's broken endpoint failed first: the attempt that served is the last.
    const usage = attempts.at(-1)!.attributes;
    expect(settle?.attributes['gateway.limits.settled_tokens']).to.equal(
      Number(usage['gen_ai.usage.input_tokens']) + Number(usage['gen_ai.usage.output_tokens']),
    );
    expect(server.attributes['gateway.key.id']).to.match(/^key_/);
  });
});

describe('tracing: the response cache and a stream the upstream cut', function () {
  this.timeout(60_000);
  let receiver: OtlpReceiver;
  let test: TestGateway;

  before(async () => {
    receiver = await OtlpReceiver.start();
    test = await startTestGateway({ env: fastExport(receiver, { GATEWAY_CACHE_TTL_S: '60' }) });
  });
  after(async () => {
    await test?.close();
    await receiver?.close();
  });

  it('shows the cache lookup as an event: a miss goes upstream, a hit has no attempt span', async () => {
    const body = { model: 'alpha/gen-5.5', messages: [{ role: 'user', content: 'Cache me' }] };
    const miss = await post(test, '/v1/chat/completions', body);
    const missed = await spansOf(receiver, miss.requestId);
    expect(missed.server.events.find((event) => event.name === 'gateway.cache.lookup')?.attributes).to.deep.equal({
      'gateway.cache.result': 'miss',
    });
    const hit = await post(test, '/v1/chat/completions', body);
    let server: ReceivedSpan | undefined;
    await eventually(
      () =>
        (server = receiver.spans.find((span) => span.attributes['gateway.request_id'] === hit.requestId)) !== undefined,
      "the hit's span",
    );
    expect(server!.events.find((event) => event.name === 'gateway.cache.lookup')?.attributes).to.deep.equal({
      'gateway.cache.result': 'hit',
    });
    expect(server!.attributes).to.include({
      'gateway.cache.result': 'hit',
      'gateway.attempts': 0,
      'gen_ai.usage.input_tokens': missed.attempts[0]!.attributes['gen_ai.usage.input_tokens'],
    });
    expect(receiver.spans.filter((span) => span.parentSpanId === server!.spanId)).to.deep.equal([]);
    const bypass = await post(test, '/v1/chat/completions', body, { 'cache-control': 'no-store' });
    const bypassed = await spansOf(receiver, bypass.requestId);
    expect(bypassed.server.events.find((event) => event.name === 'gateway.cache.lookup')?.attributes).to.deep.equal({
      'gateway.cache.result': 'bypass',
    });
  });

  it('shows a stream the upstream cut as a cut attempt and an error of the request', async () => {
    test.upstreams.alpha.enqueue({ kind: 'drop-mid-stream', afterEvents: 2 });
    const answer = await post(
      test,
      '/v1/chat/completions',
      { model: 'alpha/gen-5.5', stream: true, messages: [{ role: 'user', content: 'Hello' }] },
      { 'cache-control': 'no-store' },
    );
    expect(answer.status).to.equal(200);
    const { server, attempts } = await spansOf(receiver, answer.requestId);
    expect(attempts[0]!.attributes['gateway.attempt.outcome']).to.equal('cut');
    expect(attempts[0]!.status.code).to.equal(ERROR);
    expect(server.attributes['gateway.outcome']).to.equal('upstream_cut');
    expect(server.status.code).to.equal(ERROR);
  });
});

describe('tracing: message content and credentials', function () {
  this.timeout(60_000);
  const PROMPT = 'the secret recipe is forty-two lemons';
  let receiver: OtlpReceiver;

  before(async () => (receiver = await OtlpReceiver.start()));
  after(async () => receiver?.close());

  /** Every span of one request (server and attempts) as exported, as text. */
  async function exportedText(
    test: TestGateway,
    path: string,
    body: Record<string, unknown>,
  ): Promise<{ text: string; attempt: ReceivedSpan }> {
    const answer = await post(test, path, body);
    expect(answer.status).to.equal(200);
    const { server, attempts } = await spansOf(receiver, answer.requestId);
    return {
      text: JSON.stringify([server, ...attempts], (_key, value: unknown) =>
        typeof value === 'bigint' ? String(value) : value,
      ),
      attempt: attempts[0]!,
    };
  }

  const requests: [string, string, Record<string, unknown>][] = [
    [
      'Chat Completions JSON',
      '/v1/chat/completions',
      {
        model: 'alpha/gen-5.5',
        messages: [
          { role: 'system', content: 'Be brief.' },
          { role: 'user', content: PROMPT },
        ],
      },
    ],
    [
      'Chat Completions stream',
      '/v1/chat/completions',
      { model: 'alpha/gen-5.5', stream: true, messages: [{ role: 'user', content: PROMPT }] },
    ],
    [
      'Messages stream',
      '/v1/messages',
      {
        model: 'beta-fable-5-1',
        max_tokens: 64,
        stream: true,
        system: 'Be brief.',
        messages: [{ role: 'user', content: PROMPT }],
      },
    ],
    ['Responses JSON', '/v1/responses', { model: 'alpha/gen-5.5', input: PROMPT }],
    ['native chat', '/v1/chat', { model: 'alpha/gen-5.5', input: PROMPT }],
  ];

  it('records no prompt or completion text, and no credential, by default', async () => {
    const test = await startTestGateway({ env: fastExport(receiver) });
    try {
      for (const [what, path, body] of requests) {
        const { text } = await exportedText(test, path, body);
        expect(text, what).to.not.include(PROMPT);
        expect(text, what).to.not.include('gen_ai.input.messages');
        expect(text, what).to.not.include('gen_ai.output.messages');
        expect(text, what).to.not.include(TEST_KEY);
        expect(text, what).to.not.include(UPSTREAM_KEY);
      }
    } finally {
      await test.close();
    }
  });

  it("records the messages in the GenAI conventions' shape with OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true, and still no credential", async () => {
    const test = await startTestGateway({
      env: fastExport(receiver, { OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'true' }),
    });
    try {
      for (const [what, path, body] of requests) {
        const { text, attempt } = await exportedText(test, path, body);
        const input = JSON.parse(String(attempt.attributes['gen_ai.input.messages'])) as {
          role: string;
          parts: { type: string; content?: string }[];
        }[];
        expect(input.at(-1), what).to.deep.equal({ role: 'user', parts: [{ type: 'text', content: PROMPT }] });
        const output = JSON.parse(String(attempt.attributes['gen_ai.output.messages'])) as {
          role: string;
          parts: { type: string; content: string }[];
        }[];
        expect(output[0]!.role, what).to.equal('assistant');
        expect(output[0]!.parts[0]!.content, what).to.be.a('string').and.not.equal('');
        if (
          body.system !== undefined ||
          (Array.isArray(body.messages) && (body.messages as { role: string }[])[0]!.role === 'system')
        ) {
          expect(JSON.parse(String(attempt.attributes['gen_ai.system_instructions'])), what).to.deep.equal([
            { type: 'text', content: 'Be brief.' },
          ]);
        }
        expect(text, what).to.not.include(TEST_KEY);
        expect(text, what).to.not.include(UPSTREAM_KEY);
      }
    } finally {
      await test.close();
    }
  });
});

describe('tracing: what a guardrail blocked or redacted is never exported', function () {
  this.timeout(60_000);
  const SECRET = 'PROJECT-4321';
  let receiver: OtlpReceiver;
  let upstream: ScriptedUpstream;
  let dir: string;
  let test: TestGateway;

  before(async () => {
    receiver = await OtlpReceiver.start();
    upstream = await ScriptedUpstream.start();
    upstream.script = (_req, res, text) => {
      const request = JSON.parse(text) as { stream?: boolean; messages: { content: string }[] };
      const stream = request.stream === true;
      const words = request.messages[0]!.content.includes('clean')
        ? ['The plan ', 'is ', 'kept', ' for now.']
        : ['The plan ', 'is ', SECRET, ' for now.'];
      if (!stream) {
        const content = words.join('');
        const answer = {
          id: 'c1',
          object: 'chat.completion',
          created: 1,
          model: 'gen-5.5',
          choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
          usage: { prompt_tokens: 5, completion_tokens: 6, total_tokens: 11 },
        };
        return res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
      }
      const chunk = (delta: object, finish: string | null = null) =>
        `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'gen-5.5', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
      const usage = `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'gen-5.5', choices: [], usage: { prompt_tokens: 5, completion_tokens: 6, total_tokens: 11 } })}\n\n`;
      res
        .writeHead(200, { 'content-type': 'text/event-stream' })
        .end(words.map((word) => chunk({ content: word })).join('') + chunk({}, 'stop') + usage + 'data: [DONE]\n\n');
    };
    dir = await mkdtemp(join(tmpdir(), 'gateway-trace-guardrails-'));
    const config = join(dir, 'gateway.yaml');
    await writeFile(
      config,
      "guardrails:\n  - { name: no-codes, use: regex, on: response, action: block, patterns: ['PROJECT-[0-9]{4}'] }\n  - { name: no-plan, use: regex, on: response, action: redact, patterns: ['plan'] }\n",
    );
    test = await startTestGateway({
      configFile: config,
      env: fastExport(receiver, {
        OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'true',
        ALPHA_BASE_URL: upstream.url,
      }),
    });
  });
  after(async () => {
    await test?.close();
    await upstream?.close();
    await receiver?.close();
    await rm(dir, { recursive: true, force: true });
  });

  for (const stream of [false, true]) {
    it(`exports no text of a blocked answer, not even what went out before the block (${stream ? 'stream' : 'JSON'})`, async () => {
      const answer = await post(test, '/v1/chat/completions', {
        model: 'alpha/gen-5.5',
        stream,
        messages: [{ role: 'user', content: 'The plan?' }],
      });
      expect(answer.text).to.not.include(SECRET);
      const { server, attempts } = await spansOf(receiver, answer.requestId);
      expect(server.attributes['gateway.outcome']).to.equal('guardrail_blocked');
      const text = JSON.stringify([server, ...attempts], (_key, value: unknown) =>
        typeof value === 'bigint' ? String(value) : value,
      );
      expect(text).to.not.include(SECRET);
      expect(text).to.not.include('gen_ai.output.messages');
    });

    it(`exports a redacted answer's text as the client got it (${stream ? 'stream' : 'JSON'})`, async () => {
      const answer = await post(test, '/v1/chat/completions', {
        model: 'alpha/gen-5.5',
        stream,
        messages: [{ role: 'user', content: 'The clean plan?' }],
      });
      expect(answer.status).to.equal(200);
      const { attempts } = await spansOf(receiver, answer.requestId);
      const output = String(attempts[0]!.attributes['gen_ai.output.messages']);
      expect(output).to.include('[REDACTED]').and.include('kept');
      expect(output).to.not.include('plan');
    });
  }
});

describe('tracing: a collector that is down or slow loses spans, never requests', function () {
  this.timeout(120_000);

  /** `count` Chat Completions requests, `parallel` at a time; their statuses. */
  async function load(test: TestGateway, count: number, parallel: number): Promise<number[]> {
    const statuses: number[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: parallel }, async () => {
        while (next < count) {
          next += 1;
          statuses.push(
            (
              await post(test, '/v1/chat/completions', {
                model: 'alpha/gen-5.5',
                messages: [{ role: 'user', content: 'Hello' }],
              })
            ).status,
          );
        }
      }),
    );
    return statuses;
  }

  async function dropped(test: TestGateway): Promise<{ queueFull: number; exportFailed: number; exported: number }> {
    const text = await scrape(test);
    return {
      queueFull: metricValue(text, 'gateway_trace_spans_dropped_total', { reason: 'queue_full' }),
      exportFailed: metricValue(text, 'gateway_trace_spans_dropped_total', { reason: 'export_failed' }),
      exported: metricValue(text, 'gateway_trace_spans_exported_total'),
    };
  }

  it('serves 1,000 requests with the collector stopped, and counts every span it could not export', async () => {
    const receiver = await OtlpReceiver.start();
    const url = receiver.url;
    await receiver.close();
    const test = await startTestGateway({
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: url,
        OTEL_BSP_SCHEDULE_DELAY: '10',
        OTEL_BSP_MAX_QUEUE_SIZE: '100',
        OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '50',
        OTEL_EXPORTER_OTLP_TIMEOUT: '200',
        RATE_LIMIT_MAX: '100000',
      },
    });
    try {
      const statuses = await load(test, 1000, 16);
      expect(statuses).to.have.length(1000);
      expect(statuses.filter((status) => status !== 200)).to.deep.equal([]);
      // Two spans a request (the server span and its one attempt), each exported or counted lost.
      await eventually(
        async () => {
          const counts = await dropped(test);
          return counts.queueFull + counts.exportFailed === 2000;
        },
        'every span counted as dropped',
        30_000,
      );
      const counts = await dropped(test);
      expect(counts.exported).to.equal(0);
      expect(counts.exportFailed).to.be.greaterThan(0);
    } finally {
      await test.close();
    }
  });

  it('serves requests while the collector does not answer, and counts the spans of the exports that timed out', async () => {
    const receiver = await OtlpReceiver.start();
    receiver.answer = 'hang';
    const test = await startTestGateway({
      env: fastExport(receiver, {
        OTEL_EXPORTER_OTLP_TIMEOUT: '200',
        OTEL_BSP_MAX_QUEUE_SIZE: '20',
        OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '10',
      }),
    });
    try {
      const statuses = await load(test, 100, 8);
      expect(statuses.filter((status) => status !== 200)).to.deep.equal([]);
      await eventually(
        async () => {
          const counts = await dropped(test);
          return counts.queueFull + counts.exportFailed === 200;
        },
        'every span counted as dropped',
        30_000,
      );
      expect((await dropped(test)).queueFull).to.be.greaterThan(0);
    } finally {
      await test.close();
      await receiver.close();
    }
  });
});

describe('tracing off, disabled, and the sampler on a live reload', function () {
  this.timeout(60_000);

  it('makes no span and sends no traceparent without an OTLP endpoint, or with OTEL_SDK_DISABLED=true', async () => {
    const receiver = await OtlpReceiver.start();
    for (const env of [
      {},
      { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_SDK_DISABLED: 'true' },
      { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_TRACES_EXPORTER: 'none' },
    ]) {
      const test = await startTestGateway({ env });
      try {
        const answer = await post(test, '/v1/chat/completions', {
          model: 'alpha/gen-5.5',
          messages: [{ role: 'user', content: 'Hello' }],
        });
        expect(answer.status).to.equal(200);
        expect(test.upstreams.alpha.requests.at(-1)!.headers).to.not.have.property('traceparent');
      } finally {
        await test.close();
      }
    }
    await receiver.close();
    expect(receiver.spans).to.deep.equal([]);
  });

  it('takes a new sampler from a reloaded config file: unsampled requests carry a traceparent flagged 00 and export nothing', async () => {
    const receiver = await OtlpReceiver.start();
    const dir = await mkdtemp(join(tmpdir(), 'gateway-sampler-'));
    const file = join(dir, 'gateway.yaml');
    await writeFile(file, 'tracing:\n  sampler: always_off\n');
    const test = await startTestGateway({ env: fastExport(receiver, { GATEWAY_CONFIG: file }), configFile: file });
    try {
      const unsampled = await post(test, '/v1/chat/completions', {
        model: 'alpha/gen-5.5',
        messages: [{ role: 'user', content: 'Hello' }],
      });
      expect(parsedTraceparent(test.upstreams.alpha.requests.at(-1)!.headers.traceparent).flags).to.equal('00');

      await writeFile(file, 'tracing:\n  sampler: parentbased_traceidratio\n  samplerArg: 1\n');
      expect(test.gateway.reloadConfig('test').applied).to.equal(true);
      const sampled = await post(test, '/v1/chat/completions', {
        model: 'alpha/gen-5.5',
        messages: [{ role: 'user', content: 'Hello' }],
      });
      const { attempts } = await spansOf(receiver, sampled.requestId);
      expect(parsedTraceparent(test.upstreams.alpha.requests.at(-1)!.headers.traceparent)).to.deep.include({
        spanId: attempts[0]!.spanId,
        flags: '01',
      });
      // Exported in order: the sampled request's spans are out, and none of the unsampled one's is.
      expect(
        receiver.spans.filter((span) => span.attributes['gateway.request_id'] === unsampled.requestId),
      ).to.deep.equal([]);

      // A client's sampled-out decision stands under the parent-based sampler.
      const declined = await post(
        test,
        '/v1/chat/completions',
        { model: 'alpha/gen-5.5', messages: [{ role: 'user', content: 'Hello' }] },
        { traceparent: `00-${TRACE_ID}-${CLIENT_SPAN}-00` },
      );
      expect(declined.status).to.equal(200);
      expect(parsedTraceparent(test.upstreams.alpha.requests.at(-1)!.headers.traceparent)).to.deep.include({
        traceId: TRACE_ID,
        flags: '00',
      });
    } finally {
      await test.close();
      await receiver.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
