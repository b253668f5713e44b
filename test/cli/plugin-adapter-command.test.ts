import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { runCli } from '../../src/cli/main.ts';
import { examplePackage } from '../helpers/example-package.ts';
import { ParleyVendor } from '../helpers/parley-vendor.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

async function cli(argv: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runCli(argv, { out: (text) => (out += text), err: (text) => (err += text) }, env);
  return { code, out, err };
}

/**
 * `npm run build` of a plugin package, once `npm install` linked the gateway (its file: devDependency), with the
 * checkout's typescript.
 */
async function build(plugins: string): Promise<void> {
  await mkdir(join(plugins, 'node_modules'), { recursive: true });
  await symlink(ROOT, join(plugins, 'node_modules', 'model-gateway'), 'dir').catch(() => {});
  await promisify(execFile)(process.execPath, ['prepare-dist.mjs'], { cwd: plugins });
  await promisify(execFile)(
    process.execPath,
    [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'],
    { cwd: plugins },
  );
}

describe('CLI: plugin new --adapter, and plugin test of an adapted vendor', function () {
  this.timeout(120_000);
  let root: string;
  before(async () => (root = await mkdtemp(join(tmpdir(), 'gateway-plugin-adapter-'))));
  after(async () => rm(root, { recursive: true, force: true }));

  it('scaffolds an adapter that passes plugin test untouched, and a package whose build writes source maps: a fault names its TypeScript line', async () => {
    const plugins = join(root, 'plugins');
    const created = await cli(['plugin', 'new', 'acme', '--adapter', '--dir', plugins]);
    expect(created.code, created.err).to.equal(0);
    expect(created.out).to.contain(
      `Created ${join(plugins, 'acme')}/ (a route adapter: the vendor's own format on chat-completions)`,
    );
    expect((await readdir(join(plugins, 'acme'), { recursive: true })).sort()).to.deep.equal([
      '__fixtures__',
      '__fixtures__/generate-stream.expected.txt',
      '__fixtures__/generate-stream.fixture.json',
      '__fixtures__/generate-stream.sse',
      '__fixtures__/generate.body.json',
      '__fixtures__/generate.expected.json',
      '__fixtures__/generate.fixture.json',
      'chat-completions.ts',
      'index.ts',
      'vendor-wire.ts',
    ]);
    expect(
      (
        JSON.parse(await readFile(join(plugins, 'tsconfig.json'), 'utf8')) as {
          compilerOptions: Record<string, unknown>;
        }
      ).compilerOptions,
    ).to.include({ sourceMap: true });
    expect(await readFile(join(plugins, 'acme', 'chat-completions.ts'), 'utf8')).to.contain(
      "import { defineAdapter, type AdapterContext, type RequestProblem, type SseEvent } from 'model-gateway/plugin';",
    );

    const tested = await cli(['plugin', 'test', join(plugins, 'acme')]);
    expect(tested.code, tested.out).to.equal(0);
    expect(tested.out).to.match(/^✔ type check: acme\n✔ acme: 8 checks passed /);

    // A hook that throws, in the built package: the fault's log line shows the TypeScript line it threw on.
    const adapter = join(plugins, 'acme', 'chat-completions.ts');
    const source = (await readFile(adapter, 'utf8')).replace(
      "if (event.event === 'done') return chunk(context, role, 'stop');",
      "if (event.event === 'done') throw new Error('done is not mapped yet');",
    );
    await writeFile(adapter, source);
    const line = source.split('\n').findIndex((text) => text.includes('done is not mapped yet')) + 1;
    await build(plugins);
    expect(await readdir(join(plugins, 'dist', 'acme'))).to.include('chat-completions.js.map');
    const faulty = await cli(['plugin', 'test', join(plugins, 'dist')]);
    expect(faulty.code).to.equal(1);
    expect(faulty.out).to.contain(
      "rule 'plugin-fault': chat-completions (stream) with 'acme/acme-1': plugin 'acme', hook 'routes.chat-completions.adapter.stream.map' failed: it threw or returned a wrong shape; the gateway logged: gateway plugin 'acme' failed in its hook 'routes.chat-completions.adapter.stream.map': Error: done is not mapped yet",
    );
    expect(faulty.out).to.match(
      new RegExp(`\\n {8}at map \\(${adapter.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}:${line}:\\d+\\)`),
    );

    // --verbose: every line the gateway under test logged, its start-up and its requests.
    const verbose = await cli(['plugin', 'test', join(plugins, 'dist'), '--verbose']);
    expect(verbose.out)
      .to.contain(`  log {"level":30`)
      .and.to.contain(`plugin 'acme' loaded from ${join(plugins, 'dist', 'acme')}`);
    expect(
      verbose.out.split('\n').filter((text) => text.startsWith('  log ') && text.includes('"msg":"request"')).length,
    ).to.be.greaterThan(5);
  });

  it('refuses --adapter with another format, or with --guardrail', async () => {
    expect(
      await cli(['plugin', 'new', 'other', '--adapter', '--format', 'messages', '--dir', join(root, 'refused')]),
    ).to.deep.include({ code: 2 });
    expect(
      await cli(['plugin', 'new', 'other', '--adapter', '--guardrail', '--dir', join(root, 'refused')]),
    ).to.deep.include({ code: 2 });
  });

  describe('--upstream: the live vendor, asked whatever the suite found', () => {
    let vendor: ParleyVendor;
    before(async () => (vendor = await ParleyVendor.start('live-parley-key-0001')));
    after(async () => vendor?.close());

    it("checks the example's Parley adapter against a live Parley: the request it builds, its JSON answer and its stream read to the terminal event", async () => {
      const run = await cli([
        'plugin',
        'test',
        join(examplePackage('parley-plugins'), 'parley'),
        '--upstream',
        vendor.baseUrl,
        '--key',
        'live-parley-key-0001',
      ]);
      expect(run.code, run.out).to.equal(0);
      expect(run.out).to.contain(
        '✔ live parley, route \'chat-completions\' (JSON) (/v2/generate): 200, mapped to a chat-completions answer, usage {"inputTokens":4,"outputTokens":3,"cachedTokens":0}',
      );
      expect(run.out).to.contain(
        "✔ live parley, route 'chat-completions' (stream) (/v2/generate): 200, a stream of 4 event(s) to its terminal event",
      );
      expect(vendor.requests.slice(-2).map((seen) => seen.headers.authorization)).to.deep.equal([
        'Token live-parley-key-0001',
        'Token live-parley-key-0001',
      ]);
      expect(run.out).not.to.contain('live-parley-key-0001');
    });

    it('runs when the suite fails, and names a terminal event the live stream never sends', async () => {
      const plugins = join(root, 'live');
      await mkdir(join(plugins, 'parley'), { recursive: true });
      await writeFile(join(plugins, 'package.json'), JSON.stringify({ type: 'module' }));
      await writeFile(join(plugins, 'manifest.json'), JSON.stringify({ plugins: ['parley'] }));
      // No recordings (the suite fails), and a stream mapping that waits for 'finish', which Parley never sends.
      await writeFile(
        join(plugins, 'parley', 'index.js'),
        `const tally = (value) => (value && typeof value.prompt === 'number' ? { inputTokens: value.prompt, outputTokens: value.reply, cachedTokens: 0 } : undefined);
export default {
  contract: 1,
  vendor: 'parley',
  routes: {
    'chat-completions': {
      path: '/v2/generate', format: 'chat-completions', auth: { header: 'authorization', prefix: 'Token ' },
      adapter: {
        buildRequest: ({ body, upstreamModel, stream }) => ({ body: { engine: upstreamModel, dialog: body.messages.map((m) => ({ from: 'human', say: m.content })), ...(stream ? { stream: true } : {}) } }),
        mapAnswer: (body) => ({ object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: body.reply.say }, finish_reason: 'stop' }] }),
        stream: { terminal: 'finish', map: () => null },
        usage: { fromBody: (body) => tally(body?.tally), fromStreamEvent: (seen, event) => (event.event === 'end' ? tally(JSON.parse(event.data).tally) ?? seen : seen) },
      },
    },
  },
  models: [{ id: 'quill-2', listed: true, routes: ['chat-completions'], pricing: { input: 1, cachedInput: 1, output: 2 } }],
};
`,
      );
      const run = await cli(['plugin', 'test', plugins, '--upstream', vendor.baseUrl, '--key', 'live-parley-key-0001']);
      expect(run.code).to.equal(1);
      expect(run.out).to.contain('✘ parley: 2 failure(s) in 3 checks');
      expect(run.out).to.contain(
        "✔ live parley, route 'chat-completions' (JSON) (/v2/generate): 200, mapped to a chat-completions answer",
      );
      expect(run.out).to.contain(
        "✘ live parley, route 'chat-completions' (stream) (/v2/generate): format mismatch: 200, 4 event(s) (named chunk, end), but routes.chat-completions.adapter.stream.terminal matched none of them",
      );
    });
  });
});
