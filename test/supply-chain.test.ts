import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Spec, Validation } from '@cyclonedx/cyclonedx-library';
import { expect } from 'chai';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const run = promisify(execFile);

interface LockEntry {
  version?: string;
  name?: string;
  dev?: boolean;
  link?: boolean;
}
interface LsNode {
  version?: string;
  dependencies?: Record<string, LsNode>;
}
interface CdxComponent {
  name: string;
  group?: string;
  version: string;
  purl?: string;
  'bom-ref': string;
}
interface CdxDocument {
  bomFormat: string;
  specVersion: string;
  metadata: { component: CdxComponent };
  components: CdxComponent[];
  dependencies: { ref: string; dependsOn?: string[] }[];
}

const nameAt = (path: string) => path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length);
const idOf = (component: CdxComponent) =>
  `${component.group ? `${component.group}/` : ''}${component.name}@${component.version}`;

/** name@version of the lock file's entries, split by whether `npm ci --omit=dev` installs them (dev flag not true). */
async function lockedPackages() {
  const lock = JSON.parse(await readFile(join(ROOT, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, LockEntry>;
  };
  const production = new Set<string>();
  const development = new Set<string>();
  for (const [path, entry] of Object.entries(lock.packages)) {
    if (path === '' || entry.link) continue;
    (entry.dev === true ? development : production).add(`${entry.name ?? nameAt(path)}@${entry.version}`);
  }
  return { production, development };
}

/**
 * name@version of everything `npm ls --omit=dev --all` shows, the tree flattened (a deduped entry is the same
 * name@version).
 */
async function listedProductionPackages() {
  const { stdout } = await run('npm', ['ls', '--omit=dev', '--all', '--json'], {
    cwd: ROOT,
    maxBuffer: 64 * 1024 * 1024,
  });
  const listed = new Set<string>();
  const walk = (node: LsNode) => {
    for (const [name, child] of Object.entries(node.dependencies ?? {})) {
      if (child.version) listed.add(`${name}@${child.version}`);
      walk(child);
    }
  };
  walk(JSON.parse(stdout) as LsNode);
  return listed;
}

describe('supply chain', function () {
  this.timeout(60_000);

  it('installs for production only what the compiled code needs: no tsx, no esbuild', async () => {
    const { stdout } = await run('npm', ['ls', '--omit=dev', '--all', '--parseable'], { cwd: ROOT });
    const packages = stdout
      .split('\n')
      .filter(Boolean)
      .map((path) => path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length));
    expect(packages).to.include('express');
    expect(
      packages.filter((name) => name === 'tsx' || name === 'esbuild' || name.startsWith('@esbuild/')),
    ).to.deep.equal([]);
  });

  describe('npm run sbom', () => {
    let dir: string;
    let text: string;
    let document: CdxDocument;

    before(async () => {
      dir = await mkdtemp(join(tmpdir(), 'sbom-'));
      // The package.json script itself; a later --output overrides its sbom.cdx.json, so the checkout is left alone.
      await run('npm', ['run', '--silent', 'sbom', '--', '--output', join(dir, 'sbom.cdx.json')], { cwd: ROOT });
      text = await readFile(join(dir, 'sbom.cdx.json'), 'utf8');
      document = JSON.parse(text) as CdxDocument;
    });
    after(async () => {
      if (dir) await rm(dir, { recursive: true, force: true });
    });

    it('writes a CycloneDX 1.5 document that validates against its schema', async () => {
      expect(await new Validation.JsonStrictValidator(Spec.Version.v1dot5).validate(text)).to.equal(null);
      expect(document.bomFormat).to.equal('CycloneDX');
      expect(document.specVersion).to.equal('1.5');
    });

    it('names its root after package.json, not after the checkout folder', async () => {
      const manifest = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as {
        name: string;
        version: string;
      };
      expect(manifest.name).to.equal('model-gateway');
      expect(document.metadata.component.name).to.equal('model-gateway');
      expect(document.metadata.component.version).to.equal(manifest.version);
      expect(document.metadata.component.purl).to.equal(`pkg:npm/model-gateway@${manifest.version}`);
    });

    it("lists every package a production install gets: the lock file's non-dev entries and all of npm ls --omit=dev --all", async () => {
      const { production } = await lockedPackages();
      const components = document.components.map(idOf);
      expect(components.length, 'one component per name@version').to.equal(new Set(components).size);
      expect([...components].sort()).to.deep.equal([...production].sort());
      expect(components).to.include.members([...(await listedProductionPackages())]);
      // The ones `npm sbom --omit dev` dropped because a devDependency reaches them too.
      expect(document.components.map((component) => idOf(component).replace(/@[^@]*$/, ''))).to.include.members([
        'debug',
        'ms',
        '@opentelemetry/api',
        'get-intrinsic',
        'express',
        'undici',
        'ioredis',
        'yup',
        'pino',
      ]);
    });

    it('lists no package that only development needs', async () => {
      const { production, development } = await lockedPackages();
      const names = document.components.map((component) => idOf(component).replace(/@[^@]*$/, ''));
      expect(names).not.to.include.any.members([
        'mocha',
        'chai',
        'typescript',
        'tsx',
        'esbuild',
        '@cyclonedx/cyclonedx-library',
      ]);
      expect(document.components.map(idOf).filter((id) => development.has(id) && !production.has(id))).to.deep.equal(
        [],
      );
    });

    it('gives every component a purl and a dependency graph over its own components', () => {
      for (const component of document.components) {
        const name = `${component.group ? `${component.group}/` : ''}${component.name}`;
        expect(component.purl, idOf(component)).to.equal(
          `pkg:npm/${name.split('/').map(encodeURIComponent).join('/')}@${encodeURIComponent(component.version)}`,
        );
      }
      const refs = new Set([
        document.metadata.component['bom-ref'],
        ...document.components.map((component) => component['bom-ref']),
      ]);
      for (const { ref, dependsOn = [] } of document.dependencies)
        expect(
          [ref, ...dependsOn].filter((each) => !refs.has(each)),
          ref,
        ).to.deep.equal([]);
      const fromRoot =
        document.dependencies.find(({ ref }) => ref === document.metadata.component['bom-ref'])?.dependsOn ?? [];
      expect(fromRoot.map((ref) => ref.replace(/@[^@]*$/, ''))).to.include.members([
        'express',
        'undici',
        'ioredis',
        'yup',
        'pino',
      ]);
    });
  });
});
