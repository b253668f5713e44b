/**
 * The files `model-gateway plugin new` writes for one vendor, per upstream wire format, and around a plugin package.
 */

import { pluginPackageCompilerOptions } from './plugin-typecheck.ts';

export const SCAFFOLD_FORMATS = ['chat-completions', 'messages', 'responses'] as const;
export type ScaffoldFormat = (typeof SCAFFOLD_FORMATS)[number];

export interface ScaffoldInput {
  readonly vendor: string;
  readonly format: ScaffoldFormat;
  /** How `index.ts` imports the contract: `model-gateway/plugin`, or a relative path inside the repository. */
  readonly contractImport: string;
}

/** Relative path → content. */
export type ScaffoldFiles = Record<string, string>;

const ROUTES: Record<ScaffoldFormat, string> = {
  'chat-completions': `  routes: {
    'chat-completions': { path: '/chat/completions', format: 'chat-completions', auth: 'bearer' },
  },`,
  messages: `  routes: {
    // Messages clients send bare model IDs; the upstream wants its key in x-api-key and a version header.
    messages: {
      path: '/messages',
      format: 'messages',
      auth: 'x-api-key',
      modelIds: ['native'],
      forwardHeaders: ['anthropic-version', 'anthropic-beta'],
      defaultHeaders: { 'anthropic-version': '2023-06-01' },
    },
    'count-tokens': {
      path: '/messages/count_tokens',
      format: 'count-tokens',
      auth: 'x-api-key',
      modelIds: ['native'],
      forwardHeaders: ['anthropic-version', 'anthropic-beta'],
      defaultHeaders: { 'anthropic-version': '2023-06-01' },
    },
  },`,
  responses: `  routes: {
    // Responses clients may send the prefixed or the bare model ID.
    responses: { path: '/responses', format: 'responses', auth: 'bearer', modelIds: ['prefixed', 'native'] },
  },`,
};

const MODEL_ROUTES: Record<ScaffoldFormat, string> = {
  'chat-completions': `['chat', 'chat-completions']`,
  messages: `['chat', 'messages', 'count-tokens']`,
  responses: `['chat', 'responses']`,
};

const NATIVE_CHAT: Record<ScaffoldFormat, string> = {
  'chat-completions': `  // POST /v1/chat: one user message, with the provider's low reasoning preset.
  nativeChat: {
    route: 'chat-completions',
    buildRequest: (request) => ({
      model: request.upstreamModel,
      messages: [{ role: 'user', content: request.input }],
      reasoning_effort: 'low',
      ...(request.temperature === undefined ? {} : { temperature: request.temperature }),
      ...(request.maxOutputTokens === undefined ? {} : { max_tokens: request.maxOutputTokens }),
      stream: false,
    }),
    readText: (body) => {
      const content = (body as { choices?: { message?: { content?: unknown } }[] } | null)?.choices?.[0]?.message?.content;
      return typeof content === 'string' ? content : undefined;
    },
  },`,
  messages: `  // POST /v1/chat: one user message; max_tokens is required by the Messages API.
  nativeChat: {
    route: 'messages',
    buildRequest: (request) => ({
      model: request.upstreamModel,
      max_tokens: request.maxOutputTokens ?? 1024,
      messages: [{ role: 'user', content: request.input }],
      ...(request.temperature === undefined ? {} : { temperature: request.temperature }),
    }),
    readText: (body) => {
      const blocks = (body as { content?: { type?: unknown; text?: unknown }[] } | null)?.content ?? [];
      const texts = blocks.filter((block) => block.type === 'text' && typeof block.text === 'string').map((block) => block.text as string);
      return texts.length ? texts.join('') : undefined;
    },
  },`,
  responses: `  // POST /v1/chat: the input as one string, with the provider's low reasoning preset.
  nativeChat: {
    route: 'responses',
    buildRequest: (request) => ({
      model: request.upstreamModel,
      input: request.input,
      reasoning: { effort: 'low' },
      ...(request.temperature === undefined ? {} : { temperature: request.temperature }),
      ...(request.maxOutputTokens === undefined ? {} : { max_output_tokens: request.maxOutputTokens }),
      stream: false,
    }),
    readText: (body) => {
      const items = (body as { output?: { type?: unknown; content?: { type?: unknown; text?: unknown }[] }[] } | null)?.output ?? [];
      const texts = items
        .filter((item) => item.type === 'message')
        .flatMap((item) => item.content ?? [])
        .filter((part) => part.type === 'output_text' && typeof part.text === 'string')
        .map((part) => part.text as string);
      return texts.length ? texts.join('') : undefined;
    },
  },`,
};

/** A short stream as each format's upstream sends it, one event's data a line. */
function streamChunks(format: ScaffoldFormat, model: string): string[] {
  const created = 1763856000;
  switch (format) {
    case 'chat-completions': {
      const chunk = (delta: object, finish: string | null) =>
        JSON.stringify({
          id: 'chatcmpl-1',
          object: 'chat.completion.chunk',
          created,
          model,
          choices: [{ index: 0, delta, finish_reason: finish }],
        });
      return [
        chunk({ role: 'assistant', content: '' }, null),
        chunk({ content: 'Hello' }, null),
        chunk({ content: ' there.' }, 'stop'),
        JSON.stringify({
          id: 'chatcmpl-1',
          object: 'chat.completion.chunk',
          created,
          model,
          choices: [],
          usage: {
            prompt_tokens: 12,
            completion_tokens: 3,
            total_tokens: 15,
            prompt_tokens_details: { cached_tokens: 0 },
          },
        }),
        '[DONE]',
      ];
    }
    case 'messages':
      return [
        JSON.stringify({
          type: 'message_start',
          message: {
            id: 'msg_1',
            type: 'message',
            role: 'assistant',
            model,
            content: [],
            stop_reason: null,
            usage: { input_tokens: 12, output_tokens: 1 },
          },
        }),
        JSON.stringify({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }),
        JSON.stringify({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hello there.' } }),
        JSON.stringify({ type: 'content_block_stop', index: 0 }),
        JSON.stringify({ type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 3 } }),
        JSON.stringify({ type: 'message_stop' }),
      ];
    case 'responses': {
      const response = (status: string, extra: object = {}) => ({
        id: 'resp_1',
        object: 'response',
        created_at: created,
        status,
        model,
        output: [],
        ...extra,
      });
      return [
        JSON.stringify({ type: 'response.created', sequence_number: 0, response: response('in_progress') }),
        JSON.stringify({
          type: 'response.output_text.delta',
          sequence_number: 1,
          item_id: 'msg_1',
          output_index: 0,
          content_index: 0,
          delta: 'Hello there.',
        }),
        JSON.stringify({
          type: 'response.completed',
          sequence_number: 2,
          response: response('completed', {
            output: [
              {
                type: 'message',
                id: 'msg_1',
                role: 'assistant',
                status: 'completed',
                content: [{ type: 'output_text', text: 'Hello there.', annotations: [] }],
              },
            ],
            usage: { input_tokens: 12, input_tokens_details: { cached_tokens: 0 }, output_tokens: 3, total_tokens: 15 },
          }),
        }),
      ];
    }
  }
}

/** The usage the standard extractor of each format reads from {@link streamChunks}. */
const STREAM_USAGE = { inputTokens: 12, outputTokens: 3, cachedTokens: 0 };

/** The plugin folder's files: the declaration and one recorded stream fixture. */
export function scaffoldFiles({ vendor, format, contractImport }: ScaffoldInput): ScaffoldFiles {
  const model = `${vendor}-1`;
  // Each scaffolded format is served on the client route of the same name.
  const route = format;
  const index = `import { definePlugin } from '${contractImport}';

/**
 * The ${vendor} provider. Its upstream is configured with ${envPrefix(vendor)}_BASE_URL (the base URL with
 * its version prefix, e.g. https://api.${vendor}.example/v1) and ${envPrefix(vendor)}_API_KEY.
 * Guide: docs/plugins.md. Check it with: npx model-gateway plugin test <this plugin's folder>
 */
export default definePlugin({
  contract: 1,
  vendor: '${vendor}',
${ROUTES[format]}
  models: [
    {
      id: '${model}',
      listed: true,
      routes: ${MODEL_ROUTES[format]},
      // USD per million tokens: replace with the provider's prices.
      pricing: { input: 1, cachedInput: 0.1, output: 4 },
    },
  ],
  aliases: [{ id: '${vendor}-latest', target: '${vendor}/${model}', routes: ${MODEL_ROUTES[format]} }],
${NATIVE_CHAT[format]}
});
`;
  return {
    'index.ts': index,
    [`__fixtures__/${route}-stream.fixture.json`]: `${JSON.stringify({ route, model: `${vendor}/${model}`, usage: STREAM_USAGE }, null, 2)}\n`,
    [`__fixtures__/${route}-stream.chunks.txt`]: `${streamChunks(format, model).join('\n')}\n`,
  };
}

export interface PackageInput {
  /** The package name. */
  readonly name: string;
  /**
   * Whether the build writes source maps (so that a fault's stack names the TypeScript lines): a package begun with an
   * adapter.
   */
  readonly sourceMaps?: boolean;
  /** The devDependency spec of the gateway whose contract the plugins compile against, e.g. `file:../model-gateway`. */
  readonly gateway: string;
  /** The devDependency spec of typescript: the gateway's own, so that the contract compiles as it does there. */
  readonly typescript: string;
}

/** `prepare-dist.mjs`, the first step of a plugin package's `npm run build`. */
const PREPARE_DIST = `// The first step of \`npm run build\` (tsc, the second, compiles <vendor>/*.ts to dist/<vendor>/*.js):
// empties dist/ and puts there what the gateway reads beside the compiled plugins, so that dist/ is a
// plugins directory of its own, JavaScript only, to copy anywhere: GATEWAY_PLUGIN_PATH=<this package>/dist.
//   dist/manifest.json   this package's manifest: the plugins to load, in catalog order
//   dist/package.json    {"type": "module"}: the compiled plugins are ES modules
//   dist/<vendor>/       every file of the plugin folder that is not TypeScript (__fixtures__, data files)
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = dirname(fileURLToPath(import.meta.url));
const dist = join(root, 'dist');
const { plugins } = JSON.parse(readFileSync(join(root, 'manifest.json'), 'utf8'));
rmSync(dist, { recursive: true, force: true });
mkdirSync(dist);
for (const vendor of plugins) {
  if (!existsSync(join(root, vendor))) {
    console.error(\`manifest.json lists '\${vendor}', but \${join(root, vendor)} does not exist\`);
    process.exit(1);
  }
  cpSync(join(root, vendor), join(dist, vendor), { recursive: true, filter: (source) => !/\\.[cm]?ts$/.test(source) });
}
cpSync(join(root, 'manifest.json'), join(dist, 'manifest.json'));
writeFileSync(join(dist, 'package.json'), \`\${JSON.stringify({ type: 'module' }, null, 2)}\\n\`);
`;

/**
 * The files around the plugin folders that make a plugins directory outside the repository an npm
 * package: `npm install` brings typescript and the gateway (for the contract's types, at build time only:
 * the gateway maps `model-gateway/plugin` to its own contract when it loads a plugin), `npm run typecheck`
 * checks, `npm run build` writes dist/, the only folder the package ships (`files`).
 */
export function packageFiles({ name, gateway, typescript, sourceMaps = false }: PackageInput): ScaffoldFiles {
  const packageJson = {
    name,
    version: '0.1.0',
    // So that a private vendor's plugins are not published by mistake: remove it to publish.
    private: true,
    description: 'Provider plugins for model-gateway, built to dist/: GATEWAY_PLUGIN_PATH=<this package>/dist',
    type: 'module',
    files: ['dist'],
    scripts: {
      typecheck: 'tsc -p tsconfig.json --noEmit',
      build: 'node prepare-dist.mjs && tsc -p tsconfig.json',
      prepack: 'npm run build',
    },
    devDependencies: { 'model-gateway': gateway, typescript },
  };
  const tsconfig = {
    compilerOptions: { ...pluginPackageCompilerOptions(), ...(sourceMaps ? { sourceMap: true } : {}) },
    include: ['*/**/*.ts'],
    exclude: ['dist', 'node_modules', '**/__fixtures__'],
  };
  return {
    'package.json': `${JSON.stringify(packageJson, null, 2)}\n`,
    'tsconfig.json': `${JSON.stringify(tsconfig, null, 2)}\n`,
    'prepare-dist.mjs': PREPARE_DIST,
    '.gitignore': 'node_modules/\ndist/\n*.tgz\n',
  };
}

/** An npm package name made of a directory name: lower case, URL-safe, `gateway-plugins` when nothing is left. */
export function packageName(directoryName: string): string {
  const name = directoryName
    .toLowerCase()
    .replace(/[^a-z0-9._-]+/g, '-')
    .replace(/^[._-]+|-+$/g, '')
    .slice(0, 214);
  return name || 'gateway-plugins';
}

/** The default environment prefix of a vendor, as the gateway derives it. */
export const envPrefix = (vendor: string) => vendor.toUpperCase().replace(/-/g, '_');

/** The files `plugin new NAME --guardrail` writes in the guardrail's folder: the declaration and its examples. */
export function guardrailScaffoldFiles({
  name,
  contractImport,
}: {
  readonly name: string;
  readonly contractImport: string;
}): ScaffoldFiles {
  const index = `import { defineGuardrail, type GuardrailFinding } from '${contractImport}';

/** The longest prefix \`options.prefix\` may set: with the six digits, a finding is at most 23 characters. */
const MAX_PREFIX = 16;

/**
 * The ${name} guardrail: finds internal ticket codes, \`<PREFIX>-<six digits>\` (\`TICKET-123456\`; the
 * prefix is \`options.prefix\`, TICKET by default), in prompts and answers. Turn it on in the gateway's
 * config file, where what it does with a finding is set (block, or redact as \`[TICKET]\`):
 *
 *   guardrails:
 *     - { name: ${name}, use: ${name}, on: both, action: redact, replacement: '[TICKET]', options: { prefix: TICKET } }
 *
 * \`scan\` must be pure, synchronous and fast: it runs on every text of every request, and on each window
 * of held text in a stream. Guide: docs/guardrails.md. Check it with: npx model-gateway plugin test <this folder>
 */
export default defineGuardrail({
  contract: 1,
  guardrail: '${name}',
  // The longest text one finding can span: what a stream holds back so that a code split across events is caught.
  maxFindingChars: MAX_PREFIX + 7,
  checkOptions: (options) => {
    const prefix = options.prefix;
    if (prefix === undefined || (typeof prefix === 'string' && /^[A-Z]{1,16}$/.test(prefix))) return [];
    return [\`prefix must be 1 to \${MAX_PREFIX} capital letters\`];
  },
  scan: (text, context) => {
    const prefix = typeof context.options.prefix === 'string' ? context.options.prefix : 'TICKET';
    const findings: GuardrailFinding[] = [];
    // Cheap test first: most texts hold no code at all.
    if (!text.includes(\`\${prefix}-\`)) return findings;
    for (const match of text.matchAll(new RegExp(\`(?<![A-Za-z0-9])\${prefix}-\\\\d{6}(?![0-9])\`, 'g'))) {
      findings.push({ start: match.index, end: match.index + match[0].length });
    }
    return findings;
  },
});
`;
  const examples = {
    examples: [
      { text: 'Please look at TICKET-123456 before the release.', finds: ['TICKET-123456'] },
      { text: 'Both TICKET-000001 and TICKET-999999 are open.', finds: ['TICKET-000001', 'TICKET-999999'] },
      { text: 'TICKET-12345 has five digits, XTICKET-123456 another prefix, TICKET-1234567 seven digits.', finds: [] },
      { text: 'Nothing to see here.', finds: [] },
    ],
  };
  const custom = {
    options: { prefix: 'OPS' },
    examples: [{ text: 'Escalate OPS-424242, not TICKET-424242.', finds: ['OPS-424242'] }],
  };
  return {
    'index.ts': index,
    '__fixtures__/tickets.guardrail.json': `${JSON.stringify(examples, null, 2)}\n`,
    '__fixtures__/prefix.guardrail.json': `${JSON.stringify(custom, null, 2)}\n`,
  };
}

/**
 * The files `plugin new VENDOR --adapter` writes: a plugin whose vendor speaks a format of its own,
 * served on /v1/chat/completions (and /v1/chat) through a route adapter, and recordings of its answers
 * (the conformance suite answers with them: the mock upstream speaks only the gateway's formats). The
 * vendor's shapes are placeholders of a typical generation API, to replace with the real one's.
 */
export function adapterScaffoldFiles({
  vendor,
  contractImport,
}: {
  readonly vendor: string;
  readonly contractImport: string;
}): ScaffoldFiles {
  const model = `${vendor}-1`;
  const index = `import { definePlugin } from '${contractImport}';
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
  const wire = `import type { TokenUsage, UsageExtractor } from '${contractImport}';

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
  const adapter = `import { defineAdapter, type AdapterContext, type RequestProblem, type SseEvent } from '${contractImport}';
import { dataOf, errorOf, textOf, vendorUsage, type VendorTurn } from './vendor-wire.ts';

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
  const upstreamModel = model;
  const chunkLine = (delta: object, finish: string | null) =>
    JSON.stringify({
      id: "chatcmpl-(the request's id)",
      object: 'chat.completion.chunk',
      created: 1763856000,
      model: upstreamModel,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
    });
  const usage = { inputTokens: 12, outputTokens: 3, cachedTokens: 0 };
  const answer = {
    id: "chatcmpl-(the request's id)",
    object: 'chat.completion',
    created: 1763856000,
    model: upstreamModel,
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
  return {
    'index.ts': index,
    'vendor-wire.ts': wire,
    'chat-completions.ts': adapter,
    '__fixtures__/generate.fixture.json': `${JSON.stringify({ route: 'chat-completions', model: `${vendor}/${model}`, stream: false, usage }, null, 2)}\n`,
    '__fixtures__/generate.body.json': `${JSON.stringify({ output: { text: 'Hello there.' }, usage: { input: 12, output: 3 } })}\n`,
    '__fixtures__/generate.expected.json': `${JSON.stringify(answer, null, 2)}\n`,
    '__fixtures__/generate-stream.fixture.json': `${JSON.stringify({ route: 'chat-completions', model: `${vendor}/${model}`, usage }, null, 2)}\n`,
    '__fixtures__/generate-stream.sse': [
      'event: delta\ndata: {"text":"Hello"}\n',
      'event: delta\ndata: {"text":" there."}\n',
      'event: done\ndata: {"usage":{"input":12,"output":3}}\n',
      '',
    ].join('\n'),
    '__fixtures__/generate-stream.expected.txt': `${[chunkLine({ role: 'assistant', content: 'Hello' }, null), chunkLine({ content: ' there.' }, null), chunkLine({}, 'stop'), '[DONE]'].join('\n')}\n`,
  };
}
