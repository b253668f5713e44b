import { expect } from 'chai';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { defineGuardrail, type GuardrailContext } from '../../src/plugins/plugin-contract.ts';
import { loadAllPlugins, loadPluginFolder, loadPlugins, pluginFolders } from '../../src/plugins/load-plugins.ts';
import { isPluginFault, PluginFault } from '../../src/plugins/plugin-fault.ts';
import { validateGuardrail } from '../../src/plugins/validate-guardrail.ts';
import { PluginLoadError } from '../../src/plugins/validate-plugin.ts';

const CONTEXT: GuardrailContext = { phase: 'response', route: 'messages', model: 'beta/beta-fable-5-1', options: {} };
const BUILT_IN = resolve('providers/manifest.json');

/** The fault a call throws (or a failure when it throws none, or something else). */
function faultOf(call: () => unknown): PluginFault {
  try {
    call();
  } catch (error) {
    if (isPluginFault(error)) return error;
    throw error;
  }
  throw new Error('no fault was thrown');
}

describe('guardrail plugins: the declaration, its checks and its faults', () => {
  const valid = defineGuardrail({
    contract: 1,
    guardrail: 'codes',
    maxFindingChars: 12,
    checkOptions: (options) => (options.level === undefined || options.level === 'high' ? [] : ['level must be high']),
    scan: (text) =>
      [...text.matchAll(/CODE-\d{4}/g)].map((match) => ({ start: match.index, end: match.index + match[0].length })),
  });

  it('accepts a declaration made with defineGuardrail, its hooks guarded but behaving as declared', () => {
    const checked = validateGuardrail('codes', valid);
    expect(checked).to.include({ contract: 1, guardrail: 'codes', maxFindingChars: 12 });
    expect(checked.scan('a CODE-1234 b', CONTEXT)).to.deep.equal([{ start: 2, end: 11 }]);
    expect(checked.checkOptions!({ level: 'low' })).to.deep.equal(['level must be high']);
  });

  it('refuses every bad field at once, naming the one probably meant', () => {
    let error: PluginLoadError | undefined;
    try {
      validateGuardrail('codes', {
        guardrail: 'other',
        maxFindingChars: 0,
        scann: () => [],
        checkOptions: 'no',
        scan: 'no',
      });
    } catch (caught) {
      error = caught as PluginLoadError;
    }
    expect(error).to.be.instanceOf(PluginLoadError);
    expect(error!.problems).to.deep.equal([
      "plugin 'codes': scann: unknown field: did you mean 'scan'?",
      "plugin 'codes': contract: missing: declare the contract version the guardrail is written for (this gateway supports 1)",
      `plugin 'codes': guardrail: must equal the guardrail's folder and manifest name 'codes', got "other"`,
      "plugin 'codes': maxFindingChars: must be a whole number from 1 to 65536",
      "plugin 'codes': scan: must be a function (text, context) => findings",
      "plugin 'codes': checkOptions: must be a function (options) => problems",
    ]);
    expect(() => validateGuardrail('codes', 7)).to.throw(PluginLoadError, 'must be the object made by defineGuardrail');
  });

  it("attributes a throw or a wrong result of scan or checkOptions to the guardrail's hook", () => {
    const returning = (result: unknown) => validateGuardrail('codes', { ...valid, scan: () => result });
    const thrown = faultOf(() =>
      validateGuardrail('codes', {
        ...valid,
        scan: () => {
          throw new Error('boom');
        },
      }).scan('x', CONTEXT),
    );
    expect(thrown).to.include({ plugin: 'codes', hook: 'scan', failure: 'threw' });
    expect(thrown.message).to.equal("plugin 'codes', hook 'scan' threw: boom");
    for (const [result, told] of [
      [42, 'returned 42'],
      [[{ start: 0, end: 9 }], 'returned a finding { start: 0, end: 9 } for a text of 3 characters'],
      [[{ start: 2, end: 2 }], 'returned a finding { start: 2, end: 2 }'],
      [[{ start: 0.5, end: 2 }], 'returned a finding { start: 0.5, end: 2 }'],
      [[{ start: 0, end: 1, replacement: 5 }], 'returned a finding whose replacement is 5'],
      [['abc'], 'returned an item that is "abc"'],
    ] as const) {
      const fault = faultOf(() => returning(result).scan('abc', CONTEXT));
      expect(fault, String(told)).to.include({ plugin: 'codes', hook: 'scan', failure: 'returned' });
      expect(fault.message).to.contain(told);
    }
    expect(returning(undefined).scan('abc', CONTEXT)).to.equal(undefined);
    expect(
      faultOf(() =>
        validateGuardrail('codes', {
          ...valid,
          checkOptions: () => {
            throw new Error('bad');
          },
        }).checkOptions!({}),
      ),
    ).to.include({ hook: 'checkOptions', failure: 'threw' });
    expect(
      faultOf(() => validateGuardrail('codes', { ...valid, checkOptions: () => 'fine' }).checkOptions!({})).message,
    ).to.contain('returned "fine"; a guardrail\'s checkOptions returns');
  });

  describe('loaded from a plugins directory beside provider plugins', () => {
    let root: string;
    before(async () => {
      root = await mkdtemp(join(tmpdir(), 'gateway-guardrail-plugins-'));
      await mkdir(join(root, 'codes'), { recursive: true });
      await writeFile(join(root, 'package.json'), JSON.stringify({ private: true, type: 'module' }));
      await writeFile(join(root, 'manifest.json'), JSON.stringify({ plugins: ['codes'] }));
      await writeFile(
        join(root, 'codes', 'index.js'),
        `import { defineGuardrail } from 'model-gateway/plugin';\nexport default defineGuardrail({ contract: 1, guardrail: 'codes', scan: (text) => (text.includes('X') ? [{ start: text.indexOf('X'), end: text.indexOf('X') + 1 }] : []) });\n`,
      );
    });
    after(async () => rm(root, { recursive: true, force: true }));

    it('loads the guardrails apart from the providers, which alone make the catalog', async () => {
      const { providers, guardrails } = await loadAllPlugins(BUILT_IN, [root]);
      expect(guardrails.map((guardrail) => guardrail.guardrail)).to.deep.equal(['codes']);
      expect(guardrails[0]!.scan('aXb', CONTEXT)).to.deep.equal([{ start: 1, end: 2 }]);
      expect(providers.map((plugin) => plugin.vendor)).to.deep.equal(
        (await loadPlugins(BUILT_IN)).map((plugin) => plugin.vendor),
      );
      const folder = pluginFolders(BUILT_IN, [root]).find((candidate) => candidate.name === 'codes')!;
      try {
        await loadPluginFolder(folder);
        expect.fail('a guardrail was loaded as a provider');
      } catch (error) {
        expect((error as Error).message).to.equal(
          `plugin 'codes': guardrail: is a guardrail plugin, not a provider plugin (in ${join(root, 'codes')})`,
        );
      }
    });
  });
});
