import { expect } from 'chai';
import { cp, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runCli } from '../../../src/cli/main.ts';
import { formatFailure, runConformance } from '../../../tools/conformance/run-conformance.ts';

const manifestPath = fileURLToPath(new URL('../../../providers/manifest.json', import.meta.url));
const vendorUsage = fileURLToPath(new URL('../../fixtures/vendor-usage-plugins', import.meta.url));
const ROOT = fileURLToPath(new URL('../../..', import.meta.url));

/** A copy of the billed plugin outside the repository, to break on purpose. */
async function copyOfBilled(): Promise<string> {
  const copy = await mkdtemp(join(tmpdir(), 'gateway-conformance-vendor-usage-'));
  await cp(vendorUsage, copy, { recursive: true });
  await writeFile(join(copy, 'package.json'), JSON.stringify({ type: 'module' }));
  await mkdir(join(copy, 'node_modules'));
  await symlink(ROOT, join(copy, 'node_modules', 'model-gateway'), 'dir');
  return copy;
}

describe('runConformance on a vendor usage shape, from recorded fixtures', function () {
  this.timeout(60_000);

  it('passes the billed plugin: its extractor reads meta.billed from the recorded stream and JSON answer', async () => {
    const report = await runConformance({ manifestPath, pluginPath: [vendorUsage], vendors: ['billed'] });
    expect(
      [...report.failures, ...report.plugins.flatMap((plugin) => plugin.failures)].map(formatFailure),
    ).to.deep.equal([]);
    expect(report.ok).to.equal(true);
    // catalog; billed-1: native chat + chat-completions JSON and stream; billed-2: chat-completions JSON and
    // stream; the alias: JSON and stream; the stream fixture replayed for both models.
    expect(report.plugins[0]!.checks).to.equal(1 + 3 + 2 + 2 + 2);
    const notes = report.plugins[0]!.notes;
    expect(notes).to.include(
      "model 'billed/billed-1', native chat: usage: from recorded fixture 'billed-body' (the plugin's usageExtractors[0] reads the vendor's own shape, which the standard mock does not speak)",
    );
    expect(notes).to.include(
      "model 'billed/billed-2', chat-completions (stream): usage: from recorded fixture 'billed-stream' (the plugin's usageExtractors[0] reads the vendor's own shape, which the standard mock does not speak)",
    );
    expect(notes).to.have.length(5);
  });

  it('says in plugin test which usage checks came from recorded fixtures', async () => {
    let out = '';
    const code = await runCli(
      ['plugin', 'test', join(vendorUsage, 'billed')],
      { out: (text) => (out += text), err: (text) => (out += text) },
      {},
    );
    expect(code, out).to.equal(0);
    expect(out).to.match(/✔ billed: \d+ checks passed/);
    expect(out).to.include(
      "    model 'billed/billed-2', chat-completions (stream): usage: from recorded fixture 'billed-stream'",
    );
  });

  it('fails the same plugin with a wrong extractor, naming each fixture and the expected and recorded usage', async () => {
    const copy = await copyOfBilled();
    try {
      // Broken: in and out swapped.
      await writeFile(
        join(copy, 'billed', 'usage.ts'),
        `import type { TokenUsage, UsageExtractor } from 'model-gateway/plugin';
const swapped = (answer: any): TokenUsage | undefined =>
  answer?.meta?.billed ? { inputTokens: answer.meta.billed.out, outputTokens: answer.meta.billed.in, cachedTokens: answer.meta.billed.cached ?? 0 } : undefined;
export const billedUsage: UsageExtractor = {
  fromBody: swapped,
  fromStreamEvent: (seen, event) => (event.data.includes('"billed"') ? (swapped(JSON.parse(event.data)) ?? seen) : seen),
};
`,
      );
      const report = await runConformance({ manifestPath, pluginPath: [copy], vendors: ['billed'] });
      expect(report.ok).to.equal(false);
      const body = `usage from recorded fixture 'billed-body': the plugin's usageExtractors[0] recorded {"inputTokens":9,"outputTokens":15,"cachedTokens":0}, but the fixture says {"inputTokens":15,"outputTokens":9,"cachedTokens":0}`;
      expect(report.plugins[0]!.failures.map(formatFailure)).to.deep.equal([
        `plugin 'billed', model 'billed/billed-1', rule 'usage': native chat with 'billed/billed-1': ${body}`,
        `plugin 'billed', model 'billed/billed-1', rule 'usage': chat-completions with 'billed/billed-1': ${body}`,
        `plugin 'billed', model 'billed/billed-2', rule 'usage': chat-completions with 'billed/billed-2': ${body}`,
        `plugin 'billed', model 'billed/billed-1', rule 'usage': fixture 'billed-stream' on chat-completions: recorded {"inputTokens":7,"outputTokens":12,"cachedTokens":4} from the recorded stream, the fixture says {"inputTokens":12,"outputTokens":7,"cachedTokens":4}`,
      ]);
    } finally {
      await rm(copy, { recursive: true, force: true });
    }
  });

  it('names a recorded JSON answer without its body or its usage, or on a route the model does not reach', async () => {
    const copy = await copyOfBilled();
    try {
      const fixtures = join(copy, 'billed', '__fixtures__');
      const meta = join(fixtures, 'billed-body.fixture.json');
      await writeFile(meta, JSON.stringify({ route: 'chat-completions', model: 'billed/billed-1', stream: false }));
      const noUsage = await runConformance({ manifestPath, pluginPath: [copy], vendors: ['billed'] });
      // The well-formed stream fixture still counts; JSON answers go back to the standard mock (and fail).
      expect(noUsage.plugins[0]!.failures.map(formatFailure)[0]).to.equal(
        `plugin 'billed', rule 'fixture': ${meta}: usage: a recorded JSON answer must give the usage the plugin must read from it`,
      );
      expect(
        noUsage.plugins[0]!.failures.map(formatFailure).filter((message) => message.includes('(stream)')),
      ).to.deep.equal([]);
      await writeFile(
        meta,
        JSON.stringify({
          route: 'responses',
          model: 'billed/billed-1',
          stream: false,
          usage: { inputTokens: 15, outputTokens: 9, cachedTokens: 0 },
        }),
      );
      const stray = await runConformance({ manifestPath, pluginPath: [copy], vendors: ['billed'] });
      expect(stray.plugins[0]!.failures.map(formatFailure)[0]).to.equal(
        "plugin 'billed', model 'billed/billed-1', rule 'fixture': fixture 'billed-body' on responses: 'responses' is not a route of the plugin",
      );
      await rm(join(fixtures, 'billed-body.body.json'));
      const noBody = await runConformance({ manifestPath, pluginPath: [copy], vendors: ['billed'] });
      expect(noBody.plugins[0]!.failures.map(formatFailure)[0]).to.equal(
        `plugin 'billed', rule 'fixture': ${meta}: billed-body.body.json is missing beside it ("stream": false: a recorded JSON answer)`,
      );
    } finally {
      await rm(copy, { recursive: true, force: true });
    }
  });

  it('checks the plugin against the standard mock upstream when it ships no fixture', async () => {
    const copy = await copyOfBilled();
    try {
      await rm(join(copy, 'billed', '__fixtures__'), { recursive: true });
      const report = await runConformance({ manifestPath, pluginPath: [copy], vendors: ['billed'] });
      expect(report.ok).to.equal(false);
      expect(report.plugins[0]!.notes).to.deep.equal([]);
      // The mock's standard usage object is not the vendor's meta.billed: JSON answers carry no usage the
      // extractor reads (502), streams are recorded with an estimate.
      const messages = report.plugins[0]!.failures.map(formatFailure);
      expect(messages[0]).to.equal(
        `plugin 'billed', model 'billed/billed-1', rule 'routing': native chat with 'billed/billed-1': answered 502: {"detail":"Upstream provider 'billed' answered without usage metadata; the request cannot be accounted"}`,
      );
      expect(messages).to.include(
        `plugin 'billed', model 'billed/billed-2', rule 'usage': chat-completions (stream) with 'billed/billed-2': the plugin's usageExtractors[0] recorded {"inputTokens":7,"outputTokens":11,"cachedTokens":0}, but the upstream reported {"inputTokens":15,"outputTokens":12,"cachedTokens":4}`,
      );
      expect(messages.every((message) => !message.includes('recorded fixture'))).to.equal(true);
    } finally {
      await rm(copy, { recursive: true, force: true });
    }
  });
});
