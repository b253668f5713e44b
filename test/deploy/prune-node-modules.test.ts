import { expect } from 'chai';
import { execFile } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { promisify } from 'node:util';

// The image's build stage runs this script (Dockerfile); the container tests run the pruned image with every
// feature on. These check the trace and the pruning themselves, fast and on any machine.
const ROOT = join(import.meta.dirname, '..', '..');
const SCRIPT = join(ROOT, 'scripts', 'prune-node-modules.mjs');
const run = promisify(execFile);

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => !entry.isDirectory())
    .map((entry) => relative(dir, join(entry.parentPath, entry.name)))
    .sort();
}

describe('scripts/prune-node-modules.mjs: node_modules cut to what the compiled gateway can load', function () {
  this.timeout(180_000);
  let work: string;
  let files: string[];
  const of = (name: string) => files.filter((path) => path.startsWith(`node_modules/${name}/`));

  before(async function () {
    if (!existsSync(join(ROOT, 'dist', 'src', 'main.js'))) throw new Error('dist/ is missing: run npm run build first');
    work = mkdtempSync(join(tmpdir(), 'prune-node-modules-'));
    await run(process.execPath, [SCRIPT, 'trace', '--output', join(work, 'files.json')], { cwd: ROOT });
    files = (JSON.parse(readFileSync(join(work, 'files.json'), 'utf8')) as { files: string[] }).files;
  });

  after(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it("keeps gpt-tokenizer's ESM o200k_base encoding and none of its other builds or encodings' tables", () => {
    const tokenizer = of('gpt-tokenizer');
    expect(tokenizer).to.include.members([
      'node_modules/gpt-tokenizer/esm/encoding/o200k_base.js',
      'node_modules/gpt-tokenizer/esm/bpeRanks/o200k_base.js',
      'node_modules/gpt-tokenizer/esm/GptEncoding.js',
      'node_modules/gpt-tokenizer/esm/package.json',
    ]);
    const elsewhere = tokenizer.filter((path) => !/^node_modules\/gpt-tokenizer\/(esm\/|package\.json$)/.test(path));
    expect(elsewhere).to.deep.equal([]);
    const encodings = tokenizer.filter((path) => /\/(bpeRanks|encoding)\//.test(path));
    expect(encodings.filter((path) => !path.endsWith('/o200k_base.js'))).to.deep.equal([]);
  });

  it('keeps no source map, type declaration, TypeScript source, document or test', () => {
    expect(files.filter((path) => /\.(map|d\.[cm]?ts|[cm]?ts|md|markdown)$/i.test(path))).to.deep.equal([]);
    expect(files.filter((path) => /\/(tests?|__tests__|examples?)\//.test(path))).to.deep.equal([]);
  });

  it('keeps the one build of a package that its exports (or main) resolve to', () => {
    const telemetry = files.filter((path) => path.startsWith('node_modules/@opentelemetry/'));
    expect(telemetry.length).to.be.greaterThan(100);
    // main: build/src (CommonJS); module and esnext builds are never loaded by Node.
    expect(telemetry.filter((path) => /\/build\/(esm|esnext)\//.test(path))).to.deep.equal([]);
    // exports: "import" ./dist/index.js for yaml; its browser build is never loaded.
    expect(of('yaml').filter((path) => path.includes('/browser/'))).to.deep.equal([]);
    // exports with module-sync (Node 20.19 and later) picks require.mjs even for require().
    expect(of('async-function')).to.include('node_modules/async-function/require.mjs');
  });

  it('keeps what createRequire loads or locates (ioredis, chart.js) and the script the account page serves', () => {
    expect(of('ioredis')).to.include('node_modules/ioredis/built/index.js');
    expect(of('@ioredis/commands')).to.include('node_modules/@ioredis/commands/built/commands.json');
    // The served file, and the entry that require.resolve('chart.js') finds it by (which must exist).
    const chart = of('chart.js');
    expect(chart).to.include.members([
      'node_modules/chart.js/dist/chart.umd.min.js',
      'node_modules/chart.js/dist/chart.cjs',
    ]);
    expect(chart.filter((path) => /\.m?js$/.test(path) && !path.endsWith('.min.js'))).to.deep.equal([]);
  });

  it('reaches every production dependency of package.json', () => {
    const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
    };
    const unreached = Object.keys(manifest.dependencies).filter(
      (name) => !of(name).some((path) => !path.endsWith(`${name}/package.json`)),
    );
    expect(unreached).to.deep.equal([]);
  });

  it("prunes a node_modules to the list, keeping each package's own package.json and its license files", async () => {
    const project = join(work, 'project');
    const put = (path: string, text = 'x') => {
      mkdirSync(dirname(join(project, path)), { recursive: true });
      writeFileSync(join(project, path), text);
    };
    for (const path of [
      'node_modules/a/package.json',
      'node_modules/a/index.js',
      'node_modules/a/index.js.map',
      'node_modules/a/README.md',
      'node_modules/a/LICENSE',
      'node_modules/a/types/index.d.ts',
      'node_modules/a/node_modules/c/package.json',
      'node_modules/a/node_modules/c/index.js',
      'node_modules/a/node_modules/c/NOTICE.md',
      'node_modules/@s/b/package.json',
      'node_modules/@s/b/LICENSE.txt',
      'node_modules/@s/b/esm/index.js',
      'node_modules/@s/b/esm/package.json',
      'node_modules/@s/b/cjs/index.js',
      'node_modules/@s/b/cjs/package.json',
      'node_modules/.package-lock.json',
    ])
      put(path);
    mkdirSync(join(project, 'node_modules', '.bin'));
    symlinkSync('../a/index.js', join(project, 'node_modules', '.bin', 'a'));
    const list = join(work, 'list.json');
    const listed = ['node_modules/a/index.js', 'node_modules/@s/b/esm/index.js', 'node_modules/@s/b/esm/package.json'];
    writeFileSync(list, JSON.stringify({ files: listed }));
    await run(process.execPath, [SCRIPT, 'prune', '--files', list], { cwd: project });
    expect(filesUnder(join(project, 'node_modules'))).to.deep.equal(
      [
        '@s/b/LICENSE.txt',
        '@s/b/esm/index.js',
        '@s/b/esm/package.json',
        '@s/b/package.json',
        'a/LICENSE',
        'a/index.js',
        'a/node_modules/c/NOTICE.md',
        'a/node_modules/c/package.json',
        'a/package.json',
      ].sort(),
    );
    // Emptied folders go too.
    expect(existsSync(join(project, 'node_modules', 'a', 'types'))).to.equal(false);
    expect(existsSync(join(project, 'node_modules', '@s', 'b', 'cjs'))).to.equal(false);
    expect(existsSync(join(project, 'node_modules', '.bin'))).to.equal(false);
  });

  it('refuses a list without a file of node_modules rather than empty the install', async () => {
    const project = join(work, 'refused');
    mkdirSync(join(project, 'node_modules', 'a'), { recursive: true });
    writeFileSync(join(project, 'node_modules', 'a', 'index.js'), 'x');
    writeFileSync(join(work, 'empty.json'), JSON.stringify({ files: [] }));
    const outcome = await run(process.execPath, [SCRIPT, 'prune', '--files', join(work, 'empty.json')], {
      cwd: project,
    }).then(
      () => undefined,
      (error: { code: number; stderr: string }) => error,
    );
    expect(outcome?.code).to.equal(1);
    expect(outcome?.stderr).to.include('lists no file of node_modules');
    expect(existsSync(join(project, 'node_modules', 'a', 'index.js'))).to.equal(true);
  });
});
