import Anthropic from '@anthropic-ai/sdk';
import { expect } from 'chai';
import { request, type IncomingHttpHeaders } from 'node:http';
import OpenAI from 'openai';
import {
  startMockUpstream,
  type MockUpstream,
  type MockUpstreamOptions,
} from '../../mock-upstream/mock-upstream-server.ts';

const KEY = 'mock-key-0001';
const hello = [{ role: 'user' as const, content: 'Hello there' }];
// 'Hello there' is 11 characters: ceil(11 / 4) + 7 prompt tokens. 'Mock reply to: Hello there' is 26: ceil(26 / 4) + 1.
const HELLO_INPUT = 10;
const HELLO_OUTPUT = 8;

interface RawAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  /** The body as it arrived, one entry per read, with the time since the request. */
  chunks: { bytes: Buffer; at: number }[];
  text: string;
  /** Set when the connection broke. */
  error?: Error;
}

/** A POST on a real socket that keeps every read apart, and reports a broken connection instead of throwing. */
function raw(
  upstream: MockUpstream,
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
  method = 'POST',
): Promise<RawAnswer> {
  const started = Date.now();
  return new Promise((resolve) => {
    const answer: RawAnswer = { status: 0, headers: {}, chunks: [], text: '' };
    const done = (error?: Error) => {
      answer.text = Buffer.concat(answer.chunks.map((chunk) => chunk.bytes)).toString('utf8');
      resolve(error ? { ...answer, error } : answer);
    };
    const payload = typeof body === 'string' ? body : JSON.stringify(body);
    const req = request(
      `${upstream.url}${path}`,
      { method, headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', ...headers } },
      (res) => {
        answer.status = res.statusCode ?? 0;
        answer.headers = res.headers;
        res.on('data', (bytes: Buffer) => answer.chunks.push({ bytes, at: Date.now() - started }));
        res.on('end', () => done());
        res.on('error', done);
        res.on('aborted', () => done(new Error('aborted')));
      },
    );
    req.on('error', done);
    req.end(method === 'POST' ? payload : undefined);
  });
}

interface SseEvent {
  event?: string;
  data: string;
}

function sse(text: string): SseEvent[] {
  return text
    .split(/\r?\n\r?\n/)
    .filter((block) => block !== '')
    .map((block) => {
      const event = /^event: (.*)$/m.exec(block)?.[1]?.replace(/\r$/, '');
      const data = /^data: (.*)$/m.exec(block)![1]!.replace(/\r$/, '');
      return event === undefined ? { data } : { event, data };
    });
}

const jsonData = (events: SseEvent[]) =>
  events.filter((event) => event.data !== '[DONE]').map((event) => JSON.parse(event.data) as Record<string, any>);
const chatBody = (extra: Record<string, unknown> = {}) => ({ model: 'gen-test', messages: hello, ...extra });
const messagesBody = (extra: Record<string, unknown> = {}) => ({
  model: 'beta-test',
  max_tokens: 100,
  messages: hello,
  ...extra,
});

describe('mock upstream', function () {
  let upstream: MockUpstream;
  let openai: OpenAI;
  let anthropic: Anthropic;
  const others: MockUpstream[] = [];
  const another = async (options: MockUpstreamOptions) => {
    const started = await startMockUpstream({ apiKey: KEY, ...options });
    others.push(started);
    return started;
  };

  before(async () => {
    upstream = await startMockUpstream({ apiKey: KEY });
    openai = new OpenAI({ baseURL: upstream.url, apiKey: KEY, maxRetries: 0 });
    anthropic = new Anthropic({ baseURL: upstream.url.replace(/\/v1$/, ''), apiKey: KEY, maxRetries: 0 });
  });
  after(async () => {
    await upstream.close();
    await Promise.all(others.map((other) => other.close()));
  });
  beforeEach(() => upstream.reset());

  describe('Chat Completions', () => {
    it('answers JSON the SDK parses, echoing the model, with deterministic usage and a request id', async () => {
      const { data, response } = await openai.chat.completions
        .create({ model: 'gen-test', messages: hello })
        .withResponse();
      expect(data.object).to.equal('chat.completion');
      expect(data.model).to.equal('gen-test');
      expect(data.choices[0]).to.deep.include({ index: 0, finish_reason: 'stop', logprobs: null });
      expect(data.choices[0]!.message).to.deep.include({ role: 'assistant', content: 'Mock reply to: Hello there' });
      expect(data.usage).to.deep.include({
        prompt_tokens: HELLO_INPUT,
        completion_tokens: HELLO_OUTPUT,
        total_tokens: HELLO_INPUT + HELLO_OUTPUT,
      });
      expect(data.usage!.prompt_tokens_details).to.deep.include({ cached_tokens: 0 });
      expect(data.usage!.completion_tokens_details).to.deep.include({ reasoning_tokens: 0 });
      expect(response.headers.get('content-type')).to.equal('application/json');
      expect(response.headers.get('x-request-id')).to.match(/^req_[0-9a-f]{16}$/);
      const [seen] = upstream.requests;
      expect(seen).to.deep.include({
        method: 'POST',
        path: '/v1/chat/completions',
        stream: false,
        status: 200,
        completed: true,
      });
      expect(seen!.body).to.deep.equal({ model: 'gen-test', messages: hello });
      expect(JSON.parse(seen!.rawBody)).to.deep.equal(seen!.body);
      expect(seen!.headers.authorization).to.equal(`Bearer ${KEY}`);
      expect(seen!.reportedUsage).to.deep.equal({
        inputTokens: HELLO_INPUT,
        outputTokens: HELLO_OUTPUT,
        cachedTokens: 0,
      });
    });

    it('counts more input tokens for a longer prompt, the same for the same prompt, and answers the last user message', async () => {
      const long = [
        { role: 'system' as const, content: 'x'.repeat(400) },
        { role: 'user' as const, content: 'first' },
        { role: 'assistant' as const, content: 'ok' },
        { role: 'user' as const, content: 'second question' },
      ];
      const first = await openai.chat.completions.create({ model: 'm', messages: long });
      const second = await openai.chat.completions.create({ model: 'm', messages: long });
      expect(first.usage).to.deep.equal(second.usage);
      // 'x'*400 first ok 'second question', joined by spaces: 400 + 1 + 5 + 1 + 2 + 1 + 15 = 425 characters.
      expect(first.usage!.prompt_tokens).to.equal(Math.ceil(425 / 4) + 7);
      expect(first.choices[0]!.message.content).to.equal('Mock reply to: second question');
    });

    it('takes the reply from x-mock-reply (percent-encoded for non-ASCII) and the cached tokens from the option or x-mock-cached-tokens', async () => {
      const cached = await another({ cachedTokens: 3 });
      const client = new OpenAI({ baseURL: cached.url, apiKey: KEY, maxRetries: 0 });
      const byOption = await client.chat.completions.create(
        chatBody() as OpenAI.ChatCompletionCreateParamsNonStreaming,
      );
      expect(byOption.usage!.prompt_tokens_details!.cached_tokens).to.equal(3);
      expect(cached.requests[0]!.reportedUsage).to.deep.equal({
        inputTokens: HELLO_INPUT,
        outputTokens: HELLO_OUTPUT,
        cachedTokens: 3,
      });
      const byHeader = await client.chat.completions.create(
        chatBody() as OpenAI.ChatCompletionCreateParamsNonStreaming,
        { headers: { 'x-mock-cached-tokens': '6', 'x-mock-reply': encodeURIComponent('Grüße ✓') } },
      );
      expect(byHeader.usage!.prompt_tokens_details!.cached_tokens).to.equal(6);
      expect(byHeader.choices[0]!.message.content).to.equal('Grüße ✓');
      expect(byHeader.usage!.completion_tokens).to.equal(Math.ceil('Grüße ✓'.length / 4) + 1);
    });

    it('streams chunks the SDK parses: role first, then the pieces, finish_reason on the last, no usage without include_usage', async () => {
      const stream = await openai.chat.completions.create({ model: 'gen-test', messages: hello, stream: true });
      const chunks: OpenAI.ChatCompletionChunk[] = [];
      for await (const chunk of stream) chunks.push(chunk);
      expect(chunks.map((chunk) => chunk.choices[0]!.delta.content ?? '').join('')).to.equal(
        'Mock reply to: Hello there',
      );
      expect(chunks.length).to.be.greaterThan(3);
      expect(chunks[0]!.choices[0]!.delta.role).to.equal('assistant');
      expect(
        chunks.every(
          (chunk) =>
            chunk.object === 'chat.completion.chunk' && chunk.id === chunks[0]!.id && chunk.model === 'gen-test',
        ),
      ).to.equal(true);
      expect(chunks.map((chunk) => chunk.choices[0]!.finish_reason)).to.deep.equal([
        ...chunks.slice(1).map(() => null),
        'stop',
      ]);
      expect(chunks.at(-1)!.choices[0]!.delta.content).to.not.equal('');
      expect(chunks.some((chunk) => 'usage' in chunk)).to.equal(false);
      expect(upstream.requests[0]).to.deep.include({ stream: true, status: 200, completed: true });
      expect(upstream.requests[0]!.reportedUsage).to.equal(undefined);
    });

    it('with include_usage: usage null on every chunk, then a choices:[] usage chunk before [DONE]', async () => {
      const answer = await raw(
        upstream,
        '/chat/completions',
        chatBody({ stream: true, stream_options: { include_usage: true } }),
      );
      expect(answer.headers['content-type']).to.equal('text/event-stream');
      expect(answer.headers['x-request-id']).to.match(/^req_/);
      const events = sse(answer.text);
      expect(events.at(-1)).to.deep.equal({ data: '[DONE]' });
      expect(events.every((event) => event.event === undefined)).to.equal(true);
      const chunks = jsonData(events);
      expect(chunks.slice(0, -1).every((chunk) => chunk.usage === null && chunk.choices.length === 1)).to.equal(true);
      expect(chunks.at(-1)).to.deep.include({ choices: [] });
      expect(chunks.at(-1)!.usage).to.deep.include({
        prompt_tokens: HELLO_INPUT,
        completion_tokens: HELLO_OUTPUT,
        total_tokens: HELLO_INPUT + HELLO_OUTPUT,
      });
      expect(upstream.requests[0]!.reportedUsage).to.deep.equal({
        inputTokens: HELLO_INPUT,
        outputTokens: HELLO_OUTPUT,
        cachedTokens: 0,
      });

      const stream = await openai.chat.completions.create({
        model: 'gen-test',
        messages: hello,
        stream: true,
        stream_options: { include_usage: true },
      });
      let usage: OpenAI.CompletionUsage | null | undefined;
      for await (const chunk of stream) usage = chunk.usage ?? usage;
      expect(usage?.completion_tokens).to.equal(HELLO_OUTPUT);
    });
  });

  describe('Responses', () => {
    it('answers a response object the SDK parses', async () => {
      const { data, response } = await openai.responses
        .create({ model: 'gen-5.5', input: 'Hello there' })
        .withResponse();
      expect(data).to.deep.include({
        object: 'response',
        status: 'completed',
        model: 'gen-5.5',
        output_text: 'Mock reply to: Hello there',
      });
      expect(data.output[0]).to.deep.include({ type: 'message', role: 'assistant', status: 'completed' });
      expect(data.usage).to.deep.equal({
        input_tokens: HELLO_INPUT,
        input_tokens_details: { cached_tokens: 0 },
        output_tokens: HELLO_OUTPUT,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: HELLO_INPUT + HELLO_OUTPUT,
      });
      expect(response.headers.get('x-request-id')).to.match(/^req_/);
      expect(upstream.requests[0]!.reportedUsage).to.deep.equal({
        inputTokens: HELLO_INPUT,
        outputTokens: HELLO_OUTPUT,
        cachedTokens: 0,
      });
    });

    it('answers the last user item of an input list', async () => {
      const input = [{ role: 'user' as const, content: [{ type: 'input_text' as const, text: 'Item text' }] }];
      expect((await openai.responses.create({ model: 'm', input })).output_text).to.equal('Mock reply to: Item text');
    });

    it('streams the named events in order, numbered, usage only in response.completed, and no [DONE]', async () => {
      const answer = await raw(upstream, '/responses', { model: 'gen-5.5', input: 'Hello there', stream: true });
      const events = sse(answer.text);
      const deltas = events.filter((event) => event.event === 'response.output_text.delta').length;
      expect(deltas).to.be.greaterThan(1);
      expect(events.map((event) => event.event)).to.deep.equal([
        'response.created',
        'response.in_progress',
        'response.output_item.added',
        'response.content_part.added',
        ...Array<string>(deltas).fill('response.output_text.delta'),
        'response.output_text.done',
        'response.content_part.done',
        'response.output_item.done',
        'response.completed',
      ]);
      const data = jsonData(events);
      expect(data.map((event) => [event.type, event.sequence_number])).to.deep.equal(
        events.map((event, index) => [event.event, index]),
      );
      expect(data.slice(0, -1).some((event) => event.response?.usage)).to.equal(false);
      expect(data.at(-1)!.response.usage).to.deep.include({ input_tokens: HELLO_INPUT, output_tokens: HELLO_OUTPUT });
      expect(answer.text).to.not.contain('[DONE]');

      const final = await openai.responses.stream({ model: 'gen-5.5', input: 'Hello there' }).finalResponse();
      expect(final.output_text).to.equal('Mock reply to: Hello there');
      expect(final.usage?.output_tokens).to.equal(HELLO_OUTPUT);
    });
  });

  describe('Messages', () => {
    it('answers JSON the SDK parses, records anthropic-version, and sums the three input parts into inputTokens', async () => {
      const { data, response } = await anthropic.messages
        .create({ model: 'beta-test', max_tokens: 100, messages: hello })
        .withResponse();
      expect(data).to.deep.include({
        type: 'message',
        role: 'assistant',
        model: 'beta-test',
        stop_reason: 'end_turn',
        stop_sequence: null,
      });
      expect(data.content).to.deep.equal([{ type: 'text', text: 'Mock reply to: Hello there' }]);
      // Without cache reads a few tokens are written to the cache: 6 + 4 + 0 = 10.
      expect(data.usage).to.deep.include({
        input_tokens: HELLO_INPUT - 4,
        cache_creation_input_tokens: 4,
        cache_read_input_tokens: 0,
        output_tokens: HELLO_OUTPUT,
      });
      expect(response.headers.get('request-id')).to.match(/^req_/);
      expect(response.headers.get('x-request-id')).to.equal(null);
      const [seen] = upstream.requests;
      expect(seen!.path).to.equal('/v1/messages');
      // This SDK version sends its key as a bearer token, and its own version date.
      expect(seen!.headers.authorization).to.equal(`Bearer ${KEY}`);
      expect(seen!.headers['anthropic-version']).to.match(/^\d{4}-\d{2}-\d{2}$/);
      expect(seen!.reportedUsage).to.deep.equal({
        inputTokens: HELLO_INPUT,
        outputTokens: HELLO_OUTPUT,
        cachedTokens: 0,
      });

      const cached = await anthropic.messages.create(
        { model: 'beta-test', max_tokens: 100, messages: hello },
        { headers: { 'x-mock-cached-tokens': '7' } },
      );
      expect(cached.usage).to.deep.include({
        input_tokens: HELLO_INPUT - 7,
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: 7,
      });
      expect(upstream.requests[1]!.reportedUsage).to.deep.equal({
        inputTokens: HELLO_INPUT,
        outputTokens: HELLO_OUTPUT,
        cachedTokens: 7,
      });
    });

    it('streams the named events with two cumulative message_delta events; the SDK ends with the final counts', async () => {
      const answer = await raw(upstream, '/messages', messagesBody({ stream: true }));
      expect(answer.headers['request-id']).to.match(/^req_/);
      const events = sse(answer.text);
      const deltas = events.filter((event) => event.event === 'content_block_delta').length;
      expect(deltas).to.be.greaterThan(1);
      expect(events.map((event) => event.event)).to.deep.equal([
        'message_start',
        'content_block_start',
        'ping',
        ...Array<string>(deltas).fill('content_block_delta'),
        'content_block_stop',
        'message_delta',
        'message_delta',
        'message_stop',
      ]);
      const data = jsonData(events);
      expect(data.map((event) => event.type)).to.deep.equal(events.map((event) => event.event));
      expect(data[0]!.message.usage).to.deep.equal({
        input_tokens: HELLO_INPUT - 4,
        cache_creation_input_tokens: 4,
        cache_read_input_tokens: 0,
        output_tokens: 1,
      });
      const outputs = data.filter((event) => event.type === 'message_delta').map((event) => event.usage.output_tokens);
      expect(outputs).to.deep.equal([Math.ceil(HELLO_OUTPUT / 2), HELLO_OUTPUT]);
      expect(outputs[0] + outputs[1]).to.be.greaterThan(HELLO_OUTPUT);
      expect(upstream.requests[0]!.reportedUsage).to.deep.equal({
        inputTokens: HELLO_INPUT,
        outputTokens: HELLO_OUTPUT,
        cachedTokens: 0,
      });

      const final = await anthropic.messages
        .stream(messagesBody() as Anthropic.MessageCreateParamsNonStreaming)
        .finalMessage();
      expect(final.content[0]).to.deep.include({ type: 'text', text: 'Mock reply to: Hello there' });
      expect(final.usage).to.deep.include({ input_tokens: HELLO_INPUT - 4, output_tokens: HELLO_OUTPUT });
    });

    it('refuses a request without max_tokens with a 400 in the Anthropic error shape', async () => {
      const answer = await raw(upstream, '/messages', { model: 'beta-test', messages: hello });
      expect(answer.status).to.equal(400);
      const body = JSON.parse(answer.text);
      expect(body).to.deep.include({ type: 'error' });
      expect(body.error.type).to.equal('invalid_request_error');
      expect(body.error.message).to.contain('max_tokens');
      expect(upstream.requests[0]!.reportedUsage).to.equal(undefined);
    });

    it('counts tokens as the messages route does, without recording usage', async () => {
      const counted = await anthropic.messages.countTokens({ model: 'beta-test', messages: hello });
      expect(counted).to.deep.equal({ input_tokens: HELLO_INPUT });
      expect(upstream.requests[0]).to.deep.include({ path: '/v1/messages/count_tokens', status: 200, completed: true });
      expect(upstream.requests[0]!.reportedUsage).to.equal(undefined);
    });
  });

  describe('auth and routes', () => {
    it('answers a wrong or missing key with 401 in the OpenAI shape on chat and responses', async () => {
      const wrong = new OpenAI({ baseURL: upstream.url, apiKey: 'wrong', maxRetries: 0 });
      const error = await wrong.chat.completions
        .create({ model: 'm', messages: hello })
        .catch((caught: unknown) => caught);
      expect(error).to.be.instanceOf(OpenAI.AuthenticationError);
      expect((error as InstanceType<typeof OpenAI.AuthenticationError>).error).to.deep.equal({
        message: 'Incorrect API key provided.',
        type: 'invalid_request_error',
        param: null,
        code: 'invalid_api_key',
      });
      expect(
        await wrong.responses.create({ model: 'm', input: 'x' }).catch((caught: unknown) => caught),
      ).to.be.instanceOf(OpenAI.AuthenticationError);
      const missing = await raw(upstream, '/chat/completions', chatBody(), { authorization: '' });
      expect(missing.status).to.equal(401);
      // x-api-key is a Messages header only.
      expect(
        (await raw(upstream, '/chat/completions', chatBody(), { authorization: '', 'x-api-key': KEY })).status,
      ).to.equal(401);
      expect(upstream.requests.map((entry) => [entry.status, entry.reportedUsage])).to.deep.equal(
        Array(4).fill([401, undefined]),
      );
    });

    it('takes x-api-key or a bearer token on the Messages routes, and refuses others in the Anthropic shape', async () => {
      const byHeader = await raw(upstream, '/messages', messagesBody(), {
        authorization: '',
        'x-api-key': KEY,
        'anthropic-version': '2023-06-01',
      });
      expect(byHeader.status).to.equal(200);
      expect(byHeader.headers['request-id']).to.match(/^req_/);
      expect(upstream.requests[0]!.headers).to.deep.include({ 'x-api-key': KEY, 'anthropic-version': '2023-06-01' });
      expect(
        (await raw(upstream, '/messages/count_tokens', messagesBody(), { authorization: '', 'x-api-key': KEY })).status,
      ).to.equal(200);
      const bearer = new Anthropic({
        baseURL: upstream.url.replace(/\/v1$/, ''),
        apiKey: null,
        authToken: KEY,
        maxRetries: 0,
      });
      expect(
        (await bearer.messages.create(messagesBody() as Anthropic.MessageCreateParamsNonStreaming)).content,
      ).to.have.length(1);
      expect(upstream.requests[2]!.headers.authorization).to.equal(`Bearer ${KEY}`);
      const wrongHeader = await raw(upstream, '/messages', messagesBody(), { authorization: '', 'x-api-key': 'wrong' });
      expect(wrongHeader.status).to.equal(401);
      const wrong = new Anthropic({ baseURL: upstream.url.replace(/\/v1$/, ''), apiKey: 'wrong', maxRetries: 0 });
      const error = await wrong.messages
        .countTokens({ model: 'm', messages: hello })
        .catch((caught: unknown) => caught);
      expect(error).to.be.instanceOf(Anthropic.AuthenticationError);
      const body = (error as InstanceType<typeof Anthropic.AuthenticationError>).error as {
        type: string;
        error: { type: string };
        request_id: string;
      };
      expect(body.type).to.equal('error');
      expect(body.error.type).to.equal('authentication_error');
      expect(body.request_id).to.match(/^req_/);
    });

    it('answers an unknown path or method with a 404 JSON body, and a body that is not JSON with a 400', async () => {
      for (const [method, path] of [
        ['POST', '/embeddings'],
        ['GET', '/models'],
        ['GET', '/chat/completions'],
      ] as const) {
        const answer = await raw(upstream, path, {}, {}, method);
        expect(answer.status, path).to.equal(404);
        expect(answer.headers['content-type']).to.equal('application/json');
        expect(JSON.parse(answer.text).error.message).to.contain(path);
      }
      const bad = await raw(upstream, '/chat/completions', '{not json');
      expect(bad.status).to.equal(400);
      expect(upstream.requests.at(-1)).to.deep.include({ rawBody: '{not json', body: undefined });
    });

    it('records nothing with recordRequests: false', async () => {
      const quiet = await another({ recordRequests: false });
      expect((await raw(quiet, '/chat/completions', chatBody())).status).to.equal(200);
      expect(quiet.requests).to.deep.equal([]);
    });

    it('keeps connections alive', async () => {
      const answer = await raw(upstream, '/chat/completions', chatBody(), { connection: 'keep-alive' });
      expect(answer.headers.connection).to.equal('keep-alive');
    });
  });

  describe('profiles and stream framing', () => {
    it('running-usage: every chunk carries growing running totals, total above prompt + completion, even without include_usage', async () => {
      const selections: { headers: Record<string, string>; body: Record<string, string> }[] = [
        { headers: { 'x-mock-profile': 'running-usage' }, body: {} },
        { headers: {}, body: { mock_profile: 'running-usage' } },
      ];
      for (const select of selections) {
        upstream.reset();
        const answer = await raw(
          upstream,
          '/chat/completions',
          chatBody({ stream: true, ...select.body }),
          select.headers,
        );
        const chunks = jsonData(sse(answer.text));
        expect(sse(answer.text).at(-1)!.data).to.equal('[DONE]');
        expect(chunks.length).to.be.greaterThan(2);
        expect(chunks.every((chunk) => chunk.usage && chunk.choices.length === 1)).to.equal(true);
        const completions = chunks.map((chunk) => chunk.usage.completion_tokens as number);
        expect(completions).to.deep.equal([...completions].sort((a, b) => a - b));
        expect(completions[0]).to.be.lessThan(completions.at(-1)!);
        const last = chunks.at(-1)!.usage;
        expect(last.completion_tokens).to.equal(HELLO_OUTPUT);
        expect(last.total_tokens).to.be.greaterThan(last.prompt_tokens + last.completion_tokens);
        expect(chunks.at(-1)!.choices[0].finish_reason).to.equal('stop');
        // The thinking tokens (total - prompt - completion) count as output.
        expect(upstream.requests[0]!.reportedUsage).to.deep.equal({
          inputTokens: HELLO_INPUT,
          outputTokens: last.total_tokens - last.prompt_tokens,
          cachedTokens: 0,
        });
      }
    });

    it('empty-function-call: CRLF, real tool_calls and function_call fragments, and the empty placeholder on the final chunk', async () => {
      const profiled = await another({ profile: 'empty-function-call' });
      const answer = await raw(profiled, '/chat/completions', chatBody({ stream: true }));
      expect(answer.text).to.contain('\r\n\r\n');
      expect(/(?<!\r)\n/.test(answer.text)).to.equal(false);
      const chunks = jsonData(sse(answer.text));
      const final = chunks.at(-1)!.choices[0];
      expect(final.delta.function_call).to.deep.equal({ name: '', arguments: '' });
      expect(final.delta).to.not.have.property('tool_calls');
      expect(final.finish_reason).to.equal('tool_calls');
      const calls = chunks.flatMap((chunk) => chunk.choices).filter((choice) => choice.delta.tool_calls);
      expect(calls[0].delta.tool_calls[0]).to.deep.include({
        index: 0,
        id: 'call_mock',
        type: 'function',
        function: { name: 'lookup', arguments: '' },
      });
      const legacy = chunks
        .flatMap((chunk) => chunk.choices)
        .filter((choice) => choice.delta.function_call && choice !== final);
      expect(legacy.map((choice) => choice.delta.function_call)).to.deep.equal([
        { name: 'lookup', arguments: '' },
        { arguments: '{"q":"y"}' },
      ]);

      // The raw iterator takes it; the SDK's stream helper trips over the placeholder, as it does on real relays.
      const client = new OpenAI({ baseURL: profiled.url, apiKey: KEY, maxRetries: 0 });
      let text = '';
      for await (const chunk of await client.chat.completions.create({ model: 'm', messages: hello, stream: true }))
        text += chunk.choices[0]?.delta.content ?? '';
      expect(text).to.equal('Mock reply to: Hello there');
      const error = await client.chat.completions
        .stream({ model: 'm', messages: hello })
        .finalChatCompletion()
        .catch((caught: Error) => caught);
      expect((error as Error).message).to.contain('missing function_call.name for choice 0');
    });

    it('an unknown profile is a 400', async () => {
      expect(
        (await raw(upstream, '/chat/completions', chatBody({ stream: true }), { 'x-mock-profile': 'nope' })).status,
      ).to.equal(400);
    });

    it('lineEnding \\r\\n frames every format with CRLF, and the SDKs still parse it', async () => {
      const crlf = await another({ lineEnding: '\r\n' });
      for (const [path, body] of [
        ['/chat/completions', chatBody({ stream: true })],
        ['/responses', { model: 'm', input: 'Hello there', stream: true }],
        ['/messages', messagesBody({ stream: true })],
      ] as const) {
        const answer = await raw(crlf, path, body);
        expect(answer.text, path).to.contain('\r\n\r\n');
        expect(/(?<!\r)\n/.test(answer.text), path).to.equal(false);
      }
      const final = await new Anthropic({ baseURL: crlf.url.replace(/\/v1$/, ''), apiKey: KEY, maxRetries: 0 }).messages
        .stream(messagesBody() as Anthropic.MessageCreateParamsNonStreaming)
        .finalMessage();
      expect(final.usage.output_tokens).to.equal(HELLO_OUTPUT);
      let text = '';
      for await (const chunk of await new OpenAI({
        baseURL: crlf.url,
        apiKey: KEY,
        maxRetries: 0,
      }).chat.completions.create({ model: 'm', messages: hello, stream: true }))
        text += chunk.choices[0]?.delta.content ?? '';
      expect(text).to.equal('Mock reply to: Hello there');
    });

    it('x-mock-split: 1 writes each event in two halves, cutting through multi-byte characters, and the SDK reassembles them', async () => {
      const reply = `Ünïcödé ${'✓'.repeat(60)} ${'日本語'.repeat(20)} ${'é'.repeat(70)} done`;
      const headers = { 'x-mock-split': '1', 'x-mock-reply': encodeURIComponent(reply) };
      const answer = await raw(upstream, '/messages', messagesBody({ stream: true }), headers);
      const events = sse(answer.text);
      expect(events.length).to.be.greaterThan(5);
      // Reads that end mid-event (a loaded machine may merge a few halves, so not all of them).
      expect(answer.chunks.length).to.be.greaterThan(events.length);
      expect(answer.chunks.filter((chunk) => !chunk.bytes.toString('latin1').endsWith('\n\n')).length).to.be.at.least(
        events.length / 2,
      );
      // Some reads end inside a UTF-8 sequence, so they are not valid UTF-8 on their own.
      const strict = new TextDecoder('utf-8', { fatal: true });
      const valid = (bytes: Buffer) => {
        try {
          strict.decode(bytes);
          return true;
        } catch {
          return false;
        }
      };
      expect(answer.chunks.some((chunk) => !valid(chunk.bytes))).to.equal(true);
      const final = await anthropic.messages
        .stream(messagesBody() as Anthropic.MessageCreateParamsNonStreaming, { headers })
        .finalMessage();
      expect((final.content[0] as Anthropic.TextBlock).text).to.equal(reply);
      let text = '';
      for await (const chunk of await openai.chat.completions.create(
        { model: 'm', messages: hello, stream: true },
        { headers },
      ))
        text += chunk.choices[0]?.delta.content ?? '';
      expect(text).to.equal(reply);
    });

    it('chunkDelayMs spaces the events, so they arrive one by one', async () => {
      const slow = await another({ chunkDelayMs: 30 });
      const answer = await raw(slow, '/chat/completions', chatBody({ stream: true }));
      const events = sse(answer.text);
      expect(answer.chunks.length).to.be.at.least(events.length - 1);
      expect(answer.chunks.filter((chunk) => sse(chunk.bytes.toString()).length === 1).length).to.be.at.least(
        events.length - 2,
      );
      expect(answer.chunks.at(-1)!.at - answer.chunks[0]!.at).to.be.at.least(25 * (events.length - 1));
    });
  });

  describe('behaviours', () => {
    it('status: answers the given status, body and headers, one per request in order, then normally', async () => {
      upstream.enqueue(
        {
          kind: 'status',
          status: 429,
          body: { error: { message: 'slow down', type: 'requests', param: null, code: 'rate_limit_exceeded' } },
          headers: { 'retry-after': '1' },
        },
        { kind: 'status', status: 500 },
        { kind: 'status', status: 529 },
      );
      const limited = await openai.chat.completions
        .create({ model: 'm', messages: hello })
        .catch((caught: unknown) => caught);
      expect(limited).to.be.instanceOf(OpenAI.RateLimitError);
      expect((limited as InstanceType<typeof OpenAI.RateLimitError>).headers.get('retry-after')).to.equal('1');
      expect((limited as InstanceType<typeof OpenAI.RateLimitError>).message).to.contain('slow down');
      const failed = await raw(upstream, '/responses', { model: 'm', input: 'x' });
      expect([failed.status, JSON.parse(failed.text).error.type]).to.deep.equal([500, 'server_error']);
      const overloaded = await anthropic.messages
        .create(messagesBody() as Anthropic.MessageCreateParamsNonStreaming)
        .catch((caught: unknown) => caught);
      expect((overloaded as InstanceType<typeof Anthropic.APIError>).status).to.equal(529);
      expect(
        ((overloaded as InstanceType<typeof Anthropic.APIError>).error as { error: { type: string } }).error.type,
      ).to.equal('overloaded_error');
      expect((await openai.chat.completions.create({ model: 'm', messages: hello })).choices).to.have.length(1);
      expect(upstream.requests.map((entry) => [entry.status, entry.reportedUsage === undefined])).to.deep.equal([
        [429, true],
        [500, true],
        [529, true],
        [200, false],
      ]);
    });

    it('hang: accepts and never answers; close() ends it', async () => {
      const hanging = await another({});
      hanging.enqueue({ kind: 'hang' });
      const client = new OpenAI({ baseURL: hanging.url, apiKey: KEY, maxRetries: 0, timeout: 300 });
      expect(
        await client.chat.completions.create({ model: 'm', messages: hello }).catch((caught: unknown) => caught),
      ).to.be.instanceOf(OpenAI.APIConnectionTimeoutError);
      expect(hanging.requests[0]).to.deep.include({ status: 0, completed: false });
      hanging.enqueue({ kind: 'hang' });
      let ended = false;
      const pending = raw(hanging, '/chat/completions', chatBody()).finally(() => (ended = true));
      while (hanging.requests.length < 2) await new Promise((resolve) => setTimeout(resolve, 5));
      expect(ended, 'the request ended before close()').to.equal(false);
      // The client has no timeout and never gives up: close() resolves only because it ends the hanging
      // connection itself (waiting for it would never end), and the client sees it broken, with no answer.
      await hanging.close();
      const cut = await pending;
      expect(cut.error).to.be.instanceOf(Error);
      expect(cut.status).to.equal(0);
      expect(hanging.requests[1]).to.deep.include({ status: 0, completed: false });
    });

    it('reset: destroys the socket before any response', async () => {
      upstream.enqueue({ kind: 'reset' });
      const answer = await raw(upstream, '/chat/completions', chatBody());
      expect(answer.error).to.be.instanceOf(Error);
      expect(answer.status).to.equal(0);
      upstream.enqueue({ kind: 'reset' });
      expect(
        await openai.chat.completions.create({ model: 'm', messages: hello }).catch((caught: unknown) => caught),
      ).to.be.instanceOf(OpenAI.APIConnectionError);
      expect(upstream.requests.map((entry) => [entry.status, entry.completed])).to.deep.equal([
        [0, false],
        [0, false],
      ]);
    });

    it('delay: answers normally after the pause', async () => {
      upstream.enqueue({ kind: 'delay', ms: 150 });
      const started = Date.now();
      const completion = await openai.chat.completions.create({ model: 'm', messages: hello });
      expect(Date.now() - started).to.be.at.least(145);
      expect(completion.usage!.prompt_tokens).to.equal(HELLO_INPUT);
      expect(upstream.requests[0]!.reportedUsage).to.deep.equal({
        inputTokens: HELLO_INPUT,
        outputTokens: HELLO_OUTPUT,
        cachedTokens: 0,
      });
    });

    it('no-usage: JSON without a usage field and streams without any usage, in every format', async () => {
      const cases = [
        ['/chat/completions', chatBody()],
        ['/responses', { model: 'm', input: 'Hello there' }],
        ['/messages', messagesBody()],
        ['/chat/completions', chatBody({ stream: true, stream_options: { include_usage: true } })],
        ['/responses', { model: 'm', input: 'Hello there', stream: true }],
        ['/messages', messagesBody({ stream: true })],
      ] as const;
      for (const [path, body] of cases) {
        upstream.enqueue({ kind: 'no-usage' });
        const answer = await raw(upstream, path, body);
        expect(answer.status, path).to.equal(200);
        expect(answer.text, path).to.contain('Mock reply');
        expect(answer.text, path).to.not.match(/"usage":\{|_tokens/);
      }
      expect(upstream.requests.map((entry) => [entry.completed, entry.reportedUsage])).to.deep.equal(
        cases.map(() => [true, undefined]),
      );
    });

    it('drop-mid-stream: streams the given number of events, then breaks the connection', async () => {
      upstream.enqueue({ kind: 'drop-mid-stream', afterEvents: 2 });
      const answer = await raw(
        upstream,
        '/chat/completions',
        chatBody({ stream: true, stream_options: { include_usage: true } }),
      );
      expect(answer.status).to.equal(200);
      expect(answer.error).to.be.instanceOf(Error);
      expect(sse(answer.text)).to.have.length(2);
      expect(upstream.requests[0]).to.deep.include({ status: 200, completed: false });
      expect(upstream.requests[0]!.reportedUsage).to.equal(undefined);

      upstream.enqueue({ kind: 'drop-mid-stream', afterEvents: 3 });
      const stream = await openai.chat.completions.create({ model: 'm', messages: hello, stream: true });
      let seen = 0;
      const error = await (async () => {
        for await (const _ of stream) seen += 1;
      })().catch((caught: unknown) => caught);
      expect(error).to.be.instanceOf(Error);
      expect(seen).to.equal(3);

      // Messages: message_start already carried the input counts and output_tokens 1.
      upstream.enqueue({ kind: 'drop-mid-stream', afterEvents: 1 });
      const messages = await raw(upstream, '/messages', messagesBody({ stream: true }));
      expect(sse(messages.text).map((event) => event.event)).to.deep.equal(['message_start']);
      expect(upstream.requests[2]!.reportedUsage).to.deep.equal({
        inputTokens: HELLO_INPUT,
        outputTokens: 1,
        cachedTokens: 0,
      });

      // A JSON answer breaks off halfway through its body.
      upstream.enqueue({ kind: 'drop-mid-stream', afterEvents: 1 });
      const json = await raw(upstream, '/responses', { model: 'm', input: 'x' });
      expect(json.error).to.be.instanceOf(Error);
      expect(json.text.length).to.be.greaterThan(10);
      expect(upstream.requests[3]).to.deep.include({ status: 200, completed: false });
      expect(upstream.requests[3]!.reportedUsage).to.equal(undefined);
    });

    it('reset() clears the requests and the queue', async () => {
      upstream.enqueue({ kind: 'status', status: 500 });
      await raw(upstream, '/nowhere', {});
      upstream.enqueue({ kind: 'hang' });
      upstream.reset();
      expect(upstream.requests).to.deep.equal([]);
      expect((await raw(upstream, '/chat/completions', chatBody())).status).to.equal(200);
    });
  });

  describe('prompt caching', () => {
    const SYSTEM = 'x'.repeat(400);
    // The prefix as a prompt cache holds it: the system prompt and the first message, 'x'*400 + ' ' + 'first'.
    const PREFIX_TOKENS = Math.ceil((400 + 1 + 5) / 4);
    const turns = (...later: string[]) => [
      { role: 'system', content: SYSTEM },
      { role: 'user', content: 'first' },
      ...later.flatMap((text) => [
        { role: 'assistant', content: 'ok' },
        { role: 'user', content: text },
      ]),
    ];
    const lastUsage = (text: string) =>
      jsonData(sse(text)).filter((data) => data.usage || data.response?.usage || data.message?.usage);

    it('reports the prefix tokens of a repeated system prompt and first message as cached, per instance, in Chat Completions JSON and SSE', async () => {
      const caching = await another({ promptCache: true });
      const first = JSON.parse((await raw(caching, '/chat/completions', { model: 'm', messages: turns() })).text);
      expect(first.usage.prompt_tokens_details.cached_tokens).to.equal(0);
      const second = JSON.parse(
        (await raw(caching, '/chat/completions', { model: 'm', messages: turns('second') })).text,
      );
      expect(second.usage.prompt_tokens_details.cached_tokens).to.equal(PREFIX_TOKENS);
      expect(caching.requests[1]!.reportedUsage!.cachedTokens).to.equal(PREFIX_TOKENS);
      const streamed = await raw(caching, '/chat/completions', {
        model: 'm',
        messages: turns('second', 'third'),
        stream: true,
        stream_options: { include_usage: true },
      });
      expect(lastUsage(streamed.text).at(-1)!.usage.prompt_tokens_details.cached_tokens).to.equal(PREFIX_TOKENS);
      const otherFirst = JSON.parse(
        (
          await raw(caching, '/chat/completions', {
            model: 'm',
            messages: [
              { role: 'system', content: SYSTEM },
              { role: 'user', content: 'other' },
            ],
          })
        ).text,
      );
      expect(otherFirst.usage.prompt_tokens_details.cached_tokens, 'another first message is another prefix').to.equal(
        0,
      );
      expect(caching.cachedPrefixes).to.equal(2);

      const elsewhere = await another({ promptCache: true });
      const cold = JSON.parse(
        (await raw(elsewhere, '/chat/completions', { model: 'm', messages: turns('second') })).text,
      );
      expect(cold.usage.prompt_tokens_details.cached_tokens, 'another instance has not seen it').to.equal(0);
      caching.reset();
      expect(caching.cachedPrefixes).to.equal(0);
    });

    it('reports them in Messages (cache_read_input_tokens) and Responses (input_tokens_details.cached_tokens), JSON and SSE', async () => {
      const caching = await another({ promptCache: true });
      const messages = (stream: boolean, ...later: string[]) => ({
        model: 'm',
        max_tokens: 10,
        system: SYSTEM,
        messages: turns(...later).slice(1),
        stream,
      });
      expect(
        JSON.parse((await raw(caching, '/messages', messages(false))).text).usage.cache_read_input_tokens,
      ).to.equal(0);
      expect(JSON.parse((await raw(caching, '/messages', messages(false, 'again'))).text).usage).to.include({
        cache_read_input_tokens: PREFIX_TOKENS,
        cache_creation_input_tokens: 0,
      });
      const start = jsonData(sse((await raw(caching, '/messages', messages(true, 'again', 'more'))).text)).find(
        (data) => data.type === 'message_start',
      )!;
      expect(start.message.usage.cache_read_input_tokens).to.equal(PREFIX_TOKENS);

      const responses = (stream: boolean, ...later: string[]) => ({
        model: 'm',
        instructions: SYSTEM,
        input: turns(...later).slice(1),
        stream,
      });
      expect(
        JSON.parse((await raw(caching, '/responses', responses(false))).text).usage.input_tokens_details.cached_tokens,
      ).to.equal(0);
      expect(
        JSON.parse((await raw(caching, '/responses', responses(false, 'again'))).text).usage.input_tokens_details
          .cached_tokens,
      ).to.equal(PREFIX_TOKENS);
      const completed = jsonData(sse((await raw(caching, '/responses', responses(true, 'again'))).text)).at(-1)!;
      expect(completed.response.usage.input_tokens_details.cached_tokens).to.equal(PREFIX_TOKENS);
      const text = (input: string, stream: boolean) => ({ model: 'm', input, stream });
      await raw(caching, '/responses', text('a plain string input', false));
      expect(
        JSON.parse((await raw(caching, '/responses', text('a plain string input', false))).text).usage
          .input_tokens_details.cached_tokens,
      ).to.equal(Math.ceil('a plain string input'.length / 4));
    });

    it('turns on per request with x-mock-prompt-cache: 1; x-mock-cached-tokens wins', async () => {
      const body = { model: 'm', messages: turns() };
      const header = { 'x-mock-prompt-cache': '1' };
      await raw(upstream, '/chat/completions', body, header);
      expect(
        JSON.parse((await raw(upstream, '/chat/completions', body, header)).text).usage.prompt_tokens_details
          .cached_tokens,
      ).to.equal(PREFIX_TOKENS);
      expect(
        JSON.parse((await raw(upstream, '/chat/completions', body)).text).usage.prompt_tokens_details.cached_tokens,
        'off without the header',
      ).to.equal(0);
      expect(
        JSON.parse((await raw(upstream, '/chat/completions', body, { ...header, 'x-mock-cached-tokens': '3' })).text)
          .usage.prompt_tokens_details.cached_tokens,
      ).to.equal(3);
    });
  });
});
