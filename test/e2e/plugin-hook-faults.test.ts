import { expect } from 'chai';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { eventually, sleep } from '../helpers/eventually.ts';
import { ScriptedUpstream } from '../helpers/scripted-upstream.ts';
import { startTestGateway, TEST_KEY, type TestGateway } from '../helpers/test-gateway.ts';

/**
 * A compiled (JavaScript) plugin, so nothing checks its hooks' types: each model has a hook that
 * returns what the contract does not allow (or throws), on the first event of a stream or on a later one.
 */
const PLUGIN = `const model = (id, routes = ['chat-completions']) => ({ id, listed: false, routes, pricing: { input: 1, cachedInput: 0, output: 2 } });
const fixup = (name, id, fn, route = 'chat-completions') => ({ name, route, models: ['hooky/' + id], fixup: fn });
export default {
  contract: 1,
  vendor: 'hooky',
  routes: {
    'chat-completions': { path: '/chat/completions', format: 'chat-completions', auth: 'bearer' },
    messages: { path: '/messages', format: 'messages', auth: 'x-api-key' },
  },
  models: [
    model('fixup-first'), model('fixup-later'), model('fixup-list'), model('throw-first'), model('throw-later'),
    model('usage-string', ['chat-completions', 'chat']), model('usage-shape', ['chat-completions', 'chat']),
    model('chat-build', ['chat']), model('chat-bigint', ['chat']), model('chat-read', ['chat']), model('chat-fine', ['chat']),
    model('messages-first', ['messages']),
  ],
  streamFixups: [
    fixup('forty-two', 'fixup-first', () => 42),
    fixup('late-forty-two', 'fixup-later', (event) => (event.data.includes('LATE') ? 42 : undefined)),
    fixup('bad-list', 'fixup-list', (event) => [event, 7]),
    fixup('boom', 'throw-first', () => { throw new Error('boom on the first event'); }),
    fixup('late-boom', 'throw-later', (event) => { if (event.data.includes('LATE')) throw new Error('boom on a later event'); }),
    fixup('messages-forty-two', 'messages-first', () => 42, 'messages'),
  ],
  usageExtractors: [
    { route: 'chat-completions', models: ['hooky/usage-string'], extractor: { fromBody: () => 'many', fromStreamEvent: () => 'many' } },
    {
      route: 'chat-completions',
      models: ['hooky/usage-shape'],
      extractor: {
        fromBody: () => ({ input_tokens: 'many' }),
        fromStreamEvent: (seen, event) => (event.data.includes('"usage":{') ? { input_tokens: 'many' } : seen),
      },
    },
  ],
  nativeChat: {
    route: 'chat-completions',
    buildRequest: (request) => {
      if (request.upstreamModel === 'chat-build') return 'not an object';
      if (request.upstreamModel === 'chat-bigint') return { model: request.upstreamModel, seed: 1n };
      return { model: request.upstreamModel, messages: [{ role: 'user', content: request.input }], stream: false };
    },
    readText: (body) => (body.model === 'chat-read' ? 42 : body.choices?.[0]?.message?.content),
  },
};
`;

const chunk = (model: string, delta: object, finish: string | null = null) =>
  `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
const USAGE = { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 };

/**
 * The upstream: a Chat Completions stream in two writes, its opening (role, first content) and, a
 * moment later, the rest (a LATE delta, the finish, usage, [DONE]); a JSON answer; a Messages stream.
 */
function script(upstream: ScriptedUpstream): void {
  upstream.script = async (req, res, text) => {
    const body = JSON.parse(text) as { model: string; stream?: boolean };
    if (req.url === '/v1/messages') {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const event = (name: string, data: object) =>
        `event: ${name}\ndata: ${JSON.stringify({ type: name, ...data })}\n\n`;
      res.end(
        event('message_start', {
          message: {
            id: 'm1',
            type: 'message',
            role: 'assistant',
            model: body.model,
            content: [],
            stop_reason: null,
            usage: { input_tokens: 11, output_tokens: 1 },
          },
        }) +
          event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }) +
          event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'Hello' } }) +
          event('content_block_stop', { index: 0 }) +
          event('message_delta', { delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 7 } }) +
          event('message_stop', {}),
      );
      return;
    }
    if (!body.stream) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id: 'c1',
          object: 'chat.completion',
          created: 1,
          model: body.model,
          choices: [{ index: 0, message: { role: 'assistant', content: 'Hello there' }, finish_reason: 'stop' }],
          usage: USAGE,
        }),
      );
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(chunk(body.model, { role: 'assistant', content: '' }) + chunk(body.model, { content: 'Hello' }));
    await sleep(80);
    res.end(
      chunk(body.model, { content: ' LATE' }) +
        chunk(body.model, {}, 'stop') +
        `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: body.model, choices: [], usage: USAGE })}\n\n` +
        'data: [DONE]\n\n',
    );
  };
}

interface Answer {
  readonly status: number;
  readonly contentType: string;
  readonly requestId: string;
  readonly text: string;
}

describe('a plugin hook that returns a wrong shape (or throws), through the gateway', function () {
  this.timeout(60_000);
  let dir: string;
  let upstream: ScriptedUpstream;
  let test: TestGateway;
  let logText = '';

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gateway-hook-faults-'));
    await mkdir(join(dir, 'plugins', 'hooky'), { recursive: true });
    await writeFile(join(dir, 'plugins', 'package.json'), JSON.stringify({ type: 'module' }));
    await writeFile(join(dir, 'plugins', 'manifest.json'), JSON.stringify({ plugins: ['hooky'] }));
    await writeFile(join(dir, 'plugins', 'hooky', 'index.js'), PLUGIN);
    upstream = await ScriptedUpstream.start();
    script(upstream);
    const log = new PassThrough();
    log.on('data', (data: Buffer) => (logText += data.toString('utf8')));
    test = await startTestGateway({
      env: {
        GATEWAY_PLUGIN_PATH: join(dir, 'plugins'),
        HOOKY_BASE_URL: upstream.url,
        HOOKY_API_KEY: 'hooky-upstream-key',
        LOG_LEVEL: 'info',
      },
      logTo: log,
    });
  });
  after(async () => {
    await test?.close();
    await upstream?.close();
    await rm(dir, { recursive: true, force: true });
  });

  async function post(path: string, body: Record<string, unknown>): Promise<Answer> {
    const response = await fetch(`${test.url}${path}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${TEST_KEY}`,
        'content-type': 'application/json',
        'anthropic-version': '2023-06-01',
      },
      body: JSON.stringify(body),
    });
    return {
      status: response.status,
      contentType: response.headers.get('content-type') ?? '',
      requestId: response.headers.get('x-request-id')!,
      text: await response.text(),
    };
  }
  const completions = (model: string, stream: boolean) =>
    post('/v1/chat/completions', { model: `hooky/${model}`, stream, messages: [{ role: 'user', content: 'hi' }] });
  const nativeChat = (model: string) => post('/v1/chat', { model: `hooky/${model}`, input: 'hi', max_retries: 0 });

  const logLines = () =>
    logText
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as Record<string, any>);

  async function metric(name: string, labels: Record<string, string>): Promise<number> {
    const text = await (await fetch(`${test.url}/metrics`)).text();
    const wanted = Object.entries(labels).map(([key, value]) => `${key}="${value}"`);
    const line = text
      .split('\n')
      .find((candidate) => candidate.startsWith(`${name}{`) && wanted.every((label) => candidate.includes(label)));
    return line ? Number(line.split(' ').at(-1)) : 0;
  }

  async function usageRecord(requestId: string): Promise<Record<string, any>> {
    let found: Record<string, any> | undefined;
    await eventually(async () => {
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

  /**
   * What every plugin fault must leave: one error line naming the plugin, the hook, the route, the
   * model and the request id; the metric up by one; the usage record with outcome plugin_error; the
   * access log line and the request metric with the status the client got.
   */
  async function expectFault(
    answer: Answer,
    expected: { hook: string; model: string; route: string; status: number; countedBefore: number; cause: string },
  ) {
    const model = `hooky/${expected.model}`;
    await eventually(
      () => logLines().some((line) => line.msg === 'request' && line.request_id === answer.requestId),
      'the access log line',
    );
    const faults = logLines().filter((line) => line.level === 50 && line.request_id === answer.requestId);
    expect(faults, 'error lines of the request').to.have.length(1);
    expect(faults[0]).to.include({
      plugin: 'hooky',
      hook: expected.hook,
      route: expected.route,
      model,
      msg: `gateway plugin 'hooky' failed in its hook '${expected.hook}'`,
    });
    expect(faults[0]!.err.message).to.contain(expected.cause);
    expect(await metric('gateway_plugin_errors_total', { plugin: 'hooky', hook: expected.hook })).to.equal(
      expected.countedBefore + 1,
    );
    const record = await usageRecord(answer.requestId);
    expect(record).to.include({ outcome: 'plugin_error', model, status: expected.status, route: expected.route });
    const access = logLines().find((line) => line.msg === 'request' && line.request_id === answer.requestId)!;
    expect(access).to.include({ status: expected.status, outcome: 'plugin_error', model });
    expect(
      await metric('gateway_requests_total', { route: expected.route, model, status: String(expected.status) }),
    ).to.be.greaterThan(0);
  }

  /** The 502 answered in place of a stream (or a JSON answer): the route's envelope, the plugin and the hook named. */
  function expect502(answer: Answer, hook: string) {
    expect(answer.status, answer.text).to.equal(502);
    expect(answer.contentType).to.match(/^application\/json/);
    const body = JSON.parse(answer.text) as { error: { code: string; message: string; type: string } };
    expect(body.error).to.include({ code: 'GW_ERR_PLUGIN_FAULT', type: 'server_error' });
    expect(body.error.message).to.contain(`Gateway plugin 'hooky' failed in its hook '${hook}'`);
  }

  /** The 502 of /v1/chat, whose envelope is the plain one: only `detail`. */
  function expectPlain502(answer: Answer, hook: string) {
    expect(answer.status, answer.text).to.equal(502);
    const body = JSON.parse(answer.text) as { detail: string };
    expect(body.detail).to.equal(
      `Gateway plugin 'hooky' failed in its hook '${hook}' (a fault of this gateway's plugin, not of the upstream provider)`,
    );
  }

  /** A stream that was relayed, then ended with the in-band plugin fault (and nothing after it). */
  function expectInBand(answer: Answer, hook: string) {
    expect(answer.status).to.equal(200);
    expect(answer.contentType).to.match(/^text\/event-stream/);
    const events = answer.text.split('\n\n').filter(Boolean);
    expect(events[0]).to.contain('"role":"assistant"');
    expect(events[1]).to.contain('"content":"Hello"');
    const error = JSON.parse(events.at(-1)!.replace(/^data: /, '')) as { error: { code: string; message: string } };
    expect(error.error.code).to.equal('GW_ERR_PLUGIN_FAULT');
    expect(error.error.message).to.contain(`Gateway plugin 'hooky' failed in its hook '${hook}'`);
    expect(answer.text).not.to.contain('LATE');
    expect(answer.text).not.to.contain('[DONE]');
  }

  describe('a stream fixup', () => {
    it('returning 42 on the first event: a 502 before any byte of the stream, not GW_ERR_UPSTREAM', async () => {
      const hook = 'streamFixups.forty-two';
      const before = await metric('gateway_plugin_errors_total', { plugin: 'hooky', hook });
      const answer = await completions('fixup-first', true);
      expect502(answer, hook);
      expect(answer.text).not.to.contain('GW_ERR_UPSTREAM');
      await expectFault(answer, {
        hook,
        model: 'fixup-first',
        route: 'chat-completions',
        status: 502,
        countedBefore: before,
        cause: 'returned 42;',
      });
    });

    it('returning 42 after some events were relayed: the in-band fault, status 200 kept', async () => {
      const hook = 'streamFixups.late-forty-two';
      const answer = await completions('fixup-later', true);
      expectInBand(answer, hook);
      await expectFault(answer, {
        hook,
        model: 'fixup-later',
        route: 'chat-completions',
        status: 200,
        countedBefore: 0,
        cause: 'returned 42;',
      });
    });

    it('returning a list with an item that is no event: the fault of that fixup', async () => {
      const hook = 'streamFixups.bad-list';
      const answer = await completions('fixup-list', true);
      expect502(answer, hook);
      await expectFault(answer, {
        hook,
        model: 'fixup-list',
        route: 'chat-completions',
        status: 502,
        countedBefore: 0,
        cause: 'returned a list whose item 1 is 7;',
      });
    });

    it('throwing on the very first event: a 502, not 200 with an in-band error', async () => {
      const hook = 'streamFixups.boom';
      const answer = await completions('throw-first', true);
      expect502(answer, hook);
      await expectFault(answer, {
        hook,
        model: 'throw-first',
        route: 'chat-completions',
        status: 502,
        countedBefore: 0,
        cause: 'boom on the first event',
      });
    });

    it('throwing after some events were relayed: the in-band fault, as before', async () => {
      const hook = 'streamFixups.late-boom';
      const answer = await completions('throw-later', true);
      expectInBand(answer, hook);
      await expectFault(answer, {
        hook,
        model: 'throw-later',
        route: 'chat-completions',
        status: 200,
        countedBefore: 0,
        cause: 'boom on a later event',
      });
    });

    it("on a Messages stream: the 502 in the Messages route's envelope", async () => {
      const hook = 'streamFixups.messages-forty-two';
      const answer = await post('/v1/messages', {
        model: 'hooky/messages-first',
        stream: true,
        max_tokens: 64,
        messages: [{ role: 'user', content: 'hi' }],
      });
      expect(answer.status, answer.text).to.equal(502);
      const body = JSON.parse(answer.text) as { type: string; error: { type: string; message: string } };
      expect(body.type).to.equal('error');
      expect(body.error.message).to.contain(`Gateway plugin 'hooky' failed in its hook '${hook}'`);
      await expectFault(answer, {
        hook,
        model: 'messages-first',
        route: 'messages',
        status: 502,
        countedBefore: 0,
        cause: 'returned 42;',
      });
    });
  });

  describe('a usage extractor', () => {
    it('returning a string from fromStreamEvent on the first event: a 502', async () => {
      const hook = 'usageExtractors[0].fromStreamEvent';
      const answer = await completions('usage-string', true);
      expect502(answer, hook);
      await expectFault(answer, {
        hook,
        model: 'usage-string',
        route: 'chat-completions',
        status: 502,
        countedBefore: 0,
        cause: 'returned "many";',
      });
    });

    it('returning {input_tokens: "many"} on the usage event, after some events were relayed: the in-band fault', async () => {
      const hook = 'usageExtractors[1].fromStreamEvent';
      const answer = await completions('usage-shape', true);
      expect(answer.status).to.equal(200);
      const events = answer.text.split('\n\n').filter(Boolean);
      expect(events.at(-1)).to.contain('GW_ERR_PLUGIN_FAULT').and.to.contain(`failed in its hook '${hook}'`);
      expect(answer.text).to.contain('LATE');
      await expectFault(answer, {
        hook,
        model: 'usage-shape',
        route: 'chat-completions',
        status: 200,
        countedBefore: 0,
        cause: 'returned { input_tokens: "many" };',
      });
    });

    it('returning a string from fromBody on a JSON answer: a 502', async () => {
      const hook = 'usageExtractors[0].fromBody';
      const before = await metric('gateway_plugin_errors_total', { plugin: 'hooky', hook });
      const answer = await completions('usage-string', false);
      expect502(answer, hook);
      await expectFault(answer, {
        hook,
        model: 'usage-string',
        route: 'chat-completions',
        status: 502,
        countedBefore: before,
        cause: 'returned "many";',
      });
    });

    it('returning {input_tokens: "many"} from fromBody on /v1/chat: a 502', async () => {
      const hook = 'usageExtractors[1].fromBody';
      const answer = await nativeChat('usage-shape');
      expectPlain502(answer, hook);
      await expectFault(answer, {
        hook,
        model: 'usage-shape',
        route: 'chat',
        status: 502,
        countedBefore: 0,
        cause: 'returned { input_tokens: "many" };',
      });
    });
  });

  describe('a usage extractor that fails keeps what the upstream billed', () => {
    const billed = { inputTokens: 11, outputTokens: 7, estimated: false };

    it('on a JSON answer: the figures where its format keeps them, not an estimate', async () => {
      const answer = await completions('usage-string', false);
      expect502(answer, 'usageExtractors[0].fromBody');
      expect(await usageRecord(answer.requestId)).to.include({ outcome: 'plugin_error', ...billed });
    });

    it('on the usage event of a stream: the figures that event carries, not an estimate', async () => {
      const answer = await completions('usage-shape', true);
      expect(answer.text).to.contain('GW_ERR_PLUGIN_FAULT');
      expect(await usageRecord(answer.requestId)).to.include({ outcome: 'plugin_error', ...billed });
    });

    it('on /v1/chat: the figures of the upstream answer, not an estimate', async () => {
      const answer = await nativeChat('usage-shape');
      expectPlain502(answer, 'usageExtractors[1].fromBody');
      expect(await usageRecord(answer.requestId)).to.include({ outcome: 'plugin_error', ...billed });
    });
  });

  describe('the native chat adapter', () => {
    it('buildRequest returning a string: a 502, nothing sent upstream, recorded with no tokens', async () => {
      const hook = 'nativeChat.buildRequest';
      const before = await metric('gateway_plugin_errors_total', { plugin: 'hooky', hook });
      const sent = upstream.requests.length;
      const answer = await nativeChat('chat-build');
      expectPlain502(answer, hook);
      expect(upstream.requests.length).to.equal(sent);
      await expectFault(answer, {
        hook,
        model: 'chat-build',
        route: 'chat',
        status: 502,
        countedBefore: before,
        cause: 'returned "not an object";',
      });
      expect(await usageRecord(answer.requestId)).to.include({ inputTokens: 0, outputTokens: 0, estimated: false });
    });

    it('buildRequest returning a body JSON cannot carry (a BigInt): a 502 naming the hook', async () => {
      const hook = 'nativeChat.buildRequest';
      const before = await metric('gateway_plugin_errors_total', { plugin: 'hooky', hook });
      const answer = await nativeChat('chat-bigint');
      expectPlain502(answer, hook);
      await expectFault(answer, {
        hook,
        model: 'chat-bigint',
        route: 'chat',
        status: 502,
        countedBefore: before,
        cause: 'returned a body JSON.stringify cannot write',
      });
    });

    it('readText returning 42: a 502, the usage recorded', async () => {
      const hook = 'nativeChat.readText';
      const answer = await nativeChat('chat-read');
      expectPlain502(answer, hook);
      await expectFault(answer, {
        hook,
        model: 'chat-read',
        route: 'chat',
        status: 502,
        countedBefore: 0,
        cause: 'returned 42;',
      });
      expect((await usageRecord(answer.requestId)).inputTokens).to.be.greaterThan(0);
    });

    it('answers as usual when its hooks return what the contract allows', async () => {
      const answer = await nativeChat('chat-fine');
      expect(answer.status, answer.text).to.equal(200);
      expect((JSON.parse(answer.text) as { result: { text: string } }).result.text).to.equal('Hello there');
    });
  });
});
