import Anthropic from '@anthropic-ai/sdk';
import { expect } from 'chai';
import OpenAI from 'openai';
import { request } from 'undici';
import { startMockUpstream, type MockUpstream } from '../../mock-upstream/mock-upstream-server.ts';

const KEY = 'mock-key-0002';
const weatherParameters = {
  type: 'object',
  properties: {
    city: { type: 'string' },
    days: { type: 'integer', minimum: 2 },
    unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
  },
  required: ['city', 'days', 'unit'],
};
const WEATHER_ARGS = { city: 'mock', days: 2, unit: 'celsius' };
const chatTool = (name: string) => ({
  type: 'function',
  function: { name, description: `The ${name} tool`, parameters: weatherParameters },
});
const responsesTool = (name: string) => ({
  type: 'function',
  name,
  description: `The ${name} tool`,
  parameters: weatherParameters,
  strict: true,
});
const messagesTool = (name: string) => ({ name, description: `The ${name} tool`, input_schema: weatherParameters });
const user = [{ role: 'user', content: 'Weather in Paris?' }];

/** A POST on a real socket; the SSE events come back parsed (data as JSON unless `[DONE]`). */
async function post(upstream: MockUpstream, path: string, body: unknown) {
  const response = await request(`${upstream.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await response.body.text();
  const events = (response.headers['content-type'] ?? '').includes('text/event-stream')
    ? text
        .split('\n\n')
        .filter(Boolean)
        .map((block) => {
          const data = /^data: (.*)$/m.exec(block)![1]!;
          return { event: /^event: (.*)$/m.exec(block)?.[1], data: data === '[DONE]' ? data : JSON.parse(data) };
        })
    : [];
  return { status: response.statusCode, json: events.length === 0 ? JSON.parse(text) : undefined, events };
}

describe('mock upstream: answers like a model (tool calls, tool results, structured output)', function () {
  let upstream: MockUpstream;
  let openai: OpenAI;
  let anthropic: Anthropic;

  before(async () => {
    upstream = await startMockUpstream({ apiKey: KEY });
    openai = new OpenAI({ baseURL: upstream.url, apiKey: KEY, maxRetries: 0 });
    anthropic = new Anthropic({ baseURL: upstream.url.replace(/\/v1$/, ''), apiKey: KEY, maxRetries: 0 });
  });
  after(async () => upstream.close());
  beforeEach(() => upstream.reset());

  describe('Chat Completions', () => {
    it('answers a tool call when tools are offered: content null, a call_ id, arguments valid for the schema, finish_reason tool_calls, usage', async () => {
      const { json } = await post(upstream, '/chat/completions', {
        model: 'm',
        messages: user,
        tools: [chatTool('weather'), chatTool('other')],
      });
      const choice = json.choices[0];
      expect(choice.finish_reason).to.equal('tool_calls');
      expect(choice.message).to.deep.include({ role: 'assistant', content: null });
      expect(choice.message.tool_calls).to.have.length(1);
      expect(choice.message.tool_calls[0].id).to.match(/^call_[A-Za-z0-9]{24}$/);
      expect(choice.message.tool_calls[0]).to.deep.include({
        type: 'function',
        function: { name: 'weather', arguments: JSON.stringify(WEATHER_ARGS) },
      });
      expect(json.usage.completion_tokens).to.be.greaterThan(0);
      expect(upstream.requests[0]!.reportedUsage).to.deep.include({ outputTokens: json.usage.completion_tokens });
    });

    it('streams a tool call: id and name first, the arguments in pieces, finish_reason tool_calls, then the usage chunk', async () => {
      const { events } = await post(upstream, '/chat/completions', {
        model: 'm',
        messages: user,
        tools: [chatTool('weather')],
        stream: true,
        stream_options: { include_usage: true },
      });
      expect(events.at(-1)!.data).to.equal('[DONE]');
      const chunks = events.slice(0, -1).map((event) => event.data);
      const first = chunks[0].choices[0].delta;
      expect(first).to.deep.include({ role: 'assistant', content: null });
      expect(first.tool_calls[0]).to.deep.include({
        index: 0,
        type: 'function',
        function: { name: 'weather', arguments: '' },
      });
      const pieces = chunks
        .slice(1)
        .flatMap((chunk) => chunk.choices[0]?.delta.tool_calls ?? [])
        .map((call) => call.function.arguments);
      expect(pieces.length).to.be.greaterThan(1);
      expect(JSON.parse(pieces.join(''))).to.deep.equal(WEATHER_ARGS);
      expect(chunks.at(-2).choices[0].finish_reason).to.equal('tool_calls');
      expect(chunks.at(-1)).to.deep.include({ choices: [] });
      expect(chunks.at(-1).usage.completion_tokens).to.equal(upstream.requests[0]!.reportedUsage!.outputTokens);
      const final = await openai.chat.completions
        .stream({
          model: 'm',
          messages: [{ role: 'user', content: 'x' }],
          tools: [chatTool('weather') as OpenAI.ChatCompletionTool],
        })
        .finalChatCompletion();
      expect(final.choices[0]!.message.tool_calls![0]).to.deep.include({
        function: { name: 'weather', arguments: JSON.stringify(WEATHER_ARGS) },
      });
    });

    it('answers with the tool result after a tool turn, and follows tool_choice', async () => {
      const call = { id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{}' } };
      const afterTool = await post(upstream, '/chat/completions', {
        model: 'm',
        messages: [
          ...user,
          { role: 'assistant', content: null, tool_calls: [call] },
          { role: 'tool', tool_call_id: 'call_1', content: 'Sunny, 21' },
        ],
        tools: [chatTool('weather')],
      });
      expect(afterTool.json.choices[0]).to.deep.include({ finish_reason: 'stop' });
      expect(afterTool.json.choices[0].message.content).to.equal('Mock reply using the tool result: Sunny, 21');
      const parts = await post(upstream, '/chat/completions', {
        model: 'm',
        messages: [...user, { role: 'tool', tool_call_id: 'c', content: [{ type: 'text', text: 'Cloudy' }] }],
      });
      expect(parts.json.choices[0].message.content).to.equal('Mock reply using the tool result: Cloudy');
      const none = await post(upstream, '/chat/completions', {
        model: 'm',
        messages: user,
        tools: [chatTool('weather')],
        tool_choice: 'none',
      });
      expect(none.json.choices[0].message.content).to.equal('Mock reply to: Weather in Paris?');
      const named = await post(upstream, '/chat/completions', {
        model: 'm',
        messages: user,
        tools: [chatTool('weather'), chatTool('other')],
        tool_choice: { type: 'function', function: { name: 'other' } },
      });
      expect(named.json.choices[0].message.tool_calls[0].function.name).to.equal('other');
      const required = await post(upstream, '/chat/completions', {
        model: 'm',
        messages: [...user, { role: 'tool', tool_call_id: 'c', content: 'x' }],
        tools: [chatTool('weather')],
        tool_choice: 'required',
      });
      expect(required.json.choices[0].finish_reason).to.equal('tool_calls');
    });

    it('answers a legacy function_call for `functions` (JSON and streamed), and text after a `function` message', async () => {
      const functions = [{ name: 'weather', parameters: weatherParameters }];
      const { json } = await post(upstream, '/chat/completions', { model: 'm', messages: user, functions });
      expect(json.choices[0]).to.deep.include({ finish_reason: 'function_call' });
      expect(json.choices[0].message).to.deep.include({
        content: null,
        function_call: { name: 'weather', arguments: JSON.stringify(WEATHER_ARGS) },
      });
      expect(json.choices[0].message).not.to.have.property('tool_calls');
      const { events } = await post(upstream, '/chat/completions', {
        model: 'm',
        messages: user,
        functions,
        stream: true,
      });
      const deltas = events.slice(0, -1).map((event) => event.data.choices[0].delta);
      expect(deltas[0].function_call).to.deep.equal({ name: 'weather', arguments: '' });
      expect(JSON.parse(deltas.map((delta) => delta.function_call?.arguments ?? '').join(''))).to.deep.equal(
        WEATHER_ARGS,
      );
      expect(events.at(-2)!.data.choices[0].finish_reason).to.equal('function_call');
      const none = await post(upstream, '/chat/completions', {
        model: 'm',
        messages: user,
        functions,
        function_call: 'none',
      });
      expect(none.json.choices[0].finish_reason).to.equal('stop');
      const afterCall = await post(upstream, '/chat/completions', {
        model: 'm',
        messages: [
          ...user,
          { role: 'assistant', content: null, function_call: { name: 'weather', arguments: '{}' } },
          { role: 'function', name: 'weather', content: 'Fog' },
        ],
        functions,
      });
      expect(afterCall.json.choices[0].message.content).to.equal('Mock reply using the tool result: Fog');
    });

    it('never calls the search-grounding tool, which the upstream runs itself', async () => {
      const { json } = await post(upstream, '/chat/completions', {
        model: 'm',
        messages: user,
        tools: [{ type: 'function', function: { name: 'googleSearch' } }],
      });
      expect(json.choices[0].message.content).to.equal('Mock reply to: Weather in Paris?');
    });

    it('answers JSON for a json_schema response_format (JSON and streamed in pieces), and {} for json_object', async () => {
      const response_format = {
        type: 'json_schema',
        json_schema: { name: 'weather', strict: true, schema: weatherParameters },
      };
      const { json } = await post(upstream, '/chat/completions', { model: 'm', messages: user, response_format });
      expect(JSON.parse(json.choices[0].message.content)).to.deep.equal(WEATHER_ARGS);
      const { events } = await post(upstream, '/chat/completions', {
        model: 'm',
        messages: user,
        response_format,
        stream: true,
      });
      const pieces = events.slice(0, -1).map((event) => event.data.choices[0].delta.content ?? '');
      expect(pieces.filter(Boolean).length).to.be.greaterThan(1);
      expect(JSON.parse(pieces.join(''))).to.deep.equal(WEATHER_ARGS);
      const object = await post(upstream, '/chat/completions', {
        model: 'm',
        messages: user,
        response_format: { type: 'json_object' },
      });
      expect(object.json.choices[0].message.content).to.equal('{}');
    });
  });

  describe('Responses', () => {
    it('answers a function_call item (fc_ id, call_ call_id, arguments) when function tools are offered', async () => {
      const { json } = await post(upstream, '/responses', {
        model: 'm',
        input: 'Weather?',
        tools: [{ type: 'web_search' }, responsesTool('weather')],
      });
      expect(json.output).to.have.length(1);
      const item = json.output[0];
      expect(item).to.deep.include({
        type: 'function_call',
        name: 'weather',
        arguments: JSON.stringify(WEATHER_ARGS),
        status: 'completed',
      });
      expect(item.id).to.match(/^fc_/);
      expect(item.call_id).to.match(/^call_[A-Za-z0-9]{24}$/);
      expect(json.usage.output_tokens).to.equal(upstream.requests[0]!.reportedUsage!.outputTokens);
    });

    it('streams a function call: item added, argument deltas, arguments done, item done, completed with usage', async () => {
      const { events } = await post(upstream, '/responses', {
        model: 'm',
        input: 'Weather?',
        tools: [responsesTool('weather')],
        stream: true,
      });
      const deltas = events.filter((event) => event.event === 'response.function_call_arguments.delta');
      expect(deltas.length).to.be.greaterThan(1);
      expect(events.map((event) => event.event)).to.deep.equal([
        'response.created',
        'response.in_progress',
        'response.output_item.added',
        ...deltas.map(() => 'response.function_call_arguments.delta'),
        'response.function_call_arguments.done',
        'response.output_item.done',
        'response.completed',
      ]);
      expect(events.map((event) => event.data.sequence_number)).to.deep.equal(events.map((_, index) => index));
      expect(events[2]!.data.item).to.deep.include({ type: 'function_call', arguments: '', status: 'in_progress' });
      expect(JSON.parse(deltas.map((event) => event.data.delta).join(''))).to.deep.equal(WEATHER_ARGS);
      expect(events.at(-1)!.data.response.usage.output_tokens).to.be.greaterThan(0);
      const final = await openai.responses
        .stream({ model: 'm', input: 'x', tools: [responsesTool('weather') as OpenAI.Responses.FunctionTool] })
        .finalResponse();
      expect(final.output[0]).to.deep.include({ type: 'function_call', arguments: JSON.stringify(WEATHER_ARGS) });
    });

    it('answers with a function_call_output, and never calls built-in tools', async () => {
      const input = [
        { role: 'user', content: 'Weather?' },
        { type: 'function_call', call_id: 'call_1', name: 'weather', arguments: '{}' },
        { type: 'function_call_output', call_id: 'call_1', output: 'Rain' },
      ];
      const { json } = await post(upstream, '/responses', { model: 'm', input, tools: [responsesTool('weather')] });
      expect(json.output[0].content[0].text).to.equal('Mock reply using the tool result: Rain');
      const builtIn = await post(upstream, '/responses', {
        model: 'm',
        input: 'Weather?',
        tools: [{ type: 'web_search' }],
      });
      expect(builtIn.json.output[0].content[0].text).to.equal('Mock reply to: Weather?');
    });

    it('answers JSON for text.format json_schema', async () => {
      const { json } = await post(upstream, '/responses', {
        model: 'm',
        input: 'Weather?',
        text: { format: { type: 'json_schema', name: 'weather', schema: weatherParameters, strict: true } },
      });
      expect(JSON.parse(json.output[0].content[0].text)).to.deep.equal(WEATHER_ARGS);
    });
  });

  describe('Messages', () => {
    it('answers a tool_use block (toolu_01 id, input for the schema, stop_reason tool_use) for client tools only', async () => {
      const { json } = await post(upstream, '/messages', {
        model: 'm',
        max_tokens: 100,
        messages: user,
        tools: [{ type: 'web_search_20250305', name: 'web_search' }, messagesTool('weather')],
      });
      expect(json.stop_reason).to.equal('tool_use');
      expect(json.content).to.have.length(1);
      expect(json.content[0]).to.deep.include({ type: 'tool_use', name: 'weather', input: WEATHER_ARGS });
      expect(json.content[0].id).to.match(/^toolu_01[A-Za-z0-9]{22}$/);
      const serverOnly = await post(upstream, '/messages', {
        model: 'm',
        max_tokens: 100,
        messages: user,
        tools: [{ type: 'web_search_20250305', name: 'web_search' }],
      });
      expect(serverOnly.json.stop_reason).to.equal('end_turn');
    });

    it('streams a tool_use block as input_json_delta pieces, and the SDK assembles the input', async () => {
      const { events } = await post(upstream, '/messages', {
        model: 'm',
        max_tokens: 100,
        messages: user,
        tools: [messagesTool('weather')],
        stream: true,
      });
      expect(events[1]!.data.content_block).to.deep.include({ type: 'tool_use', name: 'weather', input: {} });
      const pieces = events.filter((event) => event.event === 'content_block_delta').map((event) => event.data.delta);
      expect(pieces.every((delta) => delta.type === 'input_json_delta')).to.equal(true);
      expect(pieces[0].partial_json).to.equal('');
      expect(pieces.length).to.be.greaterThan(2);
      expect(JSON.parse(pieces.map((delta) => delta.partial_json).join(''))).to.deep.equal(WEATHER_ARGS);
      expect(events.filter((event) => event.event === 'message_delta').at(-1)!.data.delta.stop_reason).to.equal(
        'tool_use',
      );
      const final = await anthropic.messages
        .stream({
          model: 'm',
          max_tokens: 100,
          messages: [{ role: 'user', content: 'x' }],
          tools: [messagesTool('weather') as Anthropic.Tool],
        })
        .finalMessage();
      expect(final.content[0]).to.deep.include({ type: 'tool_use', input: WEATHER_ARGS });
      expect(final.usage.output_tokens).to.equal(upstream.requests.at(-1)!.reportedUsage!.outputTokens);
    });

    it('answers with tool_result blocks, and follows tool_choice', async () => {
      const messages = [
        ...user,
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'weather', input: {} }] },
        {
          role: 'user',
          content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'text', text: 'Snow' }] }],
        },
      ];
      const afterTool = await post(upstream, '/messages', {
        model: 'm',
        max_tokens: 100,
        messages,
        tools: [messagesTool('weather')],
      });
      expect(afterTool.json.content[0].text).to.equal('Mock reply using the tool result: Snow');
      const none = await post(upstream, '/messages', {
        model: 'm',
        max_tokens: 100,
        messages: user,
        tools: [messagesTool('weather')],
        tool_choice: { type: 'none' },
      });
      expect(none.json.stop_reason).to.equal('end_turn');
      const forced = await post(upstream, '/messages', {
        model: 'm',
        max_tokens: 100,
        messages: user,
        tools: [messagesTool('weather'), messagesTool('other')],
        tool_choice: { type: 'tool', name: 'other' },
      });
      expect(forced.json.content[0].name).to.equal('other');
      const any = await post(upstream, '/messages', {
        model: 'm',
        max_tokens: 100,
        messages,
        tools: [messagesTool('weather')],
        tool_choice: { type: 'any' },
      });
      expect(any.json.stop_reason).to.equal('tool_use');
    });

    it('answers JSON for output_config.format and the older output_format', async () => {
      for (const field of [
        { output_config: { format: { type: 'json_schema', schema: weatherParameters } } },
        { output_format: { type: 'json_schema', schema: weatherParameters } },
      ]) {
        const { json } = await post(upstream, '/messages', { model: 'm', max_tokens: 100, messages: user, ...field });
        expect(JSON.parse(json.content[0].text)).to.deep.equal(WEATHER_ARGS);
      }
    });
  });
});
