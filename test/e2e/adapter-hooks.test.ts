import Anthropic from '@anthropic-ai/sdk';
import { expect } from 'chai';
import OpenAI from 'openai';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { request } from 'undici';
import { eventually } from '../helpers/eventually.ts';
import { ParleyVendor } from '../helpers/parley-vendor.ts';
import { startTestGateway, TEST_KEY, type TestGateway } from '../helpers/test-gateway.ts';

const KEY = 'wonky-parley-token';

/**
 * A compiled (JavaScript) plugin, so nothing checks its hooks' types: it fronts Parley (see
 * test/helpers/parley-vendor.ts) on /v1/chat/completions with an adapter whose hooks go wrong for
 * some models (each model's name says which hook, and how), and on /v1/messages with a correct one.
 */
const PLUGIN = `const say = (body) => body?.reply?.say ?? '';
const tally = (value) => value && typeof value.prompt === 'number' ? { inputTokens: value.prompt, outputTokens: value.reply, cachedTokens: 0 } : undefined;
const data = (event) => { try { return JSON.parse(event.data); } catch { return {}; } };
const usage = {
  fromBody: (body) => tally(body?.tally),
  fromStreamEvent: (seen, event) => (event.event === 'end' ? tally(data(event).tally) ?? seen : seen),
};
const dialog = (body) => body.messages.map((message) => ({ from: message.role === 'user' ? 'human' : message.role === 'assistant' ? 'assistant' : 'system', say: typeof message.content === 'string' ? message.content : message.content.map((part) => part.text).join('') }));
const broken = (context, what) => context.upstreamModel === what;
const chunk = (context, delta, finish = null) => ({ data: JSON.stringify({ id: 'c-' + context.requestId, object: 'chat.completion.chunk', created: context.created, model: context.upstreamModel, choices: [{ index: 0, delta, finish_reason: finish }] }) });

const completions = {
  checkRequest: (request) => { if (broken(request, 'check-throws')) throw new Error('check went wrong'); return []; },
  buildRequest: (request) => {
    if (broken(request, 'build-shape')) return { body: 'not an object' };
    const built = { body: { engine: request.upstreamModel, dialog: dialog(request.body), ...(request.stream ? { stream: true } : {}) } };
    return broken(request, 'build-credential') ? { ...built, headers: { authorization: 'Token stolen' } } : built;
  },
  mapAnswer: (body, context) => {
    if (broken(context, 'answer-throws')) throw new Error('cannot map this answer');
    return { id: 'c-' + context.requestId, object: 'chat.completion', created: context.created, model: context.upstreamModel, choices: [{ index: 0, message: { role: 'assistant', content: say(body) }, finish_reason: 'stop' }] };
  },
  stream: {
    terminal: (event) => event.event === 'end',
    createState: (context) => { if (broken(context, 'state-throws')) throw new Error('no state today'); return { n: 0 }; },
    map: (event, state, context) => {
      state.n += 1;
      if (broken(context, 'map-first')) return 42;
      if (broken(context, 'map-end') && event.event === 'end') throw new Error('the end is too much');
      if (event.event === 'chunk') return chunk(context, { content: data(event).say });
      if (event.event === 'end') return chunk(context, {}, 'stop');
      return null;
    },
  },
  mapError: ({ status, body }, context) => {
    if (broken(context, 'error-throws')) throw new Error('cannot tell this error');
    return { message: body?.fault?.text ?? 'Parley failed', code: body?.fault?.kind };
  },
  usage,
};

const messages = {
  buildRequest: (request) => ({ body: { engine: request.upstreamModel, dialog: [...(request.body.system ? [{ from: 'system', say: request.body.system }] : []), ...dialog(request.body)], limits: { max_words: request.body.max_tokens }, ...(request.stream ? { stream: true } : {}) } }),
  mapAnswer: (body, context) => ({ id: 'msg_' + context.requestId, type: 'message', role: 'assistant', model: context.upstreamModel, content: [{ type: 'text', text: say(body) }], stop_reason: 'end_turn', stop_sequence: null }),
  stream: {
    terminal: 'end',
    createState: () => ({ started: false }),
    map: (event, state, context) => {
      const out = [];
      const named = (type, fields) => ({ event: type, data: JSON.stringify({ type, ...fields }) });
      if (!state.started) {
        state.started = true;
        out.push(named('message_start', { message: { id: 'msg_' + context.requestId, type: 'message', role: 'assistant', model: context.upstreamModel, content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 0, output_tokens: 0 } } }));
        out.push(named('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }));
      }
      if (event.event === 'chunk') out.push(named('content_block_delta', { index: 0, delta: { type: 'text_delta', text: data(event).say } }));
      if (event.event === 'end') {
        const { prompt, reply } = data(event).tally;
        out.push(named('content_block_stop', { index: 0 }), named('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { input_tokens: prompt, output_tokens: reply } }));
      }
      return out;
    },
  },
  usage,
};

// Responses without a stream mapping: Parley answers whole there.
const responses = {
  buildRequest: (request) => ({ body: { engine: request.upstreamModel, dialog: [{ from: 'human', say: String(request.body.input) }] } }),
  mapAnswer: (body, context) => ({
    id: 'resp_' + context.requestId, object: 'response', created_at: context.created, status: 'completed', model: context.upstreamModel,
    output: [{ type: 'message', id: 'msg_' + context.requestId, role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: say(body), annotations: [] }] }],
  }),
  usage,
};

const model = (id, routes = ['chat-completions']) => ({ id, listed: false, routes, pricing: { input: 1, cachedInput: 1, output: 2 } });
export default {
  contract: 1,
  vendor: 'wonky',
  routes: {
    'chat-completions': { path: '/v2/generate', format: 'chat-completions', auth: { header: 'authorization', prefix: 'Token ' }, adapter: completions },
    messages: { path: '/v2/generate', format: 'messages', auth: { header: 'authorization', prefix: 'Token ' }, modelIds: ['native'], adapter: messages },
    responses: { path: '/v2/generate', format: 'responses', auth: { header: 'authorization', prefix: 'Token ' }, adapter: responses },
  },
  models: ['fine', 'fine-too', 'to-broken', 'check-throws', 'build-shape', 'build-credential', 'answer-throws', 'state-throws', 'map-first', 'map-end', 'error-throws']
    .map((id) => model(id))
    .concat([model('wonky-m', ['messages']), model('wonky-r', ['responses'])]),
};
`;

interface Answer {
  readonly status: number;
  readonly requestId: string;
  readonly text: string;
}

describe('route adapter hooks that fail, and adapters on the Messages and Responses routes', function () {
  this.timeout(60_000);
  let dir: string;
  let vendor: ParleyVendor;
  let test: TestGateway;
  let logText = '';

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gateway-adapter-hooks-'));
    await mkdir(join(dir, 'plugins', 'wonky'), { recursive: true });
    await writeFile(join(dir, 'plugins', 'package.json'), JSON.stringify({ type: 'module' }));
    await writeFile(join(dir, 'plugins', 'manifest.json'), JSON.stringify({ plugins: ['wonky'] }));
    await writeFile(join(dir, 'plugins', 'wonky', 'index.js'), PLUGIN);
    vendor = await ParleyVendor.start(KEY);
    const log = new PassThrough();
    log.on('data', (data: Buffer) => (logText += data.toString('utf8')));
    // Fallbacks between adapted models: to one that serves, and to one whose request cannot be built.
    await writeFile(
      join(dir, 'gateway.yaml'),
      'fallbacks:\n  wonky/fine: [wonky/fine-too]\n  wonky/to-broken: [wonky/build-shape]\n',
    );
    test = await startTestGateway({
      configFile: join(dir, 'gateway.yaml'),
      env: {
        GATEWAY_PLUGIN_PATH: join(dir, 'plugins'),
        WONKY_BASE_URL: vendor.baseUrl,
        WONKY_API_KEY: KEY,
        LOG_LEVEL: 'info',
      },
      logTo: log,
    });
  });
  afterEach(() => {
    vendor.queue.length = 0;
  });
  after(async () => {
    await test?.close();
    await vendor?.close();
    await rm(dir, { recursive: true, force: true });
  });

  async function completions(model: string, stream: boolean): Promise<Answer> {
    const response = await request(`${test.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: `wonky/${model}`, stream, messages: [{ role: 'user', content: 'Hello Parley' }] }),
    });
    return {
      status: response.statusCode,
      requestId: String(response.headers['x-request-id']),
      text: await response.body.text(),
    };
  }

  async function usageRecord(requestId: string): Promise<Record<string, any>> {
    let found: Record<string, any> | undefined;
    await eventually(async () => {
      await test.gateway.flushUsage();
      const journal = await readFile(join(test.dataDir, 'usage.jsonl'), 'utf8').catch(() => '');
      found = journal
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as Record<string, any>)
        .find((record) => record.requestId === requestId);
      return found !== undefined;
    }, `the usage record of ${requestId}`);
    return found!;
  }

  /** The one error line of a plugin fault, naming the plugin, the hook, the route and the model. */
  async function faultLine(answer: Answer, hook: string, model: string): Promise<Record<string, any>> {
    await eventually(
      () => logText.includes(`"request_id":"${answer.requestId}"`) && logText.includes(hook),
      'the fault log line',
    );
    const lines = logText
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as Record<string, any>)
      .filter((line) => line.level === 50 && line.request_id === answer.requestId);
    expect(lines).to.have.length(1);
    expect(lines[0]).to.include({
      plugin: 'wonky',
      hook,
      route: 'chat-completions',
      model: `wonky/${model}`,
      msg: `gateway plugin 'wonky' failed in its hook '${hook}'`,
    });
    return lines[0]!;
  }

  function expect502(answer: Answer, hook: string): void {
    expect(answer.status, answer.text).to.equal(502);
    const body = JSON.parse(answer.text) as { error: { code: string; message: string } };
    expect(body.error.code).to.equal('GW_ERR_PLUGIN_FAULT');
    expect(body.error.message).to.contain(`Gateway plugin 'wonky' failed in its hook '${hook}'`);
  }

  it('answers as any route when the hooks do what the contract says', async () => {
    for (const stream of [false, true]) {
      const answer = await completions('fine', stream);
      expect(answer.status, answer.text).to.equal(200);
      expect(answer.text).to.contain(stream ? '"content":"hello."' : '"content":"Parley says hello."');
      expect(await usageRecord(answer.requestId)).to.include({ outcome: 'complete', inputTokens: 2, outputTokens: 3 });
    }
  });

  const beforeSending: [string, string, string][] = [
    ['checkRequest throws', 'check-throws', 'routes.chat-completions.adapter.checkRequest'],
    ['buildRequest returns a body that is no object', 'build-shape', 'routes.chat-completions.adapter.buildRequest'],
    ['buildRequest sets a credential header', 'build-credential', 'routes.chat-completions.adapter.buildRequest'],
  ];
  for (const [what, model, hook] of beforeSending) {
    it(`${what}: a 502 naming the plugin and the hook, nothing sent to the vendor, recorded as plugin_error`, async () => {
      const sent = vendor.requests.length;
      const answer = await completions(model, false);
      expect502(answer, hook);
      expect(vendor.requests.length).to.equal(sent);
      await faultLine(answer, hook, model);
      expect(await usageRecord(answer.requestId)).to.include({
        outcome: 'plugin_error',
        status: 502,
        inputTokens: 0,
        outputTokens: 0,
      });
    });
  }

  it("mapAnswer throws: a 502, Parley's tally kept (read before mapping)", async () => {
    const answer = await completions('answer-throws', false);
    const hook = 'routes.chat-completions.adapter.mapAnswer';
    expect502(answer, hook);
    expect((await faultLine(answer, hook, 'answer-throws')).err.message).to.contain('cannot map this answer');
    expect(await usageRecord(answer.requestId)).to.include({
      outcome: 'plugin_error',
      inputTokens: 2,
      outputTokens: 3,
      estimated: false,
    });
  });

  it('stream.createState throws: a 502 before any byte of the stream', async () => {
    const answer = await completions('state-throws', true);
    expect502(answer, 'routes.chat-completions.adapter.stream.createState');
    expect(await usageRecord(answer.requestId)).to.include({ outcome: 'plugin_error', status: 502 });
  });

  it('stream.map returns 42 on the first event: a 502 before any byte, saying what came back', async () => {
    const answer = await completions('map-first', true);
    const hook = 'routes.chat-completions.adapter.stream.map';
    expect502(answer, hook);
    expect((await faultLine(answer, hook, 'map-first')).err.message).to.contain('returned 42;');
  });

  it("stream.map throws on the terminal event: the stream ends with the in-band fault, and Parley's tally on that event is kept", async () => {
    const answer = await completions('map-end', true);
    expect(answer.status).to.equal(200);
    const events = answer.text.split('\n\n').filter(Boolean);
    expect(events[0]).to.contain('"content":"Parley "');
    const last = JSON.parse(events.at(-1)!.replace(/^data: /, '')) as { error: { code: string; message: string } };
    expect(last.error.code).to.equal('GW_ERR_PLUGIN_FAULT');
    expect(last.error.message).to.contain("hook 'routes.chat-completions.adapter.stream.map'");
    expect(answer.text).not.to.contain('[DONE]');
    // A stream that did not complete: the input Parley billed, the output at least what it billed (the text counted).
    const record = await usageRecord(answer.requestId);
    expect(record).to.include({ outcome: 'plugin_error', status: 200, inputTokens: 2 });
    expect(record.outputTokens).to.be.at.least(3);
  });

  it("falls back to another adapted model when the vendor fails the requested one: its adapter builds the fallback's request", async () => {
    vendor.queue.push({ kind: 'fault', status: 503, fault: { kind: 'overloaded', text: 'busy' } });
    const response = await request(`${test.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'wonky/fine', messages: [{ role: 'user', content: 'Hello Parley' }] }),
    });
    expect(response.statusCode).to.equal(200);
    expect(response.headers['x-gateway-model']).to.equal('wonky/fine-too');
    const answer = (await response.body.json()) as { model: string; choices: { message: { content: string } }[] };
    expect(answer).to.deep.include({ model: 'fine-too' });
    expect(vendor.requests.slice(-2).map((seen) => JSON.parse(seen.body).engine)).to.deep.equal(['fine', 'fine-too']);
    expect(await usageRecord(String(response.headers['x-request-id']))).to.include({
      model: 'wonky/fine-too',
      requestedModel: 'wonky/fine',
      outcome: 'complete',
    });
  });

  it("names the fallback's adapter when it cannot build the fallback's request: a 502, the plugin fault recorded", async () => {
    vendor.queue.push({ kind: 'fault', status: 503, fault: { kind: 'overloaded', text: 'busy' } });
    const answer = await completions('to-broken', false);
    const hook = 'routes.chat-completions.adapter.buildRequest';
    expect502(answer, hook);
    expect((await faultLine(answer, hook, 'build-shape')).err.message).to.contain('returned { body: "not an object" }');
    expect(await usageRecord(answer.requestId)).to.include({
      outcome: 'plugin_error',
      status: 502,
      model: 'wonky/build-shape',
    });
  });

  it("mapError throws on Parley's error: a 502 naming the hook, not Parley's error", async () => {
    vendor.queue.push({ kind: 'fault', status: 400, fault: { kind: 'bad_dialog', text: 'nope' } });
    const answer = await completions('error-throws', false);
    expect502(answer, 'routes.chat-completions.adapter.mapError');
    expect(answer.text).not.to.contain('nope');
  });

  it('an adapter on /v1/responses without a stream mapping: JSON through the openai client, a stream refused with a 400', async () => {
    const openai = new OpenAI({ baseURL: `${test.url}/v1`, apiKey: TEST_KEY, maxRetries: 0 });
    const { data: answer, response } = await openai.responses
      .create({ model: 'wonky/wonky-r', input: 'Hello Parley' })
      .withResponse();
    expect(answer.output_text).to.equal('Parley says hello.');
    expect(answer.usage).to.include({ input_tokens: 2, output_tokens: 3, total_tokens: 5 });
    expect(await usageRecord(response.headers.get('x-request-id')!)).to.include({
      route: 'responses',
      inputTokens: 2,
      outputTokens: 3,
      outcome: 'complete',
    });
    const sent = vendor.requests.length;
    const refused = await openai.responses.create({ model: 'wonky/wonky-r', input: 'Hello Parley', stream: true }).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(refused).to.be.instanceOf(OpenAI.BadRequestError);
    expect((refused as Error).message).to.contain("Field 'stream': 'wonky/wonky-r' answers whole, never as a stream");
    expect(vendor.requests.length).to.equal(sent);
  });

  describe('an adapter on /v1/messages, read by the official Anthropic client', () => {
    const anthropic = () => new Anthropic({ baseURL: test.url, apiKey: TEST_KEY, maxRetries: 0 });

    it('a JSON answer: text, usage from the tally (Messages counts), recorded exactly', async () => {
      const { data: message, response } = await anthropic()
        .messages.create({
          model: 'wonky-m',
          max_tokens: 64,
          system: 'Be kind.',
          messages: [{ role: 'user', content: 'Hello Parley' }],
        })
        .withResponse();
      expect(message.content).to.deep.equal([{ type: 'text', text: 'Parley says hello.' }]);
      expect(message.usage).to.include({ input_tokens: 4, output_tokens: 3, cache_read_input_tokens: 0 });
      expect(JSON.parse(vendor.requests.at(-1)!.body)).to.deep.equal({
        engine: 'wonky-m',
        dialog: [
          { from: 'system', say: 'Be kind.' },
          { from: 'human', say: 'Hello Parley' },
        ],
        limits: { max_words: 64 },
      });
      expect(await usageRecord(response.headers.get('x-request-id')!)).to.include({
        route: 'messages',
        model: 'wonky/wonky-m',
        inputTokens: 4,
        outputTokens: 3,
        outcome: 'complete',
      });
    });

    it('a stream: the SDK assembles the message, message_stop written by the gateway, recorded complete', async () => {
      const stream = anthropic().messages.stream({
        model: 'wonky-m',
        max_tokens: 64,
        messages: [{ role: 'user', content: 'Hello Parley' }],
      });
      const message = await stream.finalMessage();
      expect(message.content).to.deep.equal([{ type: 'text', text: 'Parley says hello.' }]);
      expect(message.usage).to.include({ input_tokens: 2, output_tokens: 3 });
      const requestId = (await stream.withResponse()).response.headers.get('x-request-id')!;
      expect(await usageRecord(requestId)).to.include({
        route: 'messages',
        inputTokens: 2,
        outputTokens: 3,
        outcome: 'complete',
        stream: true,
      });
    });
  });
});
