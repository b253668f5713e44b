import Anthropic from '@anthropic-ai/sdk';
import { expect } from 'chai';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { request } from 'undici';
import { ScriptedUpstream } from '../helpers/scripted-upstream.ts';
import { startTestGateway, TEST_KEY, type TestGateway } from '../helpers/test-gateway.ts';

const GUARDRAILS = `guardrails:
  - { name: no-codes, use: regex, on: both, action: block, patterns: ['PROJECT-[0-9]{4}'] }
  - { name: no-emails, use: pii, on: both, action: redact, entities: [email] }
`;

/** The code the guardrail blocks, and forms of it a model or a client decodes back to it. */
const CODE = 'PROJECT-1234';
const FULL_WIDTH = 'ＰＲＯＪＥＣＴ－１２３４';
const ZERO_WIDTH = 'PRO\u200bJECT-\u20601234';

const named = (payload: { type: string }) => `event: ${payload.type}\ndata: ${JSON.stringify(payload)}\n\n`;
const completion = { id: 'chatcmpl-1', created: 1, model: 'gen-5.5' };
const usage = { prompt_tokens: 5, completion_tokens: 5, total_tokens: 10 };
const chunkOf = (fields: object) =>
  `data: ${JSON.stringify({ ...completion, object: 'chat.completion.chunk', ...fields })}\n\n`;
const chunk = (delta: object, finish: string | null = null) =>
  chunkOf({ choices: [{ index: 0, delta, finish_reason: finish }] });
const usageChunk = chunkOf({ choices: [], usage });

/** A Chat Completions answer calling a tool with these arguments (JSON text, as the upstream wrote it). */
const toolCallAnswer = (args: string) => {
  const call = `{"id":"call_1","type":"function","function":{"name":"save","arguments":${JSON.stringify(args)}}}`;
  const message = `{"role":"assistant","content":null,"tool_calls":[${call}]}`;
  const choice = `{"index":0,"message":${message},"finish_reason":"tool_calls"}`;
  const head = '"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gen-5.5"';
  return `{${head},"choices":[${choice}],"usage":${JSON.stringify(usage)}}`;
};
const textAnswer = (text: string) =>
  JSON.stringify({
    ...completion,
    object: 'chat.completion',
    choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }],
    usage,
  });

describe('guardrails read what the model reads, decoded as the model and the client decode it', function () {
  this.timeout(60_000);
  let upstream: ScriptedUpstream;
  let test: TestGateway;
  let dir: string;
  let openai: OpenAI;
  let anthropic: Anthropic;
  let next: { kind: 'json'; body: string } | { kind: 'stream'; events: string[] };

  before(async () => {
    upstream = await ScriptedUpstream.start();
    upstream.script = async (_req: IncomingMessage, res: ServerResponse) => {
      if (next.kind === 'json') return res.writeHead(200, { 'content-type': 'application/json' }).end(next.body);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (const event of next.events) {
        res.write(event);
        await new Promise((resolve) => setImmediate(resolve));
      }
      res.end();
    };
    dir = await mkdtemp(join(tmpdir(), 'gateway-guardrail-reach-'));
    const configFile = join(dir, 'gateway.yaml');
    await writeFile(configFile, `logLevel: silent\n${GUARDRAILS}`);
    test = await startTestGateway({ configFile, env: { ALPHA_BASE_URL: upstream.url, BETA_BASE_URL: upstream.url } });
    openai = new OpenAI({ baseURL: `${test.url}/v1`, apiKey: TEST_KEY, maxRetries: 0 });
    anthropic = new Anthropic({ baseURL: test.url, apiKey: TEST_KEY, maxRetries: 0 });
  });
  after(async () => {
    await test?.close();
    await upstream?.close();
    await rm(dir, { recursive: true, force: true });
  });
  beforeEach(() => {
    upstream.requests.length = 0;
    next = { kind: 'json', body: textAnswer('Noted.') };
  });

  /** The SDK call is refused by the guardrail (400 GW_ERR_GUARDRAIL naming it), and nothing went upstream. */
  async function refused(call: Promise<unknown>): Promise<void> {
    const error = await call.then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(error, 'the request was not refused').to.be.instanceOf(Error);
    expect((error as { status?: number }).status).to.equal(400);
    expect((error as Error).message).to.contain("Guardrail 'no-codes' blocked the request");
    expect(upstream.requests).to.have.length(0);
  }

  async function post(path: string, body: object): Promise<{ status: number; text: string }> {
    const response = await request(`${test.url}${path}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${TEST_KEY}`,
        'content-type': 'application/json',
        'anthropic-version': '2023-06-01',
      },
      body: JSON.stringify(body),
    });
    return { status: response.statusCode, text: await response.body.text() };
  }

  describe('every text of a request the model reads, on every route and role', () => {
    const model = 'alpha/gen-5.5';
    const user = { role: 'user' as const, content: 'Go on.' };

    it('Chat Completions: a client-written assistant turn, its tool calls and refusal', async () => {
      await refused(
        openai.chat.completions.create({
          model,
          messages: [user, { role: 'assistant', content: `The code is ${CODE}.` }, user],
        }),
      );
      await refused(
        openai.chat.completions.create({
          model,
          messages: [user, { role: 'assistant', content: [{ type: 'text', text: CODE }] }, user],
        }),
      );
      await refused(
        openai.chat.completions.create({
          model,
          messages: [user, { role: 'assistant', content: null, refusal: CODE }, user],
        }),
      );
      await refused(
        openai.chat.completions.create({
          model,
          messages: [
            user,
            {
              role: 'assistant',
              content: null,
              tool_calls: [{ id: 'c1', type: 'function', function: { name: 'save', arguments: `{"code":"${CODE}"}` } }],
            },
            { role: 'tool', tool_call_id: 'c1', content: 'saved' },
          ],
        }),
      );
    });

    it("Chat Completions: tools' and functions' descriptions and schemas, the structured output's schema", async () => {
      const parameters = { type: 'object', properties: { code: { type: 'string', description: `Like ${CODE}` } } };
      await refused(
        openai.chat.completions.create({
          model,
          messages: [user],
          tools: [{ type: 'function', function: { name: 'save', description: `Saves ${CODE}` } }],
        }),
      );
      await refused(
        openai.chat.completions.create({
          model,
          messages: [user],
          tools: [{ type: 'function', function: { name: 'save', parameters } }],
        }),
      );
      await refused(
        openai.chat.completions.create({
          model,
          messages: [user],
          functions: [{ name: 'save', description: `Saves ${CODE}` }],
        }),
      );
      await refused(
        openai.chat.completions.create({
          model,
          messages: [user],
          response_format: { type: 'json_schema', json_schema: { name: 'out', description: CODE } },
        }),
      );
      await refused(
        openai.chat.completions.create({
          model,
          messages: [user],
          response_format: { type: 'json_schema', json_schema: { name: 'out', schema: parameters } },
        }),
      );
    });

    it('Chat Completions: a participant name, predicted output, and a role spelled in capitals', async () => {
      await refused(openai.chat.completions.create({ model, messages: [{ role: 'user', content: 'Hi', name: CODE }] }));
      await refused(
        openai.chat.completions.create({
          model,
          messages: [user],
          prediction: { type: 'content', content: `let code = "${CODE}";` },
        }),
      );
      await refused(
        openai.chat.completions.create({
          model,
          messages: [user],
          prediction: { type: 'content', content: [{ type: 'text', text: CODE }] },
        }),
      );
      const shouted = await post('/v1/chat/completions', {
        model,
        messages: [{ role: 'SYSTEM', content: `Always say ${CODE}` }, user],
      });
      expect(shouted.status, shouted.text).to.equal(400);
      expect(upstream.requests).to.have.length(0);
    });

    it("Messages, count_tokens: an assistant turn, a tool's description and schema, a text document", async () => {
      const messages = (content: Anthropic.MessageParam['content']): Anthropic.MessageParam[] => [
        { role: 'user', content: 'Hi' },
        { role: 'assistant', content },
        { role: 'user', content: 'Go on.' },
      ];
      const base = { model: 'beta-latest', max_tokens: 32 };
      await refused(anthropic.messages.create({ ...base, messages: messages(`Your code is ${CODE}.`) }));
      await refused(
        anthropic.messages.create({
          ...base,
          messages: messages([{ type: 'tool_use', id: 't1', name: 'save', input: { code: CODE } }]),
        }),
      );
      await refused(
        anthropic.messages.countTokens({ model: 'beta-latest', messages: messages(`Your code is ${CODE}.`) }),
      );
      await refused(
        anthropic.messages.create({
          ...base,
          messages: [user],
          tools: [{ name: 'save', description: `Saves ${CODE}`, input_schema: { type: 'object' } }],
        }),
      );
      await refused(
        anthropic.messages.create({
          ...base,
          messages: [user],
          tools: [
            {
              name: 'save',
              input_schema: { type: 'object', properties: { code: { type: 'string', description: CODE } } },
            },
          ],
        }),
      );
      await refused(
        anthropic.messages.create({
          ...base,
          messages: [
            {
              role: 'user',
              content: [
                {
                  type: 'document',
                  source: { type: 'text', media_type: 'text/plain', data: `Minutes: ${CODE} is late.` },
                },
                { type: 'text', text: 'Summarise.' },
              ],
            },
          ],
        }),
      );
    });

    it('Responses: an assistant message, function call arguments, prompt variables, tools, output schema', async () => {
      await refused(
        openai.responses.create({
          model,
          input: [
            { role: 'user', content: 'Hi' },
            { type: 'message', role: 'assistant', content: `Your code is ${CODE}` },
          ],
        }),
      );
      await refused(
        openai.responses.create({
          model,
          input: [
            { type: 'function_call', call_id: 'c1', name: 'save', arguments: `{"code":"${CODE}"}` },
            { type: 'function_call_output', call_id: 'c1', output: 'saved' },
          ],
        }),
      );
      await refused(
        openai.responses.create({ model, input: 'Hi', prompt: { id: 'pmpt_1', variables: { project: CODE } } }),
      );
      await refused(
        openai.responses.create({
          model,
          input: 'Hi',
          tools: [{ type: 'function', name: 'save', description: `Saves ${CODE}`, parameters: null, strict: false }],
        }),
      );
      await refused(
        openai.responses.create({
          model,
          input: 'Hi',
          text: { format: { type: 'json_schema', name: 'out', schema: { type: 'object', description: CODE } } },
        }),
      );
    });

    it("redacts what it finds in a tool's schema in place: every other byte reaches the upstream as sent", async () => {
      const property = '{"type":"string","description":"e.g. ada@example.com","maxLength": 1.0e2}';
      const schema = `{"type":"object","properties":{"to":${property}}}`;
      const tool = `{"type":"function","function":{"name":"mail","parameters":${schema}}}`;
      const sent = `{"model":"alpha/gen-5.5","messages":[{"role":"user","content":"Hi"}],"tools":[${tool}]}`;
      const answer = await request(`${test.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' },
        body: sent,
      });
      expect(answer.statusCode, await answer.body.text()).to.equal(200);
      expect(upstream.requests[0]!.body).to.equal(
        sent.replace('"alpha/gen-5.5"', '"gen-5.5"').replace('ada@example.com', '[EMAIL]'),
      );
    });
  });

  describe('tool-call arguments, matched as the client decodes them (JSON escapes undone)', () => {
    const escaped = 'PROJECT\\u002d1234';

    it('Chat Completions: refuses a JSON answer whose arguments hold the code escaped', async () => {
      next = { kind: 'json', body: toolCallAnswer(`{"code":"${escaped}"}`) };
      const error = await openai.chat.completions
        .create({ model: 'alpha/gen-5.5', messages: [{ role: 'user', content: 'Save it.' }] })
        .then(
          () => undefined,
          (caught: unknown) => caught,
        );
      expect((error as { status?: number } | undefined)?.status).to.equal(400);
      expect((error as Error).message).to.contain("Guardrail 'no-codes' blocked the answer");
    });

    it('Chat Completions: ends a stream whose argument deltas spell the code escaped, none of it out', async () => {
      next = {
        kind: 'stream',
        events: [
          chunk({
            role: 'assistant',
            content: null,
            tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'save', arguments: '' } }],
          }),
          chunk({ tool_calls: [{ index: 0, function: { arguments: '{"code":"PROJECT\\u00' } }] }),
          chunk({ tool_calls: [{ index: 0, function: { arguments: '2d1234"}' } }] }),
          chunk({}, 'tool_calls'),
          usageChunk,
          'data: [DONE]\n\n',
        ],
      };
      const answer = await post('/v1/chat/completions', {
        model: 'alpha/gen-5.5',
        messages: [{ role: 'user', content: 'Save it.' }],
        stream: true,
      });
      expect(answer.text).to.contain('GW_ERR_GUARDRAIL');
      expect(answer.text).not.to.contain('PROJECT');
    });

    it('Messages: ends a stream whose partial_json spells the code escaped', async () => {
      next = {
        kind: 'stream',
        events: [
          named({
            type: 'message_start',
            message: {
              id: 'msg_1',
              type: 'message',
              role: 'assistant',
              model: 'beta-fable-5-1',
              content: [],
              stop_reason: null,
              usage: { input_tokens: 5, output_tokens: 1 },
            },
          } as { type: string }),
          named({
            type: 'content_block_start',
            index: 0,
            content_block: { type: 'tool_use', id: 'tu_1', name: 'save', input: {} },
          } as { type: string }),
          named({
            type: 'content_block_delta',
            index: 0,
            delta: { type: 'input_json_delta', partial_json: '{"code": "PROJECT\\u002d12' },
          } as { type: string }),
          named({
            type: 'content_block_delta',
            index: 0,
            delta: { type: 'input_json_delta', partial_json: '34"}' },
          } as { type: string }),
          named({ type: 'content_block_stop', index: 0 } as { type: string }),
          named({ type: 'message_delta', delta: { stop_reason: 'tool_use' }, usage: { output_tokens: 9 } } as {
            type: string;
          }),
          named({ type: 'message_stop' }),
        ],
      };
      const answer = await post('/v1/messages', {
        model: 'beta-latest',
        max_tokens: 32,
        messages: [{ role: 'user', content: 'Save it.' }],
        stream: true,
      });
      expect(answer.text).to.match(/event: error\n/);
      expect(answer.text).not.to.contain('PROJECT');
    });

    it('Responses: ends a stream whose function-call argument deltas spell the code escaped', async () => {
      next = {
        kind: 'stream',
        events: [
          named({
            type: 'response.created',
            response: { id: 'resp_1', object: 'response', status: 'in_progress', output: [] },
          } as { type: string }),
          named({
            type: 'response.output_item.added',
            output_index: 0,
            item: { type: 'function_call', id: 'fc_1', call_id: 'c1', name: 'save', arguments: '' },
          } as { type: string }),
          named({
            type: 'response.function_call_arguments.delta',
            item_id: 'fc_1',
            output_index: 0,
            delta: '{"code":"PROJ',
          } as { type: string }),
          named({
            type: 'response.function_call_arguments.delta',
            item_id: 'fc_1',
            output_index: 0,
            delta: 'ECT\\u002d1234"}',
          } as { type: string }),
          named({
            type: 'response.function_call_arguments.done',
            item_id: 'fc_1',
            output_index: 0,
            arguments: `{"code":"${escaped}"}`,
          } as { type: string }),
          named({
            type: 'response.completed',
            response: {
              id: 'resp_1',
              object: 'response',
              status: 'completed',
              output: [],
              usage: { input_tokens: 5, output_tokens: 5, total_tokens: 10 },
            },
          } as { type: string }),
        ],
      };
      const answer = await post('/v1/responses', { model: 'alpha/gen-5.5', input: 'Save it.', stream: true });
      expect(answer.text).to.match(/event: error\n/);
      expect(answer.text).not.to.contain('PROJ');
    });

    it('refuses a request whose client-written tool call holds the code escaped', async () => {
      await refused(
        openai.chat.completions.create({
          model: 'alpha/gen-5.5',
          messages: [
            { role: 'user', content: 'Hi' },
            {
              role: 'assistant',
              content: null,
              tool_calls: [
                { id: 'c1', type: 'function', function: { name: 'save', arguments: `{"code":"${escaped}"}` } },
              ],
            },
            { role: 'tool', tool_call_id: 'c1', content: 'ok' },
          ],
        }),
      );
    });

    it('redacts an escaped finding in arguments where it stands: they stay JSON the client parses', async () => {
      next = { kind: 'json', body: toolCallAnswer('{"to": "ada\\u0040example.com", "cc": "x"}') };
      const completion = await openai.chat.completions.create({
        model: 'alpha/gen-5.5',
        messages: [{ role: 'user', content: 'Mail it.' }],
      });
      const call = completion.choices[0]!.message.tool_calls![0]! as OpenAI.ChatCompletionMessageFunctionToolCall;
      expect(call.function.arguments).to.equal('{"to": "[EMAIL]", "cc": "x"}');
    });
  });

  describe('text matched NFKC-normalised, invisible characters left out', () => {
    it('refuses the code in full-width forms or with zero-width characters, on every route', async () => {
      for (const code of [FULL_WIDTH, ZERO_WIDTH]) {
        await refused(
          openai.chat.completions.create({
            model: 'alpha/gen-5.5',
            messages: [{ role: 'user', content: `Code ${code}` }],
          }),
        );
        await refused(
          anthropic.messages.create({
            model: 'beta-latest',
            max_tokens: 32,
            messages: [{ role: 'user', content: `Code ${code}` }],
          }),
        );
        await refused(openai.responses.create({ model: 'alpha/gen-5.5', input: `Code ${code}` }));
        const chat = await post('/v1/chat', { model: 'alpha/gen-5.5', input: `Code ${code}` });
        expect(chat.status, chat.text).to.equal(400);
        expect(upstream.requests).to.have.length(0);
      }
    });

    it('refuses answers spelling it so, whole and split across stream events', async () => {
      next = { kind: 'json', body: textAnswer(`Your code is ${ZERO_WIDTH}.`) };
      const answer = await post('/v1/chat/completions', {
        model: 'alpha/gen-5.5',
        messages: [{ role: 'user', content: 'Code?' }],
      });
      expect(answer.status).to.equal(400);
      next = {
        kind: 'stream',
        events: [
          chunk({ role: 'assistant', content: 'Your code is ＰＲＯＪ' }),
          chunk({ content: 'ＥＣＴ－１２' }),
          chunk({ content: '３４.' }),
          chunk({}, 'stop'),
          usageChunk,
          'data: [DONE]\n\n',
        ],
      };
      const stream = await post('/v1/chat/completions', {
        model: 'alpha/gen-5.5',
        messages: [{ role: 'user', content: 'Code?' }],
        stream: true,
      });
      expect(stream.text).to.contain('GW_ERR_GUARDRAIL');
      expect(stream.text).not.to.contain('ＰＲＯＪ');
    });

    it('redacts a full-width e-mail address where it stands, the text around it untouched', async () => {
      const text = 'Write to ａｄａ＠ｅｘａｍｐｌｅ．ｃｏｍ — café ﬁne';
      await openai.chat.completions.create({ model: 'alpha/gen-5.5', messages: [{ role: 'user', content: text }] });
      expect((upstream.lastBody().messages as { content: string }[])[0]!.content).to.equal(
        'Write to [EMAIL] — café ﬁne',
      );
    });
  });
});
