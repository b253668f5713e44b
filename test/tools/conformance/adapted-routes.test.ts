import { expect } from 'chai';
import { cp, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { formatFailure, runConformance } from '../../../tools/conformance/run-conformance.ts';
import { buildExample, examplePackage } from '../../helpers/example-package.ts';

const manifestPath = fileURLToPath(new URL('../../../providers/manifest.json', import.meta.url));

/**
 * Parley's plugin as JavaScript, with knobs to break it: a request builder that is not pure (a random
 * field), the stream's terminal event, the text its answers are mapped to.
 */
function parleyPlugin(options: { impure?: boolean; terminal?: string; prefix?: string } = {}): string {
  const { impure = false, terminal = 'end', prefix = '' } = options;
  const auth = "{ header: 'authorization', prefix: 'Token ' }";
  return `const data = (event) => { try { return JSON.parse(event.data); } catch { return {}; } };
const tally = (value) => (value && typeof value.prompt === 'number' ? { inputTokens: value.prompt, outputTokens: value.reply, cachedTokens: 0 } : undefined);
const chunk = (context, delta, finish) => ({ data: JSON.stringify({ id: 'chatcmpl-' + context.requestId, object: 'chat.completion.chunk', created: context.created, model: context.upstreamModel, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] }) });
export default {
  contract: 1,
  vendor: 'parley',
  routes: {
    'chat-completions': {
      path: '/v2/generate', format: 'chat-completions', auth: ${auth},
      adapter: {
        buildRequest: ({ body, upstreamModel, stream }) => ({ body: { engine: upstreamModel, dialog: body.messages.map((m) => ({ from: m.role === 'user' ? 'human' : m.role, say: m.content })), ...(stream ? { stream: true } : {})${impure ? ', seed: Math.random()' : ''} } }),
        mapAnswer: (body, context) => ({ id: 'chatcmpl-' + context.requestId, object: 'chat.completion', created: context.created, model: context.upstreamModel, choices: [{ index: 0, message: { role: 'assistant', content: '${prefix}' + body.reply.say, refusal: null }, logprobs: null, finish_reason: 'stop' }] }),
        stream: {
          terminal: '${terminal}',
          createState: () => ({ started: false }),
          map: (event, state, context) => {
            const role = state.started ? {} : { role: 'assistant' };
            state.started = true;
            if (event.event === 'chunk') return chunk(context, { ...role, content: '${prefix}' + data(event).say }, null);
            if (event.event === 'end') return chunk(context, role, 'stop');
            return null;
          },
        },
        usage: { fromBody: (body) => tally(body?.tally), fromStreamEvent: (seen, event) => (event.event === 'end' ? tally(data(event).tally) ?? seen : seen) },
      },
    },
  },
  models: [{ id: 'quill-2', upstreamModel: 'quill-2-0925', listed: true, routes: ['chat-completions'], pricing: { input: 1, cachedInput: 1, output: 2 } }],
};
`;
}

/** A plugins directory holding that plugin, with the example's recorded fixtures unless `fixtures` is false. */
async function parleyDir(root: string, name: string, plugin: string, fixtures = true): Promise<string> {
  const dir = join(root, name);
  await mkdir(join(dir, 'parley'), { recursive: true });
  await writeFile(join(dir, 'package.json'), JSON.stringify({ type: 'module' }));
  await writeFile(join(dir, 'manifest.json'), JSON.stringify({ plugins: ['parley'] }));
  await writeFile(join(dir, 'parley', 'index.js'), plugin);
  if (fixtures)
    await cp(join(examplePackage('parley-plugins'), 'parley', '__fixtures__'), join(dir, 'parley', '__fixtures__'), {
      recursive: true,
    });
  return dir;
}

const failuresOf = async (pluginPath: string) => {
  const report = await runConformance({ manifestPath, pluginPath: [pluginPath], vendors: ['parley'] });
  return [...report.failures, ...report.plugins.flatMap((plugin) => plugin.failures)].map(formatFailure);
};

describe('runConformance on an adapted route: the vendor answers with its recordings', function () {
  this.timeout(120_000);
  let root: string;
  before(async () => (root = await mkdtemp(join(tmpdir(), 'gateway-conformance-adapted-'))));
  after(async () => rm(root, { recursive: true, force: true }));

  it('passes the example package, from its source and from its built dist/, its usage checks from the recorded Parley answers', async () => {
    const dist = await buildExample('parley-plugins');
    for (const directory of [examplePackage('parley-plugins'), dist]) {
      const report = await runConformance({ manifestPath, pluginPath: [directory], vendors: ['parley'] });
      expect(
        [...report.failures, ...report.plugins.flatMap((plugin) => plugin.failures)].map(formatFailure),
      ).to.deep.equal([]);
      // catalog; per model: native chat, JSON and stream (the alias too: its target's); the stream fixture replayed
      // once.
      expect(report.plugins[0]!.checks).to.equal(1 + 3 * 3 + 1);
      expect(report.plugins[0]!.notes).to.include(
        "model 'parley/quill-2', chat-completions (stream): usage: from recorded fixture 'generate-stream' (routes.chat-completions.adapter reads the vendor's own format, which the standard mock does not speak)",
      );
    }
  });

  it('follows the path and the body the adapter declares, not the standard path or a model field', async () => {
    expect(await failuresOf(await parleyDir(root, 'fine', parleyPlugin()))).to.deep.equal([]);
  });

  it('reports every broken rule of one request, each on its own: a request builder that is not pure, and a terminal event the recording never sends', async () => {
    const failures = await failuresOf(
      await parleyDir(root, 'twice-broken', parleyPlugin({ impure: true, terminal: 'done' })),
    );
    expect(failures.find((failure) => failure.includes("rule 'upstream-body'"))).to.match(
      /^plugin 'parley', model 'parley\/quill-2', rule 'upstream-body': chat-completions with 'parley\/quill-2': the upstream body is not what routes.chat-completions.adapter.buildRequest makes of the request: got \{"engine":"quill-2-0925",.*"seed":0\.\d+\}$/,
    );
    expect(failures).to.include(
      "plugin 'parley', model 'parley/quill-2', rule 'terminal': chat-completions (stream) with 'parley/quill-2': the gateway recorded the stream as cut: routes.chat-completions.adapter.stream.terminal ('done') matched none of the events of recorded fixture 'generate-stream' (its events are named 'chunk', 'end')",
    );
    expect(failures).to.include(
      "plugin 'parley', model 'parley/quill-2', rule 'terminal': fixture 'generate-stream' on chat-completions: the gateway recorded the replayed stream as cut: routes.chat-completions.adapter.stream.terminal matched none of its events (its events are named 'chunk', 'end')",
    );
    // Without its terminal event, no [DONE]: the replayed stream differs from what clients must get.
    expect(
      failures.some((failure) => failure.includes("rule 'stream-map'") && failure.includes('- expected: [DONE]')),
    ).to.equal(true);
  });

  it("compares what clients get with the recording's expected answer and stream, ids and times by presence", async () => {
    const failures = await failuresOf(await parleyDir(root, 'prefixed', parleyPlugin({ prefix: '>> ' })));
    expect(failures.find((failure) => failure.includes("rule 'answer-map'"))).to.match(
      /^plugin 'parley', model 'parley\/quill-2', rule 'answer-map': chat-completions with 'parley\/quill-2': the client's answer differs from generate.expected.json \(ids and creation times compared by presence\): got \{.*"content":">> Hello! How can I help you today\?"/,
    );
    const stream = failures.find((failure) =>
      failure.startsWith("plugin 'parley', model 'parley/quill-2', rule 'stream-map': chat-completions (stream)"),
    )!;
    expect(stream.split('\n')[0]).to.equal(
      "plugin 'parley', model 'parley/quill-2', rule 'stream-map': chat-completions (stream) with 'parley/quill-2': event 1 of what the client got differs from generate-stream.expected.txt (ids and creation times compared by presence)",
    );
    expect(stream).to.contain('+ received: {"id":"chatcmpl-conformance-').and.to.contain('"content":">> Hello! "');
  });

  it("asks for recordings of an adapted route, since the mock upstream does not speak the vendor's format", async () => {
    const failures = await failuresOf(await parleyDir(root, 'unrecorded', parleyPlugin(), false));
    expect(failures).to.deep.equal([
      "plugin 'parley', model 'parley/quill-2', rule 'fixture': chat-completions with 'parley/quill-2': routes.chat-completions is adapted: the mock upstream does not speak the vendor's format, so the suite answers with a recording: add a JSON answer (<name>.body.json, \"stream\": false) of a model on chat-completions, with its usage, under __fixtures__ (docs/plugins.md, \"Recorded fixtures\")",
      "plugin 'parley', model 'parley/quill-2', rule 'fixture': chat-completions (stream) with 'parley/quill-2': routes.chat-completions is adapted: the mock upstream does not speak the vendor's format, so the suite answers with a recording: add a stream (<name>.sse, its bytes with their event names) of a model on chat-completions, with its usage, under __fixtures__ (docs/plugins.md, \"Recorded fixtures\")",
    ]);
  });
});
