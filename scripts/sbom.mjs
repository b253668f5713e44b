// `npm run sbom`: writes a CycloneDX 1.5 JSON software bill of materials of the production install.
//
// "Production install" means exactly what `npm ci --omit=dev` installs: every entry of package-lock.json's
// "packages" whose `dev` flag is not true (devOptional and optional entries included). The lock file is the
// source of truth, so the document is the same on every machine with the same lock file. `npm sbom --omit dev`
// is not used because it drops any package that a devDependency also reaches, even when a production dependency
// needs it (npm/cli#7909): debug, ms, get-intrinsic, @opentelemetry/api and others went missing.
//
// Usage: node scripts/sbom.mjs [--output FILE]   (stdout without --output; the last --output wins)
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Contrib, Enums, Models, SPDX, Serialize, Spec } from '@cyclonedx/cyclonedx-library';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({ options: { output: { type: 'string', short: 'o' } } });
const readJson = (path) => JSON.parse(readFileSync(path, 'utf8'));

const manifest = readJson(join(root, 'package.json'));
const lock = readJson(join(root, 'package-lock.json'));
if (!(lock.lockfileVersion >= 2) || !lock.packages)
  throw new Error('package-lock.json has no "packages" section (lockfileVersion 2 or 3 needed)');

// A light check that a license string is an SPDX expression of known ids; anything else is kept as a named license.
const spdxExpressionValidate = (text) => {
  const tokens = text.replace(/[()]/g, ' ').split(/\s+/).filter(Boolean);
  let depth = 0;
  for (const char of text)
    if ((depth += char === '(' ? 1 : char === ')' ? -1 : 0) < 0) throw new Error('unbalanced parentheses');
  if (depth !== 0 || tokens.length === 0) throw new Error('not an SPDX expression');
  tokens.forEach((token, index) => {
    if (['AND', 'OR', 'WITH'].includes(token) || tokens[index - 1] === 'WITH') return;
    if (!SPDX.isSupportedSpdxId(token.replace(/\+$/, '')) && !/^(DocumentRef-[\w.-]+:)?LicenseRef-[\w.-]+$/.test(token))
      throw new Error(`unknown license id ${token}`);
  });
};
const extRefFactory = new Contrib.FromNodePackageJson.Factories.ExternalReferenceFactory();
const componentBuilder = new Contrib.FromNodePackageJson.Builders.ComponentBuilder(
  extRefFactory,
  new Contrib.License.Factories.LicenseFactory(spdxExpressionValidate),
);

// pkg:npm/%40scope/name@version, as https://github.com/package-url/purl-spec/blob/main/types-doc/npm-definition.md has
// it.
const purlOf = (name, version) =>
  `pkg:npm/${name.split('/').map(encodeURIComponent).join('/')}@${encodeURIComponent(version)}`;
const nameAt = (path) => path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length);

// The production entries of the lock file, keyed by path.
const production = new Map();
for (const [path, entry] of Object.entries(lock.packages)) {
  if (path === '' || entry.dev === true) continue;
  if (entry.link || !path.startsWith('node_modules/'))
    throw new Error(`${path}: linked and workspace packages are not supported by scripts/sbom.mjs`);
  if (typeof entry.version !== 'string') throw new Error(`${path}: no version in package-lock.json`);
  production.set(path, { path, entry, name: entry.name ?? nameAt(path) });
}

// Node's resolution over the lock file's paths: the nearest node_modules/<name> from `from` up to the root.
const resolveFrom = (from, name) => {
  for (
    let base = from;
    ;
    base = base.includes('/node_modules/') ? base.slice(0, base.lastIndexOf('/node_modules/')) : ''
  ) {
    const candidate = `${base ? `${base}/` : ''}node_modules/${name}`;
    if (lock.packages[candidate]) return candidate;
    if (base === '') return undefined;
  }
};

// The installed package.json gives the description, links and license when it is the locked version;
// the lock file's own record (which carries the license too) stands in when node_modules is absent.
const describe = ({ path, entry, name }) => {
  const installed = join(root, path, 'package.json');
  const data = existsSync(installed) ? readJson(installed) : undefined;
  return data?.version === entry.version
    ? { ...data, name }
    : { name, version: entry.version, license: entry.license, engines: entry.engines };
};

// One component per name@version, however many places the lock file puts it.
const components = new Map();
const componentOfPath = new Map();
for (const record of production.values()) {
  const ref = `${record.name}@${record.entry.version}`;
  let component = components.get(ref);
  if (!component) {
    component = componentBuilder.makeComponent(describe(record));
    if (!component) throw new Error(`${record.path}: cannot describe ${ref}`);
    component.version = record.entry.version;
    component.bomRef.value = ref;
    component.purl = purlOf(record.name, record.entry.version);
    component.scope = Enums.ComponentScope.Required;
    if (record.entry.integrity) {
      const [algorithm, content] = Contrib.FromNodePackageJson.Utils.parsePackageIntegrity(record.entry.integrity);
      component.hashes.set(algorithm, content);
    }
    components.set(ref, component);
  }
  componentOfPath.set(record.path, component);
}

const rootComponent = componentBuilder.makeComponent(manifest, Enums.ComponentType.Application);
rootComponent.bomRef.value = `${manifest.name}@${manifest.version}`;
rootComponent.purl = purlOf(manifest.name, manifest.version);
componentOfPath.set('', rootComponent);

// The dependency graph. A required dependency must resolve to a production entry; an optional or peer one
// counts only when it is installed for production.
for (const [path, component] of componentOfPath) {
  const entry = lock.packages[path];
  const required = { ...entry.dependencies };
  const optional = { ...entry.optionalDependencies, ...entry.peerDependencies };
  for (const name of new Set([...Object.keys(required), ...Object.keys(optional)])) {
    const target = resolveFrom(path, name);
    const dependency = target === undefined ? undefined : componentOfPath.get(target);
    if (dependency) component.dependencies.add(dependency.bomRef);
    else if (name in required && !(name in optional))
      throw new Error(
        `${path || manifest.name}: dependency ${name} is not a production entry of package-lock.json; run npm install`,
      );
  }
}

const bom = new Models.Bom({ serialNumber: `urn:uuid:${randomUUID()}` });
bom.metadata.timestamp = new Date();
bom.metadata.component = rootComponent;
const toolManifest = readJson(join(root, 'node_modules/@cyclonedx/cyclonedx-library/package.json'));
bom.metadata.tools.components.add(componentBuilder.makeComponent(toolManifest));
for (const component of components.values()) bom.components.add(component);

const serializer = new Serialize.JsonSerializer(new Serialize.JSON.Normalize.Factory(Spec.Spec1dot5));
const text = `${serializer.serialize(bom, { sortLists: true, space: 2 })}\n`;
if (args.output) {
  // Write beside the target and rename, so a failed run never leaves a truncated SBOM behind.
  const output = resolve(args.output);
  writeFileSync(`${output}.tmp`, text);
  renameSync(`${output}.tmp`, output);
} else {
  process.stdout.write(text);
}
