import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Spec, Validation } from '@cyclonedx/cyclonedx-library';
import { expect } from 'chai';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const run = promisify(execFile);

describe('supply chain', function () {
  this.timeout(60_000);

  it('installs for production only what the compiled code needs: no tsx, no esbuild', async () => {
    const { stdout } = await run('npm', ['ls', '--omit=dev', '--all', '--parseable'], { cwd: ROOT });
    const packages = stdout.split('\n').filter(Boolean).map((path) => path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length));
    expect(packages).to.include('express');
    expect(packages.filter((name) => name === 'tsx' || name === 'esbuild' || name.startsWith('@esbuild/'))).to.deep.equal([]);
  });

  it('npm run sbom writes a CycloneDX document that validates against its schema and lists the production dependencies', async () => {
    await run('npm', ['run', '--silent', 'sbom'], { cwd: ROOT });
    const text = await readFile(join(ROOT, 'sbom.cdx.json'), 'utf8');
    const problems = await new Validation.JsonStrictValidator(Spec.Version.v1dot5).validate(text);
    expect(problems).to.equal(null);
    const document = JSON.parse(text) as { bomFormat: string; components: { name: string; purl?: string }[] };
    expect(document.bomFormat).to.equal('CycloneDX');
    const names = document.components.map((component) => component.name);
    expect(names).to.include.members(['express', 'undici', 'ioredis', 'yup', 'pino']);
    expect(names).not.to.include('tsx');
    expect(names).not.to.include('esbuild');
  });
});
