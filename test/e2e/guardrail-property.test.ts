import { expect } from 'chai';
import fc from 'fast-check';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { ScriptedUpstream } from '../helpers/scripted-upstream.ts';
import { startTestGateway, TEST_KEY, type TestGateway } from '../helpers/test-gateway.ts';

const GUARDRAILS = `guardrails:
  - { name: no-codes, use: regex, on: request, action: block, patterns: ['PROJECT-[0-9]{4}'] }
  - { name: no-emails, use: pii, on: request, action: redact, entities: [email] }
`;

/** Where a text sits: a string field, a property's name (in a schema, a tool's input), in a call's JSON arguments. */
type HoleKind = 'text' | 'key' | 'arg';

/** The texts a request template is filled with, in order; arguments' strings escaped as `escape` picks. */
class Holes {
  readonly kinds: HoleKind[] = [];
  private next = 0;

  constructor(
    private readonly texts: readonly string[] = [],
    private readonly escape: (char: string) => boolean = () => false,
  ) {}

  private take(kind: HoleKind): string {
    this.kinds.push(kind);
    return this.texts[this.next++] ?? 'x';
  }

  text = (): string => this.take('text');
  key = (): string => this.take('key');
  /** A call's arguments: JSON text with two texts in it, characters escaped (`\uXXXX`) where `escape` says. */
  args = (): string => `{"query": ${this.argument()}, "notes": [${this.argument()}], "n": 1}`;
  private argument = (): string => jsonString(this.take('arg'), this.escape);
  /** A JSON schema whose description, property name and enum value are texts. */
  schema = (): object => {
    const name = this.key();
    return {
      type: 'object',
      description: this.text(),
      properties: { [name]: { type: 'string', description: this.text(), enum: [this.text()] } },
    };
  };
}

/** `text` as a JSON string literal: a character as `\\uXXXX` where `escape` says, else as `JSON.stringify` has it. */
function jsonString(text: string, escape: (char: string) => boolean): string {
  let out = '"';
  for (const char of text) {
    if (escape(char))
      for (let unit = 0; unit < char.length; unit++) out += `\\u${char.charCodeAt(unit).toString(16).padStart(4, '0')}`;
    else out += JSON.stringify(char).slice(1, -1);
  }
  return `${out}"`;
}

/** A JSON value with strings escaped as `escape` picks, spaced as `spaced` says: the bytes a client may send. */
function serialise(value: unknown, escape: (char: string) => boolean, spaced: boolean): string {
  const space = spaced ? ' ' : '';
  if (typeof value === 'string') return jsonString(value, escape);
  if (Array.isArray(value)) return `[${value.map((item) => serialise(item, escape, spaced)).join(`,${space}`)}]`;
  if (typeof value === 'object' && value !== null) {
    // The model is never escaped: the gateway rewrites it (its bytes are compared apart).
    return `{${space}${Object.entries(value)
      .map(([key, item]) =>
        key === 'model'
          ? `"model":${space}${JSON.stringify(item)}`
          : `${jsonString(key, escape)}:${space}${serialise(item, escape, spaced)}`,
      )
      .join(`,${space}`)}${space}}`;
  }
  return JSON.stringify(value);
}

interface Format {
  readonly route: string;
  readonly model: string;
  /** The model's id as the upstream gets it. */
  readonly upstreamModel: string;
  readonly answer: string;
  readonly template: (h: Holes) => Record<string, unknown>;
}

const chatAnswer = JSON.stringify({
  id: 'c',
  object: 'chat.completion',
  created: 1,
  model: 'gen-5.5',
  choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
});
const messagesAnswer = JSON.stringify({
  id: 'msg_1',
  type: 'message',
  role: 'assistant',
  model: 'beta-fable-5-1',
  content: [{ type: 'text', text: 'ok' }],
  stop_reason: 'end_turn',
  usage: { input_tokens: 1, output_tokens: 1 },
});
const responsesAnswer = JSON.stringify({
  id: 'resp_1',
  object: 'response',
  status: 'completed',
  model: 'gen-5.5',
  output: [
    {
      type: 'message',
      id: 'm',
      role: 'assistant',
      status: 'completed',
      content: [{ type: 'output_text', text: 'ok', annotations: [] }],
    },
  ],
  usage: { input_tokens: 1, output_tokens: 1, total_tokens: 2 },
});

const messagesTemplate = (h: Holes, countTokens: boolean) => ({
  model: 'beta-latest',
  ...(countTokens ? {} : { max_tokens: 64 }),
  system: [{ type: 'text', text: h.text() }],
  messages: [
    {
      role: 'user',
      content: [
        { type: 'text', text: h.text() },
        { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } },
        {
          type: 'document',
          title: h.text(),
          context: h.text(),
          source: { type: 'text', media_type: 'text/plain', data: h.text() },
        },
        {
          type: 'search_result',
          source: 'https://example.com/r',
          title: h.text(),
          content: [{ type: 'text', text: h.text() }],
        },
      ],
    },
    {
      role: 'assistant',
      content: [
        { type: 'thinking', thinking: h.text(), signature: 'sig' },
        { type: 'text', text: h.text() },
        { type: 'tool_use', id: 'tu_1', name: h.text(), input: { [h.key()]: h.text(), list: [h.text()] } },
      ],
    },
    {
      role: 'user',
      content: [
        { type: 'tool_result', tool_use_id: 'tu_1', content: [{ type: 'text', text: h.text() }] },
        { type: 'tool_result', tool_use_id: 'tu_2', content: h.text() },
      ],
    },
    { role: 'assistant', content: h.text() },
    { role: 'user', content: h.text() },
  ],
  tools: [
    { name: h.text(), description: h.text(), input_schema: h.schema(), input_examples: [{ [h.key()]: h.text() }] },
  ],
  tool_choice: { type: 'tool', name: h.text() },
  output_config: { format: { type: 'json_schema', schema: h.schema() } },
  ...(countTokens ? {} : { metadata: { user_id: 'user-1' }, stop_sequences: ['STOP'] }),
});

/**
 * Each route, with a request template holding texts in every kind of field its format's model reads (from
 * the published request definitions).
 */
const FORMATS: Record<string, Format> = {
  'chat-completions': {
    route: '/v1/chat/completions',
    model: 'alpha/gen-5.5',
    upstreamModel: 'gen-5.5',
    answer: chatAnswer,
    template: (h) => ({
      model: 'alpha/gen-5.5',
      messages: [
        { role: 'system', content: h.text() },
        { role: 'SYSTEM', content: h.text() },
        { role: 'developer', content: [{ type: 'text', text: h.text() }] },
        {
          role: 'user',
          name: h.text(),
          content: [
            { type: 'text', text: h.text() },
            { type: 'image_url', image_url: { url: 'https://example.com/a.png' } },
            { type: 'file', file: { filename: h.text(), file_data: 'data:application/pdf;base64,JVBERi0=' } },
          ],
        },
        {
          role: 'assistant',
          content: h.text(),
          tool_calls: [{ id: 'call_1', type: 'function', function: { name: h.text(), arguments: h.args() } }],
        },
        { role: 'tool', tool_call_id: 'call_1', content: h.text() },
        {
          role: 'assistant',
          content: [
            { type: 'text', text: h.text() },
            { type: 'refusal', refusal: h.text() },
          ],
          refusal: h.text(),
          function_call: { name: h.text(), arguments: h.args() },
        },
        { role: 'function', name: h.text(), content: h.text() },
        { role: 'user', content: h.text() },
      ],
      tools: [
        { type: 'function', function: { name: h.text(), description: h.text(), parameters: h.schema() } },
        {
          type: 'custom',
          custom: {
            name: h.text(),
            description: h.text(),
            format: { type: 'grammar', grammar: { syntax: 'lark', definition: h.text() } },
          },
        },
      ],
      functions: [{ name: h.text(), description: h.text(), parameters: h.schema() }],
      tool_choice: { type: 'function', function: { name: h.text() } },
      prediction: { type: 'content', content: [{ type: 'text', text: h.text() }] },
      response_format: {
        type: 'json_schema',
        json_schema: { name: h.text(), description: h.text(), schema: h.schema() },
      },
      web_search_options: {
        user_location: { type: 'approximate', approximate: { city: h.text(), region: h.text(), country: 'GB' } },
      },
      user: 'user-1',
      metadata: { label: 'x' },
      temperature: 0.5,
    }),
  },
  messages: {
    route: '/v1/messages',
    model: 'beta-latest',
    upstreamModel: 'beta-fable-5-1',
    answer: messagesAnswer,
    template: (h) => messagesTemplate(h, false),
  },
  'count-tokens': {
    route: '/v1/messages/count_tokens',
    model: 'beta-latest',
    upstreamModel: 'beta-fable-5-1',
    answer: '{"input_tokens": 12}',
    template: (h) => messagesTemplate(h, true),
  },
  responses: {
    route: '/v1/responses',
    model: 'alpha/gen-5.5',
    upstreamModel: 'gen-5.5',
    answer: responsesAnswer,
    template: (h) => ({
      model: 'alpha/gen-5.5',
      instructions: h.text(),
      input: [
        {
          role: 'user',
          content: [
            { type: 'input_text', text: h.text() },
            { type: 'input_file', filename: h.text(), file_data: 'data:application/pdf;base64,JVBERi0=' },
          ],
        },
        { role: 'system', content: h.text() },
        {
          type: 'message',
          id: 'msg_1',
          role: 'assistant',
          status: 'completed',
          content: [
            {
              type: 'output_text',
              text: h.text(),
              annotations: [
                { type: 'url_citation', url: 'https://example.com', title: h.text(), start_index: 0, end_index: 1 },
              ],
            },
            { type: 'refusal', refusal: h.text() },
          ],
        },
        { type: 'reasoning', id: 'rs_1', summary: [{ type: 'summary_text', text: h.text() }] },
        { type: 'function_call', call_id: 'c1', name: h.text(), arguments: h.args() },
        { type: 'function_call_output', call_id: 'c1', output: h.text() },
        { type: 'custom_tool_call', call_id: 'c2', name: h.text(), input: h.text() },
        { type: 'custom_tool_call_output', call_id: 'c2', output: [{ type: 'input_text', text: h.text() }] },
        { type: 'web_search_call', id: 'ws_1', status: 'completed', action: { type: 'search', query: h.text() } },
        {
          type: 'file_search_call',
          id: 'fs_1',
          status: 'completed',
          queries: [h.text()],
          results: [{ file_id: 'f1', filename: h.text(), text: h.text() }],
        },
        {
          type: 'code_interpreter_call',
          id: 'ci_1',
          container_id: 'cnt_1',
          status: 'completed',
          code: h.text(),
          outputs: [{ type: 'logs', logs: h.text() }],
        },
        {
          type: 'mcp_call',
          id: 'mcp_1',
          server_label: h.text(),
          name: h.text(),
          arguments: h.args(),
          output: h.text(),
        },
        { role: 'user', content: h.text() },
      ],
      tools: [
        { type: 'function', name: h.text(), description: h.text(), parameters: h.schema(), strict: false },
        {
          type: 'mcp',
          server_label: h.text(),
          server_description: h.text(),
          server_url: 'https://mcp.example.com',
          headers: { Authorization: 'Bearer token' },
        },
      ],
      tool_choice: { type: 'function', name: h.text() },
      text: { format: { type: 'json_schema', name: h.text(), description: h.text(), schema: h.schema() } },
      prompt: { id: 'pmpt_1', variables: { topic: h.text(), note: { type: 'input_text', text: h.text() } } },
      metadata: { label: 'x' },
      user: 'user-1',
    }),
  },
  'responses (input string)': {
    route: '/v1/responses',
    model: 'alpha/gen-5.5',
    upstreamModel: 'gen-5.5',
    answer: responsesAnswer,
    template: (h) => ({ model: 'alpha/gen-5.5', input: h.text() }),
  },
  chat: {
    route: '/v1/chat',
    model: 'alpha/gen-5.5',
    upstreamModel: 'gen-5.5',
    answer: responsesAnswer,
    template: (h) => ({ model: 'alpha/gen-5.5', input: h.text() }),
  },
};

const holesOf = (format: Format) => {
  const holes = new Holes();
  format.template(holes);
  return holes.kinds;
};

/** Clean text: words, digits, quotes, backslashes, line breaks, non-ASCII letters; never the code or an address. */
const clean = fc.string({
  unit: fc.constantFrom(
    ...'abcdefghij xyz 0123456789.,-_'.split(''),
    '"',
    '\\',
    '\n',
    'é',
    'ü',
    '日本',
    '😀',
    'Ω',
    '–',
  ),
  minLength: 1,
  maxLength: 16,
});

/** Characters a reader does not see, and each character of the code in forms that read as it once NFKC-normalised. */
const INVISIBLE = ['\u200b', '\u200c', '\u200d', '\u2060', '\ufeff', '\u00ad', '\ufe0f', '\u202c'];
const FORMS: Record<string, string[]> = {
  P: ['P', 'Ｐ', '𝐏', 'ℙ'],
  R: ['R', 'Ｒ', '𝐑', 'ℝ'],
  O: ['O', 'Ｏ', '𝐎'],
  J: ['J', 'Ｊ', '𝐉'],
  E: ['E', 'Ｅ', '𝐄'],
  C: ['C', 'Ｃ', '𝐂', 'ℂ'],
  T: ['T', 'Ｔ', '𝐓'],
  '-': ['-', '－'],
  '1': ['1', '１', '¹', '𝟏'],
  '2': ['2', '２', '²', '𝟐'],
  '3': ['3', '３', '³', '𝟑'],
  '4': ['4', '４', '⁴', '𝟒'],
};
/** `PROJECT-1234`, each character in one of its forms, invisible characters between some of them. */
const code = fc
  .tuple(
    fc.array(fc.nat(), { minLength: 12, maxLength: 12 }),
    fc.array(fc.option(fc.constantFrom(...INVISIBLE), { freq: 3 }), { minLength: 12, maxLength: 12 }),
  )
  .map(([forms, gaps]) =>
    [...'PROJECT-1234']
      .map(
        (char, index) => FORMS[char]![forms[index]! % FORMS[char]!.length]! + (index < 11 ? (gaps[index] ?? '') : ''),
      )
      .join(''),
  );

// A clean request reaches the upstream byte for byte.
describe('property: a banned phrase anywhere the model reads is blocked, in every format', function () {
  this.timeout(300_000);
  let upstream: ScriptedUpstream;
  let test: TestGateway;
  let dir: string;
  let answer = chatAnswer;

  before(async () => {
    upstream = await ScriptedUpstream.start();
    upstream.script = (_req: IncomingMessage, res: ServerResponse) =>
      res.writeHead(200, { 'content-type': 'application/json' }).end(answer);
    dir = await mkdtemp(join(tmpdir(), 'gateway-guardrail-property-'));
    const configFile = join(dir, 'gateway.yaml');
    await writeFile(configFile, `logLevel: silent\n${GUARDRAILS}`);
    test = await startTestGateway({
      configFile,
      env: { ALPHA_BASE_URL: upstream.url, BETA_BASE_URL: upstream.url, RATE_LIMIT_MAX: '100000' },
    });
  });
  after(async () => {
    await test?.close();
    await upstream?.close();
    await rm(dir, { recursive: true, force: true });
  });

  async function send(
    format: Format,
    bytes: string,
  ): Promise<{ status: number; text: string; upstream: string | undefined }> {
    upstream.requests.length = 0;
    answer = format.answer;
    const response = await request(`${test.url}${format.route}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${TEST_KEY}`,
        'content-type': 'application/json',
        'anthropic-version': '2023-06-01',
      },
      body: bytes,
    });
    return { status: response.statusCode, text: await response.body.text(), upstream: upstream.requests[0]?.body };
  }

  for (const [name, format] of Object.entries(FORMATS)) {
    const kinds = holesOf(format);

    it(`${name}: blocks the code in any of its ${kinds.length} texts, in any form, however escaped`, async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.array(clean, { minLength: kinds.length, maxLength: kinds.length }),
          fc.nat(kinds.length - 1),
          code,
          fc.tuple(clean, clean),
          fc.func(fc.boolean()),
          fc.func(fc.boolean()),
          fc.boolean(),
          async (texts, at, planted, [before, after], outer, inner, spaced) => {
            const filled = [...texts];
            filled[at] = `${before}${planted}${after}`;
            const body = format.template(new Holes(filled, inner));
            const sent = await send(format, serialise(body, outer, spaced));
            expect(sent.status, `${kinds[at]} text ${at}: ${sent.text}`).to.equal(400);
            expect(sent.text).to.contain("Guardrail 'no-codes' blocked the request");
            expect(sent.upstream).to.equal(undefined);
          },
        ),
        { numRuns: 60 },
      );
    });

    it(`${name}: lets a request with none of it through, every byte as the client sent it`, async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.array(clean, { minLength: kinds.length, maxLength: kinds.length }),
          fc.func(fc.boolean()),
          fc.func(fc.boolean()),
          fc.boolean(),
          async (texts, outer, inner, spaced) => {
            const bytes = serialise(format.template(new Holes(texts, inner)), outer, spaced);
            const sent = await send(format, bytes);
            expect(sent.status, sent.text).to.equal(200);
            // The native route's upstream body is the plugin's own: it carries the input as sent.
            if (format.route === '/v1/chat') expect(sent.upstream).to.contain(JSON.stringify(texts[0]).slice(1, -1));
            else expect(sent.upstream).to.equal(bytes.replace(`"${format.model}"`, `"${format.upstreamModel}"`));
          },
        ),
        { numRuns: 30 },
      );
    });
  }

  it('redacts an e-mail address in any text of any format where it stands: only that string changes', async () => {
    const formats = Object.values(FORMATS).filter((format) => format.route !== '/v1/chat');
    const most = Math.max(...formats.map((format) => holesOf(format).length));
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...formats),
        fc.nat(),
        fc.array(clean, { minLength: most, maxLength: most }),
        fc.tuple(clean, clean),
        fc.boolean(),
        async (format, pick, texts, [before, after], spaced) => {
          const kinds = holesOf(format);
          const at = pick % kinds.length;
          const filled = texts.slice(0, kinds.length);
          filled[at] = `${before} ada@example.com ${after}`;
          // Written as JSON.stringify writes strings, the way the gateway writes the one it rewrites.
          const bytes = serialise(format.template(new Holes(filled)), () => false, spaced);
          const sent = await send(format, bytes);
          expect(sent.status, sent.text).to.equal(200);
          const expected = bytes
            .replace(`"${format.model}"`, `"${format.upstreamModel}"`)
            .replace('ada@example.com', '[EMAIL]');
          expect(sent.upstream, `${kinds[at]} text ${at}`).to.equal(expected);
        },
      ),
      { numRuns: 80 },
    );
  });
});
