/**
 * The files `plugin new VENDOR --adapter` writes: a plugin whose vendor speaks a format of its own,
 * served on /v1/chat/completions (and /v1/chat) through a route adapter, and recordings of its answers
 * (the conformance suite answers with them: the mock upstream speaks only the gateway's formats). The
 * vendor's shapes are placeholders of a typical generation API, to replace with the real one's.
 */

import { envPrefix, type ScaffoldFiles } from './plugin-scaffold.ts';

/** `index.ts`: the declaration, its one route served through the adapter. */
function adapterIndex(vendor: string, model: string, contractImport: string): string {
  return `import { definePlugin } from '${contractImport}';
import { chatCompletionsAdapter, nativeChat } from './chat-completions.ts';

/**
 * The ${vendor} provider, whose API speaks a format of its own (see vendor-wire.ts): served to Chat
 * Completions clients through a route adapter (chat-completions.ts), and on /v1/chat. Its upstream is
 * configured with ${envPrefix(vendor)}_BASE_URL (the base URL the route's path is appended to, e.g.
 * https://api.${vendor}.example/v1) and ${envPrefix(vendor)}_API_KEY.
 * Guide: docs/plugins.md ("Route adapters"). Check it with: npx model-gateway plugin test <this plugin's folder>
 */
export default definePlugin({
  contract: 1,
  vendor: '${vendor}',
  routes: {
    'chat-completions': {
      // The vendor's path and credential; format stays the route's (what the adapter maps to).
      path: '/generate',
      format: 'chat-completions',
      auth: 'bearer',
      adapter: chatCompletionsAdapter,
    },
  },
  models: [
    {
      id: '${model}',
      listed: true,
      routes: ['chat', 'chat-completions'],
      // USD per million tokens: replace with the provider's prices.
      pricing: { input: 1, cachedInput: 1, output: 4 },
    },
  ],
  aliases: [{ id: '${vendor}-latest', target: '${vendor}/${model}', routes: ['chat', 'chat-completions'] }],
  nativeChat,
});
`;
}

/** `vendor-wire.ts` below its import of the contract's types: the vendor's shapes and the readers of them. */
const VENDOR_WIRE = `
/**
 * The vendor's own wire format. Placeholders of a typical generation API: replace them with what the
 * vendor's API reference says, then record real answers into __fixtures__ (docs/plugins.md).
 *
 * POST /generate {"model": "…", "turns": [{"speaker": "system" | "user" | "assistant", "text": "…"}], "max_output":
 * 256, "stream": true}
 *   → {"output": {"text": "…"}, "usage": {"input": 12, "output": 7}}
 *   → (stream) event: delta {"text": "…"} … event: done {"usage": {…}}; errors {"error": {"code": "…", "message": "…"}}
 */
export interface VendorTurn {
  readonly speaker: 'system' | 'user' | 'assistant';
  readonly text: string;
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
const isCount = (value: unknown): value is number => typeof value === 'number' && Number.isFinite(value) && value >= 0;

/** The JSON of an event's data, or undefined. */
export function dataOf(data: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(data);
    return isRecord(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

/** The vendor's usage block as the gateway's usage (no prompt cache here: nothing cached). */
export function usageOf(usage: unknown): TokenUsage | undefined {
  if (!isRecord(usage) || !isCount(usage.input) || !isCount(usage.output)) return undefined;
  return { inputTokens: usage.input, outputTokens: usage.output, cachedTokens: 0 };
}

/** The reply text of a JSON answer. */
export function textOf(body: unknown): string | undefined {
  const text = isRecord(body) && isRecord(body.output) ? body.output.text : undefined;
  return typeof text === 'string' ? text : undefined;
}

/** The vendor's error, from an error answer or a stream's error event. */
export function errorOf(body: unknown): { code?: string; message?: string } | undefined {
  const error = isRecord(body) && isRecord(body.error) ? body.error : undefined;
  if (!error) return undefined;
  return { code: typeof error.code === 'string' ? error.code : undefined, message: typeof error.message === 'string' ? error.message : undefined };
}

/** Usage from the whole answer, or from the stream's \`done\` event (the adapter's usage reader). */
export const vendorUsage: UsageExtractor = {
  fromBody: (body) => (isRecord(body) ? usageOf(body.usage) : undefined),
  fromStreamEvent: (seen, event) => (event.event === 'done' ? (usageOf(dataOf(event.data)?.usage) ?? seen) : seen),
};
`;

/** `chat-completions.ts` below its import of the contract: the adapter, both ways, and `/v1/chat` on its route. */
const CHAT_COMPLETIONS_ADAPTER = `import { dataOf, errorOf, textOf, vendorUsage, type VendorTurn } from './vendor-wire.ts';

const SPEAKERS: Readonly<Record<string, VendorTurn['speaker']>> = { system: 'system', developer: 'system', user: 'user', assistant: 'assistant' };
const present = (value: unknown) => value !== undefined && value !== null && !(Array.isArray(value) && value.length === 0);

/** A Chat Completions message's text: its string, or its text parts joined; undefined for another kind of part. */
function messageText(content: unknown): string | undefined {
  if (typeof content === 'string') return content;
  if (content === null || content === undefined) return '';
  if (!Array.isArray(content)) return undefined;
  const parts = content as { type?: unknown; text?: unknown }[];
  return parts.every((part) => part.type === 'text' && typeof part.text === 'string') ? parts.map((part) => part.text).join('') : undefined;
}

/** What the vendor cannot do: the client's 400, every problem listed, before anything is sent or reserved. */
function checkRequest({ body }: { readonly body: Readonly<Record<string, unknown>> }): RequestProblem[] {
  const problems: RequestProblem[] = [];
  if (present(body.tools)) problems.push({ field: 'tools', message: 'this provider has no tool calling' });
  if (typeof body.n === 'number' && body.n > 1) problems.push({ field: 'n', message: 'this provider answers one choice: n must be 1' });
  const messages = Array.isArray(body.messages) ? (body.messages as { role?: unknown; content?: unknown }[]) : [];
  messages.forEach((message, index) => {
    if (!(String(message.role) in SPEAKERS)) problems.push({ field: \`messages[\${index}].role\`, message: \`this provider has no '\${String(message.role)}' turns\` });
    else if (messageText(message.content) === undefined) problems.push({ field: \`messages[\${index}].content\`, message: 'this provider reads text only' });
  });
  return problems;
}

/** One chunk of a Chat Completions stream. */
function chunk(context: AdapterContext, delta: Record<string, unknown>, finish: string | null): SseEvent {
  const payload = { id: \`chatcmpl-\${context.requestId}\`, object: 'chat.completion.chunk', created: context.created, model: context.upstreamModel, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] };
  return { data: JSON.stringify(payload) };
}

/** The client's Chat Completions request and the vendor's answers, both ways. */
export const chatCompletionsAdapter = defineAdapter<{ started: boolean }>({
  checkRequest,
  buildRequest: ({ body, upstreamModel, stream }) => {
    const messages = body.messages as { role: string; content: unknown }[];
    const cap = body.max_completion_tokens ?? body.max_tokens;
    return {
      body: {
        model: upstreamModel,
        turns: messages.map((message): VendorTurn => ({ speaker: SPEAKERS[message.role]!, text: messageText(message.content) ?? '' })),
        ...(typeof cap === 'number' ? { max_output: cap } : {}),
        ...(stream ? { stream: true } : {}),
      },
    };
  },
  // The gateway writes the answer's usage from the usage reader.
  mapAnswer: (answer, context) => ({
    id: \`chatcmpl-\${context.requestId}\`,
    object: 'chat.completion',
    created: context.created,
    model: context.upstreamModel,
    choices: [{ index: 0, message: { role: 'assistant', content: textOf(answer) ?? '', refusal: null }, logprobs: null, finish_reason: 'stop' }],
  }),
  stream: {
    // The vendor's last event: the gateway then writes the usage chunk (when asked) and [DONE].
    terminal: 'done',
    error: 'error',
    createState: () => ({ started: false }),
    map: (event, state, context) => {
      const role = state.started ? {} : { role: 'assistant' };
      state.started = true;
      if (event.event === 'delta') return chunk(context, { ...role, content: String(dataOf(event.data)?.text ?? '') }, null);
      if (event.event === 'done') return chunk(context, role, 'stop');
      if (event.event === 'error') {
        const error = errorOf(dataOf(event.data));
        return { data: JSON.stringify({ error: { message: error?.message ?? 'the provider failed mid-answer', type: 'server_error', param: null, code: error?.code ?? null } }) };
      }
      return null;
    },
  },
  mapError: ({ status, body }) => {
    const error = errorOf(body);
    return { message: error?.message ?? \`the provider answered \${status}\`, ...(error?.code ? { code: error.code } : {}) };
  },
  usage: vendorUsage,
});

/** POST /v1/chat (plain text in and out) on the same route. */
export const nativeChat = {
  route: 'chat-completions',
  buildRequest: ({ upstreamModel, input, maxOutputTokens }: { upstreamModel: string; input: string; maxOutputTokens?: number }) => ({
    model: upstreamModel,
    turns: [{ speaker: 'user', text: input }],
    ...(maxOutputTokens === undefined ? {} : { max_output: maxOutputTokens }),
  }),
  readText: textOf,
} as const;
`;

// plugin test compares ids and creation times in what clients must receive by presence only: these stand for any.
const ANSWER_ID = "chatcmpl-(the request's id)";
const CREATED = 1763856000;

/** The usage of both recordings, as the adapter's usage reader reads it. */
const RECORDED_USAGE = { inputTokens: 12, outputTokens: 3, cachedTokens: 0 };

/** The Chat Completions answer clients must receive for the recorded JSON answer. */
function expectedAnswer(model: string): object {
  return {
    id: ANSWER_ID,
    object: 'chat.completion',
    created: CREATED,
    model,
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content: 'Hello there.', refusal: null },
        logprobs: null,
        finish_reason: 'stop',
      },
    ],
    usage: { prompt_tokens: 12, completion_tokens: 3, total_tokens: 15, prompt_tokens_details: { cached_tokens: 0 } },
  };
}

/** The Chat Completions stream clients must receive for the recorded stream, one event's data a line. */
function expectedStream(model: string): string[] {
  const chunkLine = (delta: object, finish: string | null) =>
    JSON.stringify({
      id: ANSWER_ID,
      object: 'chat.completion.chunk',
      created: CREATED,
      model,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
    });
  return [
    chunkLine({ role: 'assistant', content: 'Hello' }, null),
    chunkLine({ content: ' there.' }, null),
    chunkLine({}, 'stop'),
    '[DONE]',
  ];
}

/** `__fixtures__/`: a JSON answer and a stream as the vendor sends them, and what clients must receive for each. */
function recordedAnswers(vendor: string, model: string): ScaffoldFiles {
  const fixture = (extra: object) =>
    `${JSON.stringify({ route: 'chat-completions', model: `${vendor}/${model}`, ...extra, usage: RECORDED_USAGE }, null, 2)}\n`;
  return {
    '__fixtures__/generate.fixture.json': fixture({ stream: false }),
    '__fixtures__/generate.body.json': `${JSON.stringify({ output: { text: 'Hello there.' }, usage: { input: 12, output: 3 } })}\n`,
    '__fixtures__/generate.expected.json': `${JSON.stringify(expectedAnswer(model), null, 2)}\n`,
    '__fixtures__/generate-stream.fixture.json': fixture({}),
    '__fixtures__/generate-stream.sse': [
      'event: delta\ndata: {"text":"Hello"}\n',
      'event: delta\ndata: {"text":" there."}\n',
      'event: done\ndata: {"usage":{"input":12,"output":3}}\n',
      '',
    ].join('\n'),
    '__fixtures__/generate-stream.expected.txt': `${expectedStream(model).join('\n')}\n`,
  };
}

/** The plugin folder's files: the declaration, the vendor's wire format, the adapter and the recorded answers. */
export function adapterScaffoldFiles({
  vendor,
  contractImport,
}: {
  readonly vendor: string;
  readonly contractImport: string;
}): ScaffoldFiles {
  const model = `${vendor}-1`;
  return {
    'index.ts': adapterIndex(vendor, model, contractImport),
    'vendor-wire.ts': `import type { TokenUsage, UsageExtractor } from '${contractImport}';\n${VENDOR_WIRE}`,
    'chat-completions.ts': `import { defineAdapter, type AdapterContext, type RequestProblem, type SseEvent } from '${contractImport}';\n${CHAT_COMPLETIONS_ADAPTER}`,
    ...recordedAnswers(vendor, model),
  };
}
