// The image's build stage: cuts the production node_modules down to the files the compiled gateway can load.
//
//   node scripts/prune-node-modules.mjs trace --output FILE   (with the development dependencies installed)
//   npm prune --omit=dev
//   node scripts/prune-node-modules.mjs prune --files FILE
//
// `trace` follows every module of dist/ and bin/ (the gateway, its CLI, workers, plugins and the bundled mock
// upstream) through its imports and requires into node_modules with @vercel/nft, resolving `exports` as Node 20
// does (the `import` or the `require` branch as each call asks, `main` ignored where `exports` exist), with the
// loads it does not follow itself added (CREATE_REQUIRE, RUNTIME_FILES below). `prune` then deletes every file of
// node_modules that is not on that list, except each package's package.json (module type, `exports`, `imports`;
// what the SBOM and scanners read) and its license and notice files. So what goes is what no runtime reaches:
// source maps, type declarations, TypeScript sources, READMEs and tests, the module-system builds `exports` does
// not pick (gpt-tokenizer keeps its ESM o200k_base encoding only), and packages only types need (kept as their
// package.json and license). Every package stays at its path, so the SBOM still lists what the image holds.
import {
  existsSync,
  lstatSync,
  readdirSync,
  readFileSync,
  rmdirSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative, sep } from 'node:path';
import { parseArgs } from 'node:util';

// The project whose node_modules is traced and pruned: the working directory (the build stage's /src).
const root = process.cwd();
const MODULES = join(root, 'node_modules');

// `createRequire(import.meta.url)('x')` and `createRequire(import.meta.url).resolve('x')` (lazy loads of CommonJS
// packages, and the paths of files next to an entry) are past what @vercel/nft follows: each such specifier in a
// compiled module is resolved from it and traced on (require.resolve needs the entry to exist even where it is
// not loaded). A literal it cannot resolve here is left alone: no production install has it either.
const CREATE_REQUIRE = /createRequire\(import\.meta\.url\)(?:\.resolve)?\(\s*(['"])([^'"]+)\1\s*\)/g;

/**
 * Files of node_modules the gateway reads that no module imports: `from` is the compiled file that reads it and
 * must still name `names`, so that a change there fails the build instead of pruning what it needs; `file` is
 * found next to the entry `specifier` resolves to.
 */
const RUNTIME_FILES = [
  {
    from: 'dist/src/control-plane/account/account-router.js',
    names: "'chart.umd.min.js'",
    specifier: 'chart.js',
    file: 'chart.umd.min.js',
  },
];

// Kept in every package whatever the trace says: the license terms travel with the code.
const LICENSE = /^(licen[cs]e|notice|copying|authors)([.-].*)?$/i;

const fail = (message) => {
  console.error(`prune-node-modules: ${message}`);
  process.exit(1);
};

/** Every file under `dir` (symbolic links included, not followed), as paths relative to the project root. */
function filesUnder(dir, found = []) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) filesUnder(path, found);
    else found.push(relative(root, path).split(sep).join('/'));
  }
  return found;
}

/** `node_modules/<name>` or `node_modules/@scope/name`, nested installs included, of a path in node_modules. */
function packageOf(path) {
  const match = /^(.*node_modules\/(?:@[^/]+\/)?[^/]+)\//.exec(path);
  return match ? match[1] : undefined;
}

async function trace(output) {
  if (!process.features.require_module) fail(`Node ${process.version} has no require(esm): the trace assumes it`);
  const { nodeFileTrace } = await import('@vercel/nft');
  const entries = [];
  for (const dir of ['dist', 'bin']) {
    for (const path of filesUnder(join(root, dir))) if (/\.(m|c)?js$/.test(path)) entries.push(join(root, path));
  }
  const required = new Set();
  for (const entry of entries) {
    for (const [, , specifier] of readFileSync(entry, 'utf8').matchAll(CREATE_REQUIRE)) {
      try {
        required.add(createRequire(entry).resolve(specifier));
      } catch {
        console.log(`not installed: ${specifier} (${relative(root, entry)})`);
      }
    }
  }
  const extra = [];
  for (const load of RUNTIME_FILES) {
    const from = join(root, load.from);
    if (!existsSync(from)) fail(`${load.from} is missing: build first, or update RUNTIME_FILES`);
    if (!readFileSync(from, 'utf8').includes(load.names)) {
      fail(`${load.from} no longer names ${load.names}: update RUNTIME_FILES`);
    }
    const file = join(dirname(createRequire(from).resolve(load.specifier)), load.file);
    if (!existsSync(file)) fail(`${relative(root, file)} (${load.from}) does not exist`);
    extra.push(relative(root, file).split(sep).join('/'));
  }
  entries.push(...required);
  const { fileList } = await nodeFileTrace(entries, {
    base: root,
    processCwd: root,
    // Node's own conditions: `import` or `require` is added per call, as the call is an import or a require;
    // `module-sync` is on in Node 20.19 and later, where require() loads ES modules.
    conditions: ['node', 'module-sync'],
    exportsOnly: true,
    // Only node_modules is pruned; the project's own sources and tests are no part of the image.
    ignore: (path) => !/^(node_modules|dist|bin)\//.test(path),
  });
  const files = [...new Set([...fileList, ...extra])].filter((path) => path.startsWith('node_modules/')).sort();

  // A production dependency that nothing reaches is loaded in a way the trace missed, or no longer used.
  const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  const reached = new Set(files.filter((path) => !path.endsWith('/package.json')).map(packageOf));
  const unreached = Object.keys(manifest.dependencies ?? {}).filter((name) => !reached.has(`node_modules/${name}`));
  if (unreached.length > 0) {
    fail(`no module of dist/ reaches ${unreached.join(', ')}: see how it is loaded, or drop it`);
  }
  writeFileSync(output, `${JSON.stringify({ files }, null, 1)}\n`);
  console.log(`traced ${entries.length} entry points: ${files.length} files of node_modules can be loaded`);
}

function prune(listFile) {
  const keep = new Set(JSON.parse(readFileSync(listFile, 'utf8')).files);
  if (![...keep].some((path) => path.startsWith('node_modules/'))) fail(`${listFile} lists no file of node_modules`);
  const sizes = new Map();
  const count = (path, bytes, kept) => {
    const name = (packageOf(path) ?? path).replace(/^node_modules\//, '');
    const top = name.split('/node_modules/')[0];
    const entry = sizes.get(top) ?? { before: 0, after: 0 };
    entry.before += bytes;
    if (kept) entry.after += bytes;
    sizes.set(top, entry);
  };
  for (const path of filesUnder(MODULES)) {
    const full = join(root, path);
    const stat = lstatSync(full);
    const name = path.slice(path.lastIndexOf('/') + 1);
    const manifest = name === 'package.json' && path === `${packageOf(path)}/package.json`;
    const listed = keep.has(path) || manifest || LICENSE.test(name);
    const kept = !stat.isSymbolicLink() && packageOf(path) !== undefined && listed;
    count(path, stat.size, kept);
    if (!kept) unlinkSync(full);
  }
  const removeEmpty = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.isDirectory()) removeEmpty(join(dir, entry.name));
    }
    if (dir !== MODULES && readdirSync(dir).length === 0) rmdirSync(dir);
  };
  removeEmpty(MODULES);

  const rows = [...sizes].sort((a, b) => b[1].after - a[1].after);
  const total = rows.reduce((sum, [, size]) => ({ before: sum.before + size.before, after: sum.after + size.after }), {
    before: 0,
    after: 0,
  });
  const mb = (bytes) => (bytes / 1e6).toFixed(2).padStart(7);
  console.log(`node_modules ${mb(total.before)} MB -> ${mb(total.after)} MB (file contents); largest packages after:`);
  for (const [name, size] of rows.slice(0, 25)) {
    console.log(`  ${mb(size.before)} -> ${mb(size.after)} MB  ${name}`);
  }
}

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: { output: { type: 'string' }, files: { type: 'string' } },
});
if (positionals[0] === 'trace' && values.output) await trace(values.output);
else if (positionals[0] === 'prune' && values.files) {
  if (!statSync(MODULES).isDirectory()) fail('no node_modules here');
  prune(values.files);
} else fail('usage: prune-node-modules.mjs trace --output FILE | prune --files FILE');
