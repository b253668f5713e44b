import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateText, Output, stepCountIs, streamText, tool, type LanguageModel } from 'ai';
import { expect } from 'chai';
import { request } from 'undici';
import { z } from 'zod';
import { startTestGateway, TEST_KEY, UPSTREAM_KEY, type TestGateway } from '../helpers/test-gateway.ts';

type Vendor = keyof TestGateway['upstreams'];

// Each provider configured as its own docs say: base URL with /v1 and the gateway key as `apiKey`.
// `structured` names where each sends a structured-output request's schema.
const clients: {
  name: string;
  vendor: Vendor;
  path: string;
  model: (test: TestGateway) => LanguageModel;
  structured: (body: any) => unknown;
}[] = [
  {
    name: '@ai-sdk/openai chat',
    vendor: 'delta',
    path: '/v1/chat/completions',
    model: (test) => createOpenAI({ baseURL: `${test.url}/v1`, apiKey: TEST_KEY }).chat('delta/delta-4.5'),
    structured: (body) => body.response_format.type === 'json_schema' && body.response_format.json_schema.schema,
  },
  {
    name: '@ai-sdk/openai responses',
    vendor: 'alpha',
    path: '/v1/responses',
    model: (test) => createOpenAI({ baseURL: `${test.url}/v1`, apiKey: TEST_KEY }).responses('alpha/gen-5.5'),
    structured: (body) => body.text.format.type === 'json_schema' && body.text.format.schema,
  },
  {
    // For a model it does not know, the provider asks for JSON through a forced `json` tool.
    name: '@ai-sdk/anthropic',
    vendor: 'beta',
    path: '/v1/messages',
    model: (test) => createAnthropic({ baseURL: `${test.url}/v1`, apiKey: TEST_KEY })('beta-latest'),
    structured: (body) =>
      body.tool_choice.type === 'any' && body.tools[0].name === 'json' && body.tools[0].input_schema,
  },
  {
    name: '@ai-sdk/openai-compatible',
    vendor: 'zeta',
    path: '/v1/chat/completions',
    model: (test) =>
      createOpenAICompatible({
        name: 'gateway',
        baseURL: `${test.url}/v1`,
        apiKey: TEST_KEY,
        includeUsage: true,
        supportsStructuredOutputs: true,
      }).chatModel('zeta/zeta-k3'),
    structured: (body) => body.response_format.type === 'json_schema' && body.response_format.json_schema.schema,
  },
];

/** The one tool of the round trips: the mock calls it with `{"city":"mock"}` (a minimal valid instance). */
function weatherTool(calls: unknown[]) {
  return tool({
    description: 'The current weather in a city',
    inputSchema: z.object({ city: z.string().describe('City name') }),
    execute: async (input) => {
      calls.push(input);
      return `21 degrees and sunny in ${input.city}`;
    },
  });
}

// No numeric bounds: the Anthropic provider drops them from a native structured-output schema.
const forecast = z.object({
  city: z.string(),
  days: z.number().int(),
  unit: z.enum(['celsius', 'fahrenheit']),
  tags: z.array(z.string()),
  windy: z.boolean(),
});
const expectedForecast = { city: 'mock', days: 1, unit: 'celsius', tags: ['mock'], windy: true };

describe('end to end: the Vercel AI SDK providers against the running gateway', function () {
  this.timeout(30_000);
  let test: TestGateway;

  before(async () => {
    test = await startTestGateway();
    // The Anthropic provider warns about the unknown model IDs on every call.
    (globalThis as { AI_SDK_LOG_WARNINGS?: boolean }).AI_SDK_LOG_WARNINGS = false;
  });
  after(async () => {
    delete (globalThis as { AI_SDK_LOG_WARNINGS?: boolean }).AI_SDK_LOG_WARNINGS;
    await test.close();
  });
  beforeEach(() => Object.values(test.upstreams).forEach((upstream) => upstream.reset()));

  for (const client of clients) {
    describe(client.name, () => {
      const upstream = () => test.upstreams[client.vendor];

      it('generates text', async () => {
        const result = await generateText({
          model: client.model(test),
          prompt: 'Hello from the AI SDK',
          maxRetries: 0,
        });
        expect(result.text).to.equal('Mock reply to: Hello from the AI SDK');
        expect(upstream().requests).to.have.length(1);
        expect(upstream().requests[0]!.path).to.equal(client.path);
        expect(result.usage.outputTokens).to.equal(upstream().requests[0]!.reportedUsage!.outputTokens);
      });

      it('streams text', async () => {
        const result = streamText({ model: client.model(test), prompt: 'Stream from the AI SDK', maxRetries: 0 });
        const pieces: string[] = [];
        for await (const piece of result.textStream) pieces.push(piece);
        expect(pieces.join('')).to.equal('Mock reply to: Stream from the AI SDK');
        expect(pieces.length).to.be.greaterThan(1);
        expect(await result.finishReason).to.equal('stop');
        expect(upstream().requests[0]!.stream).to.equal(true);
        expect((await result.usage).outputTokens).to.equal(upstream().requests[0]!.reportedUsage!.outputTokens);
      });

      it('runs a tool-calling round trip with generateText', async () => {
        const calls: unknown[] = [];
        const result = await generateText({
          model: client.model(test),
          prompt: 'What is the weather in Paris?',
          tools: { weather: weatherTool(calls) },
          stopWhen: stepCountIs(3),
          maxRetries: 0,
        });
        expect(calls).to.deep.equal([{ city: 'mock' }]);
        expect(result.steps).to.have.length(2);
        expect(result.steps[0]!.finishReason).to.equal('tool-calls');
        expect(result.steps[0]!.toolCalls[0]).to.deep.include({ toolName: 'weather', input: { city: 'mock' } });
        expect(result.text).to.equal('Mock reply using the tool result: 21 degrees and sunny in mock');
        expect(upstream().requests.map((request) => request.status)).to.deep.equal([200, 200]);
        expect(JSON.stringify(upstream().requests[1]!.body)).to.contain(result.steps[0]!.toolCalls[0]!.toolCallId);
      });

      it('runs a tool-calling round trip with streamText', async () => {
        const calls: unknown[] = [];
        const result = streamText({
          model: client.model(test),
          prompt: 'Weather in Oslo, streamed?',
          tools: { weather: weatherTool(calls) },
          stopWhen: stepCountIs(3),
          maxRetries: 0,
        });
        let text = '';
        for await (const piece of result.textStream) text += piece;
        expect(calls).to.deep.equal([{ city: 'mock' }]);
        expect(text).to.equal('Mock reply using the tool result: 21 degrees and sunny in mock');
        expect((await result.steps).map((step) => step.finishReason)).to.deep.equal(['tool-calls', 'stop']);
        expect(upstream().requests.map((request) => [request.status, request.stream])).to.deep.equal([
          [200, true],
          [200, true],
        ]);
      });

      it('answers structured output that matches the schema', async () => {
        const result = await generateText({
          model: client.model(test),
          prompt: 'A forecast, as JSON',
          output: Output.object({ schema: forecast }),
          maxRetries: 0,
        });
        expect(result.output).to.deep.equal(expectedForecast);
        expect(upstream().requests).to.have.length(1);
        expect(client.structured(upstream().requests[0]!.body)).to.deep.include({
          type: 'object',
          required: ['city', 'days', 'unit', 'tags', 'windy'],
        });
      });

      it('streams structured output', async () => {
        const result = streamText({
          model: client.model(test),
          prompt: 'A forecast, streamed as JSON',
          output: Output.object({ schema: forecast }),
          maxRetries: 0,
        });
        const partials: unknown[] = [];
        for await (const partial of result.partialOutputStream) partials.push(partial);
        expect(await result.output).to.deep.equal(expectedForecast);
        expect(partials.length).to.be.greaterThan(1);
      });
    });
  }

  it('the gateway records each streamed tool-calling round trip with the usage the upstream reported', async () => {
    const totals = async () => {
      await test.gateway.flushUsage();
      const response = await request(`${test.url}/v1/usage`, { headers: { authorization: `Bearer ${TEST_KEY}` } });
      const rows = (
        (await response.body.json()) as { data: { requests: number; input_tokens: number; output_tokens: number }[] }
      ).data;
      return rows.reduce(
        (sum, row) => ({
          requests: sum.requests + row.requests,
          input: sum.input + row.input_tokens,
          output: sum.output + row.output_tokens,
        }),
        { requests: 0, input: 0, output: 0 },
      );
    };
    for (const client of clients) {
      test.upstreams[client.vendor].reset();
      const before = await totals();
      const result = streamText({
        model: client.model(test),
        prompt: 'Weather, counted?',
        tools: { weather: weatherTool([]) },
        stopWhen: stepCountIs(3),
        maxRetries: 0,
      });
      await result.consumeStream();
      const reported = test.upstreams[client.vendor].requests.map((entry) => entry.reportedUsage!);
      expect(reported, client.name).to.have.length(2);
      const after = await totals();
      expect(
        {
          requests: after.requests - before.requests,
          input: after.input - before.input,
          output: after.output - before.output,
        },
        client.name,
      ).to.deep.equal({
        requests: 2,
        input: reported[0]!.inputTokens + reported[1]!.inputTokens,
        output: reported[0]!.outputTokens + reported[1]!.outputTokens,
      });
    }
  });

  it('@ai-sdk/openai chat sends the assistant tool-call turn back with content null, and the gateway forwards it', async () => {
    const model = clients[0]!.model(test);
    await generateText({
      model,
      prompt: 'Weather?',
      tools: { weather: weatherTool([]) },
      stopWhen: stepCountIs(3),
      maxRetries: 0,
    });
    const [assistant, toolTurn] = test.upstreams.delta.requests[1]!.body.messages.slice(-2);
    expect(assistant).to.deep.include({ role: 'assistant', content: null });
    expect(assistant.tool_calls[0]).to.deep.include({
      type: 'function',
      function: { name: 'weather', arguments: '{"city":"mock"}' },
    });
    expect(toolTurn).to.deep.include({ role: 'tool', tool_call_id: assistant.tool_calls[0].id });
  });

  it('@ai-sdk/anthropic answers structured output through output_config.format too', async () => {
    const result = await generateText({
      model: clients[2]!.model(test),
      prompt: 'A forecast, as JSON',
      output: Output.object({ schema: forecast }),
      providerOptions: { anthropic: { structuredOutputMode: 'outputFormat' } },
      maxRetries: 0,
    });
    expect(result.output).to.deep.equal(expectedForecast);
    const body = test.upstreams.beta.requests[0]!.body;
    expect(body.output_config.format).to.deep.include({ type: 'json_schema' });
    expect(body).not.to.have.property('tools');
  });

  it('@ai-sdk/anthropic sends the gateway key as x-api-key, which the gateway accepts and never forwards', async () => {
    await generateText({ model: clients[2]!.model(test), prompt: 'Who am I?', maxRetries: 0 });
    const seen = test.upstreams.beta.requests[0]!;
    expect(seen.status).to.equal(200);
    expect(seen.headers['x-api-key']).to.equal(UPSTREAM_KEY);
    expect(seen.headers.authorization).to.equal(undefined);
  });
});
