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

/** When the recorded streams were created: a fixed instant, so that the fixtures never change. */
const CREATED = 1763856000;

/** A Chat Completions stream: the role, two pieces of text, the usage chunk, then [DONE]. */
function chatCompletionsChunks(model: string): string[] {
  const chunk = (delta: object, finish: string | null) =>
    JSON.stringify({
      id: 'chatcmpl-1',
      object: 'chat.completion.chunk',
      created: CREATED,
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
      created: CREATED,
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

/** A Messages stream: the input tokens at the start, one text block, the output tokens in message_delta. */
function messagesEvents(model: string): string[] {
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
}

/** A Responses stream: created, one text delta, and the completed response with its output and usage. */
function responsesEvents(model: string): string[] {
  const response = (status: string, extra: object = {}) => ({
    id: 'resp_1',
    object: 'response',
    created_at: CREATED,
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

/** A short stream as each format's upstream sends it, one event's data a line. */
const STREAM_CHUNKS: Record<ScaffoldFormat, (model: string) => string[]> = {
  'chat-completions': chatCompletionsChunks,
  messages: messagesEvents,
  responses: responsesEvents,
};

/** The usage the standard extractor of each format reads from {@link STREAM_CHUNKS}. */
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
    [`__fixtures__/${route}-stream.chunks.txt`]: `${STREAM_CHUNKS[format](model).join('\n')}\n`,
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

/** The guardrail's `index.ts`: a finder of ticket codes, a working example to change into the real check. */
function guardrailIndex(name: string, contractImport: string): string {
  return `import { defineGuardrail, type GuardrailFinding } from '${contractImport}';

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
}

/** The examples plugin test checks the guardrail on, with its default options. */
const TICKET_EXAMPLES = {
  examples: [
    { text: 'Please look at TICKET-123456 before the release.', finds: ['TICKET-123456'] },
    { text: 'Both TICKET-000001 and TICKET-999999 are open.', finds: ['TICKET-000001', 'TICKET-999999'] },
    { text: 'TICKET-12345 has five digits, XTICKET-123456 another prefix, TICKET-1234567 seven digits.', finds: [] },
    { text: 'Nothing to see here.', finds: [] },
  ],
};

/** Examples with options of their own: another prefix. */
const PREFIX_EXAMPLES = {
  options: { prefix: 'OPS' },
  examples: [{ text: 'Escalate OPS-424242, not TICKET-424242.', finds: ['OPS-424242'] }],
};

/** The files `plugin new NAME --guardrail` writes in the guardrail's folder: the declaration and its examples. */
export function guardrailScaffoldFiles({
  name,
  contractImport,
}: {
  readonly name: string;
  readonly contractImport: string;
}): ScaffoldFiles {
  return {
    'index.ts': guardrailIndex(name, contractImport),
    '__fixtures__/tickets.guardrail.json': `${JSON.stringify(TICKET_EXAMPLES, null, 2)}\n`,
    '__fixtures__/prefix.guardrail.json': `${JSON.stringify(PREFIX_EXAMPLES, null, 2)}\n`,
  };
}
