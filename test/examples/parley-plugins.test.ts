import { expect } from 'chai';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import OpenAI from 'openai';
import { request } from 'undici';
import { eventually, sleep } from '../helpers/eventually.ts';
import { buildExample } from '../helpers/example-package.ts';
import { OtlpReceiver, type ReceivedSpan } from '../helpers/otlp-receiver.ts';
import { ParleyVendor, type ParleyBehaviour } from '../helpers/parley-vendor.ts';
import { ScriptedUpstream } from '../helpers/scripted-upstream.ts';
import { startTestGateway, TEST_KEY, type TestGateway } from '../helpers/test-gateway.ts';

const KEY_A = 'parley-token-a-0001';
const KEY_B = 'parley-token-b-0002';
const ADMIN = 'admin-token-parley-0123456789abcdef';
const SECRET = 'PROJECT-1234';
/** quill-2's prices, USD per million tokens. */
const PRICES = { input: 0.8, output: 3.2 };

type UsageRecord = Record<string, any>;

/**
 * The example package examples/parley-plugins, built as its own `npm run build` builds it and loaded
 * from its dist/ through GATEWAY_PLUGIN_PATH, in front of two endpoints of the invented vendor Parley
 * (scripted on 127.0.0.1, speaking exactly Parley's wire format), with the response cache, a response
 * guardrail and tracing on: the official openai client on /v1/chat/completions as on any model.
 */
describe('the example package parley-plugins: a vendor with its own wire format, on /v1/chat/completions', function () {
  this.timeout(120_000);
  const shared: ParleyBehaviour[] = [];
  let a: ParleyVendor;
  let b: ParleyVendor;
  let alpha: ScriptedUpstream;
  let receiver: OtlpReceiver;
  let dir: string;
  let test: TestGateway;
  let logText = '';

  before(async () => {
    const dist = await buildExample('parley-plugins');
    [a, b] = await Promise.all([ParleyVendor.start(KEY_A, shared), ParleyVendor.start(KEY_B, shared)]);
    alpha = await ScriptedUpstream.start();
    receiver = await OtlpReceiver.start();
    dir = await mkdtemp(join(tmpdir(), 'gateway-parley-'));
    const config = join(dir, 'gateway.yaml');
    await writeFile(
      config,
      [
        'providers:',
        '  parley:',
        '    endpoints:',
        `      - { name: a, baseUrl: '${a.baseUrl}', apiKey: ${KEY_A} }`,
        `      - { name: b, baseUrl: '${b.baseUrl}', apiKey: ${KEY_B} }`,
        'routing: { affinity: false }',
        'failover: { maxAttempts: 2, failureThreshold: 1, cooldownMs: 1500 }',
        'cache: { ttlSeconds: 60 }',
        'guardrails:',
        "  - { name: no-codes, use: regex, on: response, action: block, patterns: ['PROJECT-[0-9]{4}'] }",
        '',
      ].join('\n'),
    );
    const log = new PassThrough();
    log.on('data', (data: Buffer) => (logText += data.toString('utf8')));
    test = await startTestGateway({
      configFile: config,
      logTo: log,
      env: {
        GATEWAY_PLUGIN_PATH: dist,
        GATEWAY_ADMIN_TOKEN: ADMIN,
        ALPHA_BASE_URL: alpha.url,
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_BSP_SCHEDULE_DELAY: '20',
        LOG_LEVEL: 'info',
      },
    });
  });
  afterEach(() => {
    shared.length = 0;
    for (const vendor of [a, b]) {
      vendor.queue.length = 0;
      vendor.chunks = ['Parley ', 'says ', 'hello.'];
    }
  });
  after(async () => {
    await test?.close();
    await Promise.all([a?.close(), b?.close(), alpha?.close(), receiver?.close()]);
    await rm(dir, { recursive: true, force: true });
  });

  const client = (key = TEST_KEY) => new OpenAI({ baseURL: `${test.url}/v1`, apiKey: key, maxRetries: 0 });
  const sent = () => [...a.requests, ...b.requests];
  /** The vendor that got the latest request, and that request. */
  const latest = () => {
    const all = [a, b].flatMap((vendor) =>
      vendor.requests.map((seen, index) => ({ seen, vendor, at: vendor.times[index]! })),
    );
    return all.sort((x, y) => x.at - y.at).at(-1)!;
  };
  let counter = 0;
  /** A prompt no earlier test sent (the response cache is on). */
  const fresh = (text = 'Tell me about the weather today') => `${text} (${++counter})`;

  async function usageRecord(requestId: string): Promise<UsageRecord> {
    let found: UsageRecord | undefined;
    await eventually(async () => {
      await test.gateway.flushUsage();
      const journal = await readFile(join(test.dataDir, 'usage.jsonl'), 'utf8').catch(() => '');
      found = journal
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as UsageRecord)
        .find((record) => record.requestId === requestId);
      return found !== undefined;
    }, `the usage record of ${requestId}`);
    return found!;
  }

  async function post(body: Record<string, unknown>, headers: Record<string, string> = {}) {
    const response = await request(`${test.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });
    return {
      status: response.statusCode,
      headers: response.headers,
      requestId: String(response.headers['x-request-id']),
      text: await response.body.text(),
    };
  }

  const costOf = (prompt: number, reply: number) => (prompt * PRICES.input + reply * PRICES.output) / 1e6;

  it('lists its models with their adapted route in the catalog', async () => {
    const models = (await (await fetch(`${test.url}/v1/models`)).json()) as { data: Record<string, unknown>[] };
    const parley = models.data.filter((entry) => entry.owned_by === 'parley');
    expect(parley.map((entry) => entry.id)).to.deep.equal(['parley-latest', 'parley/quill-2', 'parley/quill-2-mini']);
    for (const entry of parley)
      expect(entry.routes).to.deep.equal({ '/v1/chat': 'native', '/v1/chat/completions': 'adapted' });
    expect(models.data.find((entry) => entry.id === 'alpha/gen-5.5')).to.deep.equal({
      id: 'alpha/gen-5.5',
      object: 'model',
      owned_by: 'alpha',
    });
  });

  it("answers the openai client's JSON request from Parley's answer, with the tally as usage and exact cost", async () => {
    const prompt = fresh('What is the capital of France');
    const { data: answer, response } = await client()
      .chat.completions.create({
        model: 'parley-latest',
        max_tokens: 40,
        messages: [
          { role: 'system', content: 'Be brief.' },
          { role: 'user', content: prompt },
          { role: 'assistant', content: 'Paris, I think.' },
          { role: 'user', content: [{ type: 'text', text: 'Are you sure?' }] },
        ],
      })
      .withResponse();
    expect(answer.object).to.equal('chat.completion');
    expect(answer.model).to.equal('quill-2-0925');
    expect(answer.choices[0]!.message).to.include({ role: 'assistant', content: 'Parley says hello.' });
    expect(answer.choices[0]!.finish_reason).to.equal('stop');
    const { seen, vendor } = latest();
    // Exactly Parley's request: its path, its key as a Token, its body (the dialog, the cap in words).
    expect(seen.path).to.equal('/v2/generate');
    expect(seen.headers.authorization).to.equal(`Token ${vendor.key}`);
    expect(JSON.parse(seen.body)).to.deep.equal({
      engine: 'quill-2-0925',
      dialog: [
        { from: 'system', say: 'Be brief.' },
        { from: 'human', say: prompt },
        { from: 'assistant', say: 'Paris, I think.' },
        { from: 'human', say: 'Are you sure?' },
      ],
      limits: { max_words: 30 },
    });
    const tally = ParleyVendor.tally(JSON.parse(seen.body).dialog, 'Parley says hello.');
    expect(answer.usage).to.deep.equal({
      prompt_tokens: tally.prompt,
      completion_tokens: tally.reply,
      total_tokens: tally.prompt + tally.reply,
      prompt_tokens_details: { cached_tokens: 0 },
    });
    const record = await usageRecord(response.headers.get('x-request-id')!);
    expect(record).to.include({
      route: 'chat-completions',
      requestedModel: 'parley-latest',
      model: 'parley/quill-2',
      upstream: 'parley',
      status: 200,
      outcome: 'complete',
      estimated: false,
    });
    expect(record).to.include({ inputTokens: tally.prompt, outputTokens: tally.reply, cachedTokens: 0 });
    expect(record.costUsd).to.be.closeTo(costOf(tally.prompt, tally.reply), 1e-12);
  });

  it('streams to the openai client: chunk events as content deltas, the finish, the include_usage chunk from the tally, [DONE]; recorded complete', async () => {
    a.chunks = b.chunks = ['It ', 'is ', 'sunny ', 'and ', 'warm.'];
    const prompt = fresh();
    const { data: stream, response } = await client()
      .chat.completions.create({
        model: 'parley/quill-2',
        stream: true,
        stream_options: { include_usage: true },
        messages: [{ role: 'user', content: prompt }],
      })
      .withResponse();
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    const text = chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').join('');
    expect(text).to.equal('It is sunny and warm.');
    expect(chunks[0]!.choices[0]!.delta.role).to.equal('assistant');
    expect(chunks.at(-2)!.choices[0]!.finish_reason).to.equal('stop');
    const tally = ParleyVendor.tally([{ say: prompt }], text);
    expect(chunks.at(-1)!.choices).to.deep.equal([]);
    expect(chunks.at(-1)!.usage).to.deep.equal({
      prompt_tokens: tally.prompt,
      completion_tokens: tally.reply,
      total_tokens: tally.prompt + tally.reply,
      prompt_tokens_details: { cached_tokens: 0 },
    });
    expect(JSON.parse(latest().seen.body)).to.deep.equal({
      engine: 'quill-2-0925',
      dialog: [{ from: 'human', say: prompt }],
      stream: true,
    });
    const record = await usageRecord(response.headers.get('x-request-id')!);
    expect(record).to.include({
      outcome: 'complete',
      status: 200,
      stream: true,
      inputTokens: tally.prompt,
      outputTokens: tally.reply,
      estimated: false,
    });
    expect(record.costUsd).to.be.closeTo(costOf(tally.prompt, tally.reply), 1e-12);
  });

  it("writes no usage chunk when the client did not ask for one, still [DONE], and none of Parley's event names", async () => {
    const prompt = fresh();
    const answer = await post({ model: 'parley/quill-2', stream: true, messages: [{ role: 'user', content: prompt }] });
    expect(answer.status).to.equal(200);
    expect(answer.headers['content-type']).to.match(/^text\/event-stream/);
    const events = answer.text.split('\n\n').filter(Boolean);
    expect(events.every((event) => event.startsWith('data: '))).to.equal(true);
    expect(answer.text).not.to.contain('event:').and.not.to.contain('"usage"').and.not.to.contain('tally');
    expect(events.at(-1)).to.equal('data: [DONE]');
    const tally = ParleyVendor.tally([{ say: prompt }], 'Parley says hello.');
    expect(await usageRecord(answer.requestId)).to.include({
      outcome: 'complete',
      inputTokens: tally.prompt,
      outputTokens: tally.reply,
    });
  });

  it('serves /v1/chat on the same Parley route, with the tally as usage', async () => {
    const prompt = fresh();
    const response = await request(`${test.url}/v1/chat`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'parley-latest', input: prompt, max_output_tokens: 20 }),
    });
    const answer = (await response.body.json()) as { result: { text: string }; usage: Record<string, number> };
    expect(response.statusCode).to.equal(200);
    expect(answer.result.text).to.equal('Parley says hello.');
    expect(JSON.parse(latest().seen.body)).to.deep.equal({
      engine: 'quill-2-0925',
      dialog: [{ from: 'human', say: prompt }],
      limits: { max_words: 15 },
    });
    const tally = ParleyVendor.tally([{ say: prompt }], 'Parley says hello.');
    expect(answer.usage).to.include({ input_tokens: tally.prompt, output_tokens: tally.reply });
  });

  it('refuses tools with a clear 400 in the Chat Completions envelope, before anything is sent or reserved', async () => {
    const before = sent().length;
    const error = await client()
      .chat.completions.create({
        model: 'parley-latest',
        messages: [{ role: 'user', content: fresh('What is the weather in Paris') }],
        tools: [
          {
            type: 'function',
            function: { name: 'weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
          },
        ],
        tool_choice: 'auto',
      })
      .then(
        () => undefined,
        (caught: unknown) => caught,
      );
    expect(error).to.be.instanceOf(OpenAI.BadRequestError);
    const refused = error as InstanceType<typeof OpenAI.BadRequestError>;
    expect(refused.status).to.equal(400);
    expect(refused.message)
      .to.contain("Field 'tools': Parley has no tool calling")
      .and.to.contain("Field 'tool_choice'");
    expect(refused.param).to.equal('tools');
    expect(sent().length).to.equal(before);
  });

  it("tells a Parley error in the Chat Completions envelope: a 400 fault is the openai client's BadRequestError with Parley's words", async () => {
    shared.push({
      kind: 'fault',
      status: 400,
      fault: { kind: 'dialog_too_long', text: 'The dialog is longer than Parley can follow' },
    });
    const error = await client()
      .chat.completions.create({ model: 'parley-latest', messages: [{ role: 'user', content: fresh() }] })
      .then(
        () => undefined,
        (caught: unknown) => caught,
      );
    expect(error).to.be.instanceOf(OpenAI.BadRequestError);
    const refused = error as InstanceType<typeof OpenAI.BadRequestError>;
    expect(refused.message).to.contain('The dialog is longer than Parley can follow');
    expect(refused.code).to.equal('dialog_too_long');
    expect(refused.type).to.equal('invalid_request_error');
    expect(JSON.stringify(refused.error)).not.to.contain(KEY_A).and.not.to.contain(KEY_B);
  });

  it("ends a stream with the in-band error when Parley reports a fault mid-answer (the client's SDK raises it); recorded as cut", async () => {
    shared.push({ kind: 'fault-event', afterChunks: 2 });
    const { data: stream, response } = await client()
      .chat.completions.create({ model: 'parley-latest', stream: true, messages: [{ role: 'user', content: fresh() }] })
      .withResponse();
    let text = '';
    const error = await (async () => {
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    })().then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(text).to.equal('Parley says ');
    expect(error).to.be.instanceOf(OpenAI.APIError);
    expect((error as Error).message).to.contain('Parley lost its train of thought');
    const record = await usageRecord(response.headers.get('x-request-id')!);
    expect(record).to.include({ outcome: 'upstream_cut', status: 200 });
  });

  it('fails over between its two endpoints: the first answers 503, the other serves; the failed one rests (its breaker open)', async () => {
    shared.push({ kind: 'fault', status: 503, fault: { kind: 'overloaded', text: 'Parley is busy' } });
    const before = { a: a.requests.length, b: b.requests.length };
    const { data: answer, response } = await client()
      .chat.completions.create({ model: 'parley-latest', messages: [{ role: 'user', content: fresh() }] })
      .withResponse();
    expect(answer.choices[0]!.message.content).to.equal('Parley says hello.');
    expect([a.requests.length - before.a, b.requests.length - before.b]).to.deep.equal([1, 1]);
    const record = await usageRecord(response.headers.get('x-request-id')!);
    expect(record).to.include({ outcome: 'complete', status: 200, attempts: 2 });
    // The endpoint that answered 503 first is the one not named in the record; it rests (failureThreshold 1).
    const failed = record.endpoint === 'a' ? b : a;
    const metrics = await (await fetch(`${test.url}/metrics`)).text();
    const up = (vendor: ParleyVendor) =>
      metrics
        .split('\n')
        .find(
          (line) =>
            line.startsWith('gateway_endpoint_up{') &&
            line.includes(`provider="parley"`) &&
            line.includes(new URL(vendor.baseUrl).origin),
        );
    expect(up(failed), 'the resting endpoint').to.match(/ 0$/);
    expect(up(failed === a ? b : a), 'the serving endpoint').to.match(/ 1$/);
    // While it rests, requests go to the other one only.
    const restingBefore = failed.requests.length;
    for (let index = 0; index < 4; index += 1)
      await client().chat.completions.create({
        model: 'parley-latest',
        messages: [{ role: 'user', content: fresh() }],
      });
    expect(failed.requests.length).to.equal(restingBefore);
    await sleep(1600);
  });

  it('fails a stream over when the first endpoint is cut before any event', async () => {
    shared.push({ kind: 'reset' });
    const { data: stream, response } = await client()
      .chat.completions.create({ model: 'parley-latest', stream: true, messages: [{ role: 'user', content: fresh() }] })
      .withResponse();
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    expect(text).to.equal('Parley says hello.');
    expect(await usageRecord(response.headers.get('x-request-id')!)).to.include({ outcome: 'complete', attempts: 2 });
    await sleep(1600);
  });

  it('blocks a finding split across chunk events, before any of it goes out (the guardrail reads the mapped text)', async () => {
    a.chunks = b.chunks = ['Your code is PROJ', 'ECT-12', '34, keep it safe.'];
    // The official client: what it read before the block, then the refusal it raises.
    const { data: stream, response } = await client()
      .chat.completions.create({
        model: 'parley-latest',
        stream: true,
        messages: [{ role: 'user', content: fresh('What is my code') }],
      })
      .withResponse();
    let text = '';
    const error = await (async () => {
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    })().then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(text).not.to.contain('PROJ');
    expect(text.length).to.be.lessThan('Your code is '.length + 1);
    expect(error).to.be.instanceOf(OpenAI.APIError);
    expect((error as InstanceType<typeof OpenAI.APIError>).code).to.equal('GW_ERR_GUARDRAIL');
    expect((error as Error).message).to.contain('no-codes');
    expect(await usageRecord(response.headers.get('x-request-id')!)).to.include({ outcome: 'guardrail_blocked' });
    // On the wire: nothing of the finding, the refusal last, no [DONE].
    const raw = await post({
      model: 'parley-latest',
      stream: true,
      messages: [{ role: 'user', content: fresh('What is my code') }],
    });
    expect(raw.status).to.equal(200);
    expect(raw.text).not.to.contain('PROJECT').and.not.to.contain('ECT-12').and.not.to.contain('[DONE]');
    expect(
      (
        JSON.parse(
          raw.text
            .split('\n\n')
            .filter(Boolean)
            .at(-1)!
            .replace(/^data: /, ''),
        ) as { error: { code: string } }
      ).error.code,
    ).to.equal('GW_ERR_GUARDRAIL');
    // The JSON answer is blocked whole.
    const json = await client()
      .chat.completions.create({
        model: 'parley-latest',
        messages: [{ role: 'user', content: fresh('What is my code') }],
      })
      .then(
        () => undefined,
        (caught: unknown) => caught,
      );
    expect(json).to.be.instanceOf(OpenAI.BadRequestError);
    expect((json as InstanceType<typeof OpenAI.BadRequestError>).code).to.equal('GW_ERR_GUARDRAIL');
    expect(JSON.stringify((json as InstanceType<typeof OpenAI.BadRequestError>).error)).not.to.contain(SECRET);
  });

  for (const stream of [false, true]) {
    it(`answers a repeated ${stream ? 'stream' : 'JSON'} request from the response cache, byte for byte, with Parley asked once`, async () => {
      const body = {
        model: 'parley/quill-2-mini',
        stream,
        messages: [{ role: 'user' as const, content: fresh('Cache me') }],
      };
      // The first answer on the wire, then the official client's from the cache, then the wire's again.
      const read = async () => {
        if (!stream) {
          const { data, response } = await client()
            .chat.completions.create({ ...body, stream: false })
            .withResponse();
          return {
            cache: response.headers.get('x-gateway-cache'),
            requestId: response.headers.get('x-request-id')!,
            text: data.choices[0]!.message.content,
          };
        }
        const { data, response } = await client()
          .chat.completions.create({ ...body, stream: true })
          .withResponse();
        let text = '';
        for await (const chunk of data) text += chunk.choices[0]?.delta.content ?? '';
        return {
          cache: response.headers.get('x-gateway-cache'),
          requestId: response.headers.get('x-request-id')!,
          text,
        };
      };
      const first = await post(body);
      const count = sent().length;
      const second = await read();
      const third = await post(body);
      expect([first.headers['x-gateway-cache'], second.cache, third.headers['x-gateway-cache']]).to.deep.equal([
        'miss',
        'hit',
        'hit',
      ]);
      expect(second.text).to.equal('Parley says hello.');
      expect(third.text).to.equal(first.text);
      expect(sent().length).to.equal(count);
      expect(await usageRecord(second.requestId)).to.include({ cache: 'hit', costUsd: 0 });
    });
  }

  it("reserves on a key's token limit from the client's request (nothing sent when it does not fit), and settles to Parley's tally", async () => {
    const created = await request(`${test.url}/admin/keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'parley-tpm', tpm: 200 }),
    });
    const { key, id } = (await created.body.json()) as { key: string; id: string };
    const before = sent().length;
    const refused = await client(key)
      .chat.completions.create({
        model: 'parley-latest',
        max_tokens: 500,
        messages: [{ role: 'user', content: fresh() }],
      })
      .then(
        () => undefined,
        (caught: unknown) => caught,
      );
    expect(refused).to.be.instanceOf(OpenAI.RateLimitError);
    expect((refused as InstanceType<typeof OpenAI.RateLimitError>).code).to.equal('GW_ERR_TOKEN_RATE_LIMITED');
    expect(sent().length).to.equal(before);
    const prompt = fresh();
    const { response } = await client(key)
      .chat.completions.create({
        model: 'parley-latest',
        max_tokens: 50,
        messages: [{ role: 'user', content: prompt }],
      })
      .withResponse();
    expect(response.headers.get('x-ratelimit-limit-tokens')).to.equal('200');
    await usageRecord(response.headers.get('x-request-id')!);
    const tally = ParleyVendor.tally([{ say: prompt }], 'Parley says hello.');
    const used = async () => {
      const view = (await (
        await request(`${test.url}/admin/limits`, { headers: { authorization: `Bearer ${ADMIN}` } })
      ).body.json()) as { keys: { id: string; use: { kind: string; used: number }[] }[] };
      return view.keys.find((entry) => entry.id === id)!.use.find((use) => use.kind === 'tpm')!.used;
    };
    // The reservation (the prompt's estimate and 50 tokens of output) settles to what Parley billed.
    await eventually(
      async () => (await used()) === tally.prompt + tally.reply,
      `tpm used settling to ${tally.prompt + tally.reply}`,
    );
  });

  it("exports the exchange's trace: the server span and Parley's attempt span with the tally, the engine and the finish", async () => {
    const prompt = fresh();
    const { data: stream, response } = await client()
      .chat.completions.create({ model: 'parley-latest', stream: true, messages: [{ role: 'user', content: prompt }] })
      .withResponse();
    for await (const _chunk of stream);
    const requestId = response.headers.get('x-request-id')!;
    let server: ReceivedSpan | undefined;
    await eventually(
      () => (server = receiver.spans.find((span) => span.attributes['gateway.request_id'] === requestId)) !== undefined,
      'the server span',
      20_000,
    );
    const attempt = () => receiver.spans.find((span) => span.parentSpanId === server!.spanId && span.kind === 3);
    await eventually(() => attempt() !== undefined, 'the attempt span');
    expect(server!.attributes).to.include({
      'gateway.model': 'parley/quill-2',
      'gateway.outcome': 'complete',
      'http.response.status_code': 200,
    });
    const tally = ParleyVendor.tally([{ say: prompt }], 'Parley says hello.');
    expect(attempt()!.attributes).to.include({
      'gen_ai.provider.name': 'parley',
      'gen_ai.request.model': 'quill-2-0925',
      'gen_ai.response.model': 'quill-2-0925',
      'gen_ai.usage.input_tokens': tally.prompt,
      'gen_ai.usage.output_tokens': tally.reply,
    });
    expect(attempt()!.attributes['gen_ai.response.finish_reasons']).to.deep.equal(['stop']);
  });

  for (const stream of [false, true]) {
    it(`redacts the endpoint's key should Parley echo it in its answer (${stream ? 'stream' : 'JSON'})`, async () => {
      a.chunks = ['Your token is ', KEY_A, '.'];
      b.chunks = ['Your token is ', KEY_B, '.'];
      const answer = await post({ model: 'parley-latest', stream, messages: [{ role: 'user', content: fresh() }] });
      expect(answer.status).to.equal(200);
      expect(answer.text).to.contain('Your token is ');
      expect(answer.text).not.to.contain(KEY_A).and.not.to.contain(KEY_B);
    });
  }

  it("leaves a model of a plugin without an adapter byte for byte on the same route (alpha's request and answer)", async () => {
    const answerBytes = `{"id":"c1","object":"chat.completion","created":1,"model":"gen-5.5","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4},"x_vendor":  {"kept": 1e400}}`;
    alpha.script = (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(answerBytes);
    const body = `{ "model": "alpha/gen-5.5",  "messages": [{"role":"user","content":"${fresh('hi')}"}], "n": 1, "x_extra": 12345678901234567890 }`;
    const response = await request(`${test.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' },
      body,
    });
    expect(await response.body.text()).to.equal(answerBytes);
    expect(alpha.requests.at(-1)!.body).to.equal(body.replace('"alpha/gen-5.5"', '"gen-5.5"'));
  });

  it('logs no plugin fault for any of it', () => {
    const lines = logText
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(lines.filter((line) => line.msg === 'request').length).to.be.greaterThan(10);
    expect(lines.filter((line) => (line.level as number) >= 50)).to.deep.equal([]);
  });
});
