import { ChatAnthropic } from '@langchain/anthropic';
import type { BaseChatModel } from '@langchain/core/language_models/chat_models';
import { AIMessageChunk, HumanMessage, type AIMessage, type BaseMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';
import { ChatOpenAI } from '@langchain/openai';
import { expect } from 'chai';
import { z } from 'zod';
import { startTestGateway, TEST_KEY, UPSTREAM_KEY, type TestGateway } from '../helpers/test-gateway.ts';

type Vendor = keyof TestGateway['upstreams'];

// Each model configured as its own docs say: ChatOpenAI with `configuration.baseURL`, ChatAnthropic
// with `anthropicApiUrl` (its client sends the key as x-api-key).
const clients: {
  name: string;
  vendor: Vendor;
  path: string;
  model: (test: TestGateway) => ChatOpenAI | ChatAnthropic;
  methods: ('jsonSchema' | 'functionCalling')[];
}[] = [
  {
    name: '@langchain/openai ChatOpenAI',
    vendor: 'epsilon',
    path: '/v1/chat/completions',
    model: (test) =>
      new ChatOpenAI({
        model: 'epsilon/epsilon-5.2',
        apiKey: TEST_KEY,
        configuration: { baseURL: `${test.url}/v1` },
        maxRetries: 0,
      }),
    methods: ['jsonSchema', 'functionCalling'],
  },
  {
    name: '@langchain/openai ChatOpenAI with useResponsesApi',
    vendor: 'alpha',
    path: '/v1/responses',
    model: (test) =>
      new ChatOpenAI({
        model: 'gen-6-astra',
        apiKey: TEST_KEY,
        configuration: { baseURL: `${test.url}/v1` },
        useResponsesApi: true,
        maxRetries: 0,
      }),
    methods: ['jsonSchema', 'functionCalling'],
  },
  {
    name: '@langchain/anthropic ChatAnthropic',
    vendor: 'beta',
    path: '/v1/messages',
    model: (test) =>
      new ChatAnthropic({ model: 'beta-latest', apiKey: TEST_KEY, anthropicApiUrl: test.url, maxRetries: 0 }),
    methods: ['jsonSchema', 'functionCalling'],
  },
];

const weatherCalls: unknown[] = [];
const weather = tool(
  async (input: { city: string }) => {
    weatherCalls.push(input);
    return `21 degrees and sunny in ${input.city}`;
  },
  {
    name: 'weather',
    description: 'The current weather in a city',
    schema: z.object({ city: z.string().describe('City name') }),
  },
);

// No enum: ChatAnthropic's jsonSchema method moves `enum` into the property's description, which a
// model reads but the mock does not.
const forecast = z.object({ city: z.string(), days: z.number().int(), tags: z.array(z.string()), windy: z.boolean() });
const expectedForecast = { city: 'mock', days: 1, tags: ['mock'], windy: true };

/** The text of a LangChain message, whether its content is a string or content blocks. */
const textOf = (message: BaseMessage) =>
  typeof message.content === 'string'
    ? message.content
    : message.content.map((block) => ('text' in block && typeof block.text === 'string' ? block.text : '')).join('');

async function streamed(
  model: { stream(input: BaseMessage[]): Promise<AsyncIterable<AIMessageChunk>> },
  messages: BaseMessage[],
): Promise<{ message: AIMessageChunk; chunks: number }> {
  let message: AIMessageChunk | undefined;
  let chunks = 0;
  for await (const chunk of await model.stream(messages)) {
    message = message ? message.concat(chunk) : chunk;
    chunks += 1;
  }
  return { message: message!, chunks };
}

describe('end to end: LangChain JS chat models against the running gateway', function () {
  this.timeout(30_000);
  let test: TestGateway;

  before(async () => (test = await startTestGateway()));
  after(async () => test.close());
  beforeEach(() => {
    Object.values(test.upstreams).forEach((upstream) => upstream.reset());
    weatherCalls.length = 0;
  });

  for (const client of clients) {
    describe(client.name, () => {
      const upstream = () => test.upstreams[client.vendor];

      it('invokes', async () => {
        const answer = await client.model(test).invoke('Hello from LangChain');
        expect(textOf(answer)).to.equal('Mock reply to: Hello from LangChain');
        expect(upstream().requests.map((request) => [request.path, request.status])).to.deep.equal([
          [client.path, 200],
        ]);
        expect(answer.usage_metadata?.output_tokens).to.equal(upstream().requests[0]!.reportedUsage!.outputTokens);
      });

      it('streams', async () => {
        const { message, chunks } = await streamed(client.model(test), [new HumanMessage('Stream from LangChain')]);
        expect(textOf(message)).to.equal('Mock reply to: Stream from LangChain');
        expect(chunks).to.be.greaterThan(2);
        expect(upstream().requests[0]!.stream).to.equal(true);
        // Input only: ChatAnthropic adds up the cumulative output counts of the mock's two message_delta events.
        expect(message.usage_metadata?.input_tokens).to.equal(upstream().requests[0]!.reportedUsage!.inputTokens);
      });

      for (const mode of ['invoke', 'stream'] as const) {
        it(`runs a tool-calling round trip (${mode})`, async () => {
          const model = client.model(test).bindTools([weather]);
          const messages: BaseMessage[] = [new HumanMessage('What is the weather in Paris?')];
          const ask = async (): Promise<AIMessage> =>
            mode === 'invoke' ? model.invoke(messages) : (await streamed(model, messages)).message;
          const call = await ask();
          expect(call.tool_calls).to.have.length(1);
          expect(call.tool_calls![0]).to.deep.include({ name: 'weather', args: { city: 'mock' } });
          messages.push(call, await weather.invoke({ ...call.tool_calls![0]!, type: 'tool_call' }));
          const final = await ask();
          expect(weatherCalls).to.deep.equal([{ city: 'mock' }]);
          expect(textOf(final)).to.equal('Mock reply using the tool result: 21 degrees and sunny in mock');
          expect(upstream().requests.map((request) => request.status)).to.deep.equal([200, 200]);
          expect(JSON.stringify(upstream().requests[1]!.body)).to.contain(call.tool_calls![0]!.id!);
        });
      }

      for (const method of client.methods) {
        it(`answers structured output (withStructuredOutput, ${method})`, async () => {
          const model = (client.model(test) as BaseChatModel).withStructuredOutput(forecast, {
            method,
            name: 'forecast',
          });
          expect(await model.invoke('A forecast, please')).to.deep.equal(expectedForecast);
          const body = upstream().requests[0]!.body;
          if (method === 'functionCalling') expect(JSON.stringify(body.tool_choice)).to.contain('forecast');
          else
            expect(body.response_format ?? body.text?.format ?? body.output_config?.format).to.deep.include({
              type: 'json_schema',
            });
        });
      }
    });
  }

  it('ChatAnthropic sends the gateway key as x-api-key, which the gateway accepts and never forwards', async () => {
    await clients[2]!.model(test).invoke('Who am I?');
    const seen = test.upstreams.beta.requests[0]!;
    expect(seen.status).to.equal(200);
    expect(seen.headers['x-api-key']).to.equal(UPSTREAM_KEY);
    expect(seen.headers.authorization).to.equal(undefined);
  });
});
