import Anthropic from '@anthropic-ai/sdk';
import { betaZodTool } from '@anthropic-ai/sdk/helpers/beta/zod';
import { zodOutputFormat } from '@anthropic-ai/sdk/helpers/zod';
import { expect } from 'chai';
import OpenAI from 'openai';
import { zodFunction, zodResponseFormat, zodResponsesFunction, zodTextFormat } from 'openai/helpers/zod';
import type { ParsedResponseFunctionToolCall } from 'openai/resources/responses/responses';
import { z } from 'zod';
import { startTestGateway, TEST_KEY, type TestGateway } from '../helpers/test-gateway.ts';

const weatherInput = z.object({ city: z.string().describe('City name') });
const weatherCalls: unknown[] = [];
const runWeather = (input: { city: string }) => {
  weatherCalls.push(input);
  return `21 degrees and sunny in ${input.city}`;
};
const FINAL = 'Mock reply using the tool result: 21 degrees and sunny in mock';

const forecast = z.object({
  city: z.string(),
  days: z.number().int(),
  unit: z.enum(['celsius', 'fahrenheit']),
  tags: z.array(z.string()),
  windy: z.boolean(),
});
const expectedForecast = { city: 'mock', days: 1, unit: 'celsius', tags: ['mock'], windy: true };

describe("end to end: the official SDKs' helpers against the running gateway", function () {
  this.timeout(30_000);
  let test: TestGateway;
  let openai: OpenAI;
  let anthropic: Anthropic;

  before(async () => {
    test = await startTestGateway();
    openai = new OpenAI({ baseURL: `${test.url}/v1`, apiKey: TEST_KEY, maxRetries: 0 });
    anthropic = new Anthropic({ baseURL: test.url, apiKey: TEST_KEY, maxRetries: 0 });
  });
  after(async () => test.close());
  beforeEach(() => {
    Object.values(test.upstreams).forEach((upstream) => upstream.reset());
    weatherCalls.length = 0;
  });

  describe('openai chat.completions', () => {
    const model = 'delta/delta-4.5';
    const tools = [
      zodFunction({
        name: 'weather',
        description: 'The current weather in a city',
        parameters: weatherInput,
        function: runWeather,
      }),
    ];

    for (const stream of [false, true]) {
      it(`runTools runs a tool-calling round trip${stream ? ' (stream: true)' : ''}, sending the tool-call turn back with content null`, async () => {
        const body = { model, messages: [{ role: 'user' as const, content: 'What is the weather in Paris?' }], tools };
        const runner = stream
          ? openai.chat.completions.runTools({ ...body, stream: true })
          : openai.chat.completions.runTools(body);
        expect(await runner.finalContent()).to.equal(FINAL);
        expect(weatherCalls).to.deep.equal([{ city: 'mock' }]);
        const requests = test.upstreams.delta.requests;
        expect(requests.map((request) => [request.status, request.stream])).to.deep.equal([
          [200, stream],
          [200, stream],
        ]);
        const [assistant, toolTurn] = requests[1]!.body.messages.slice(-2);
        expect(assistant).to.deep.include({ role: 'assistant', content: null });
        expect(toolTurn).to.deep.include({
          role: 'tool',
          tool_call_id: assistant.tool_calls[0].id,
          content: '21 degrees and sunny in mock',
        });
      });
    }

    it('a hand-written loop with create sends the assistant message as received (content null) and gets the answer', async () => {
      const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Weather in Rome?' }];
      const first = await openai.chat.completions.create({
        model,
        messages,
        tools: [
          {
            type: 'function',
            function: {
              name: 'weather',
              parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
            },
          },
        ],
      });
      const message = first.choices[0]!.message;
      expect(first.choices[0]!.finish_reason).to.equal('tool_calls');
      expect(message.content).to.equal(null);
      const call = message.tool_calls![0] as OpenAI.ChatCompletionMessageFunctionToolCall;
      expect(call.id).to.match(/^call_[A-Za-z0-9]{24}$/);
      messages.push(message, {
        role: 'tool',
        tool_call_id: call.id,
        content: runWeather(JSON.parse(call.function.arguments)),
      });
      const second = await openai.chat.completions.create({ model, messages });
      expect(second.choices[0]!.message.content).to.equal(FINAL);
    });

    it('a hand-written loop with the legacy functions sends the function_call turn back with content null and gets the answer', async () => {
      const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Weather in Lima?' }];
      const functions = [
        {
          name: 'weather',
          parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
        },
      ];
      const first = await openai.chat.completions.create({ model, messages, functions });
      const message = first.choices[0]!.message;
      expect(first.choices[0]!.finish_reason).to.equal('function_call');
      expect(message).to.deep.include({
        content: null,
        function_call: { name: 'weather', arguments: '{"city":"mock"}' },
      });
      messages.push(message, {
        role: 'function',
        name: 'weather',
        content: runWeather(JSON.parse(message.function_call!.arguments)),
      });
      const second = await openai.chat.completions.create({ model, messages, functions });
      expect(second.choices[0]!.message.content).to.equal(FINAL);
      expect(test.upstreams.delta.requests[1]!.body.messages[1]).to.deep.include({ role: 'assistant', content: null });
    });

    it('stream() streams text', async () => {
      const stream = openai.chat.completions.stream({ model, messages: [{ role: 'user', content: 'Stream helper' }] });
      const deltas: string[] = [];
      stream.on('content.delta', ({ delta }) => deltas.push(delta));
      expect(await stream.finalContent()).to.equal('Mock reply to: Stream helper');
      expect(deltas.length).to.be.greaterThan(1);
      expect((await stream.finalChatCompletion()).usage?.completion_tokens).to.equal(
        test.upstreams.delta.requests[0]!.reportedUsage!.outputTokens,
      );
    });

    it('stream() assembles a streamed tool call', async () => {
      const stream = openai.chat.completions.stream({
        model,
        messages: [{ role: 'user', content: 'Weather?' }],
        tools,
      });
      const argumentDeltas: string[] = [];
      stream.on('tool_calls.function.arguments.delta', ({ arguments_delta }) => argumentDeltas.push(arguments_delta));
      const final = await stream.finalChatCompletion();
      expect(final.choices[0]!.finish_reason).to.equal('tool_calls');
      expect(final.choices[0]!.message.tool_calls![0]).to.deep.include({
        type: 'function',
        function: { name: 'weather', arguments: '{"city":"mock"}', parsed_arguments: { city: 'mock' } },
      });
      expect(argumentDeltas.length).to.be.greaterThan(1);
    });

    it('stream() and parse() answer structured output (zodResponseFormat)', async () => {
      const response_format = zodResponseFormat(forecast, 'forecast');
      const stream = openai.chat.completions.stream({
        model,
        messages: [{ role: 'user', content: 'Forecast?' }],
        response_format,
      });
      expect((await stream.finalChatCompletion()).choices[0]!.message.parsed).to.deep.equal(expectedForecast);
      const parsed = await openai.chat.completions.parse({
        model,
        messages: [{ role: 'user', content: 'Forecast?' }],
        response_format,
      });
      expect(parsed.choices[0]!.message.parsed).to.deep.equal(expectedForecast);
      expect(test.upstreams.delta.requests[1]!.body.response_format).to.deep.include({ type: 'json_schema' });
    });
  });

  describe('openai responses', () => {
    const model = 'alpha/gen-6-astra';

    it('stream() streams text', async () => {
      const stream = openai.responses.stream({ model, input: 'Responses stream helper' });
      const deltas: string[] = [];
      stream.on('response.output_text.delta', ({ delta }) => deltas.push(delta));
      const final = await stream.finalResponse();
      expect(final.output_text).to.equal('Mock reply to: Responses stream helper');
      expect(deltas.length).to.be.greaterThan(1);
      expect(final.usage?.output_tokens).to.equal(test.upstreams.alpha.requests[0]!.reportedUsage!.outputTokens);
    });

    for (const stream of [false, true]) {
      it(`runs a tool-calling round trip with ${stream ? 'stream()' : 'create()'}`, async () => {
        const tools = [
          zodResponsesFunction({
            name: 'weather',
            description: 'The current weather in a city',
            parameters: weatherInput,
          }),
        ];
        const input: OpenAI.Responses.ResponseInput = [{ role: 'user', content: 'What is the weather in Paris?' }];
        const ask = () =>
          stream
            ? openai.responses.stream({ model, input, tools }).finalResponse()
            : openai.responses.parse({ model, input, tools });
        const first = await ask();
        const call = first.output[0] as ParsedResponseFunctionToolCall;
        expect(call).to.deep.include({
          type: 'function_call',
          name: 'weather',
          arguments: '{"city":"mock"}',
          parsed_arguments: { city: 'mock' },
        });
        expect(call.call_id).to.match(/^call_[A-Za-z0-9]{24}$/);
        input.push(call, {
          type: 'function_call_output',
          call_id: call.call_id,
          output: runWeather(call.parsed_arguments as { city: string }),
        });
        const second = await ask();
        expect(second.output_text).to.equal(FINAL);
        expect(test.upstreams.alpha.requests.map((request) => [request.status, request.stream])).to.deep.equal([
          [200, stream],
          [200, stream],
        ]);
      });
    }

    it('stream() and parse() answer structured output (zodTextFormat)', async () => {
      const text = { format: zodTextFormat(forecast, 'forecast') };
      expect(
        (await openai.responses.stream({ model, input: 'Forecast?', text }).finalResponse()).output_parsed,
      ).to.deep.equal(expectedForecast);
      expect((await openai.responses.parse({ model, input: 'Forecast?', text })).output_parsed).to.deep.equal(
        expectedForecast,
      );
      expect(test.upstreams.alpha.requests[0]!.body.text.format).to.deep.include({
        type: 'json_schema',
        name: 'forecast',
      });
    });
  });

  describe('@anthropic-ai/sdk messages', () => {
    const model = 'beta-latest';
    const weatherTool = {
      name: 'weather',
      description: 'The current weather in a city',
      input_schema: { type: 'object' as const, properties: { city: { type: 'string' } }, required: ['city'] },
    };

    it('stream().finalMessage() assembles a streamed tool call, and a round trip answers with the result', async () => {
      const messages: Anthropic.MessageParam[] = [{ role: 'user', content: 'What is the weather in Paris?' }];
      const stream = anthropic.messages.stream({ model, max_tokens: 256, messages, tools: [weatherTool] });
      const partials: string[] = [];
      stream.on('inputJson', (partial) => partials.push(partial));
      const first = await stream.finalMessage();
      expect(first.stop_reason).to.equal('tool_use');
      const use = first.content[0] as Anthropic.ToolUseBlock;
      expect(use).to.deep.include({ type: 'tool_use', name: 'weather', input: { city: 'mock' } });
      expect(use.id).to.match(/^toolu_01[A-Za-z0-9]{22}$/);
      expect(partials.length).to.be.greaterThan(1);
      messages.push(
        { role: 'assistant', content: first.content },
        {
          role: 'user',
          content: [{ type: 'tool_result', tool_use_id: use.id, content: runWeather(use.input as { city: string }) }],
        },
      );
      const second = await anthropic.messages
        .stream({ model, max_tokens: 256, messages, tools: [weatherTool] })
        .finalMessage();
      expect(second.stop_reason).to.equal('end_turn');
      expect(second.content[0]).to.deep.include({ type: 'text', text: FINAL });
    });

    for (const stream of [false, true]) {
      it(`the tool runner (beta.messages.toolRunner${stream ? ', stream: true' : ''}) runs a round trip to the final answer`, async () => {
        const weather = betaZodTool({
          name: 'weather',
          description: 'The current weather in a city',
          inputSchema: weatherInput,
          run: runWeather,
        });
        const runner = anthropic.beta.messages.toolRunner({
          model,
          max_tokens: 256,
          messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
          tools: [weather],
          stream,
        });
        const final = await runner.runUntilDone();
        expect(final.content[0]).to.deep.include({ type: 'text', text: FINAL });
        expect(weatherCalls).to.deep.equal([{ city: 'mock' }]);
        const requests = test.upstreams.beta.requests;
        expect(requests.map((request) => [request.status, request.stream])).to.deep.equal([
          [200, stream],
          [200, stream],
        ]);
        // This runner continues a server-held thread: the second request carries only the tool result.
        const results = requests[1]!.body.messages.at(-1);
        expect(results.content[0]).to.deep.include({ type: 'tool_result', content: '21 degrees and sunny in mock' });
        expect(results.content[0].tool_use_id).to.match(/^toolu_01[A-Za-z0-9]{22}$/);
      });
    }

    it('parse() and stream() answer structured output (output_config.format)', async () => {
      const output_config = { format: zodOutputFormat(forecast) };
      const parsed = await anthropic.messages.parse({
        model,
        max_tokens: 256,
        messages: [{ role: 'user', content: 'Forecast?' }],
        output_config,
      });
      expect(parsed.parsed_output).to.deep.equal(expectedForecast);
      const streamed = await anthropic.messages
        .stream({ model, max_tokens: 256, messages: [{ role: 'user', content: 'Forecast?' }], output_config })
        .finalMessage();
      expect(streamed.parsed_output).to.deep.equal(expectedForecast);
      expect(test.upstreams.beta.requests[0]!.body.output_config.format).to.deep.include({ type: 'json_schema' });
    });

    it('a forced tool answers JSON for its schema (tool-forced structured output)', async () => {
      const message = await anthropic.messages.create({
        model,
        max_tokens: 256,
        messages: [{ role: 'user', content: 'Forecast?' }],
        tools: [
          {
            name: 'forecast',
            description: 'Report a forecast',
            input_schema: z.toJSONSchema(forecast) as Anthropic.Tool.InputSchema,
          },
          weatherTool,
        ],
        tool_choice: { type: 'tool', name: 'forecast' },
      });
      expect(message.content[0]).to.deep.include({ type: 'tool_use', name: 'forecast', input: expectedForecast });
    });
  });
});
