import { expect } from 'chai';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli } from '../../src/cli/main.ts';

async function run(argv: string[], env: NodeJS.ProcessEnv = {}) {
  let out = '';
  let err = '';
  const code = await runCli(argv, { out: (text) => (out += text), err: (text) => (err += text) }, env);
  return { code, out, err };
}

describe('model-gateway config check', () => {
  let dir: string;
  beforeEach(async () => (dir = await mkdtemp(join(tmpdir(), 'gateway-config-check-'))));
  afterEach(async () => rm(dir, { recursive: true, force: true }));

  it('exits 0 with a one-line summary for a good file', async () => {
    const file = join(dir, 'good.yaml');
    await writeFile(file, 'aliases:\n  beta-latest: beta/beta-opus-5\nrateLimit:\n  max: 50\n  windowMs: 30000\n');
    const result = await run(['config', 'check', file]);
    expect(result.err).to.equal('');
    expect(result.code).to.equal(0);
    expect(result.out.trimEnd().split('\n')).to.have.length(1);
    expect(result.out)
      .to.contain('valid')
      .and.to.contain('1 alias override')
      .and.to.contain('rate limit 50 per 30000 ms')
      .and.to.match(/version [0-9a-f]{12}/);
  });

  it('checks the checkout’s own config/gateway.yaml when no file is named', async () => {
    const result = await run(['config', 'check']);
    expect(result.code, result.err).to.equal(0);
    expect(result.out).to.contain('config/gateway.yaml: valid');
  });

  it('exits 1 listing every schema problem with its field path', async () => {
    const file = join(dir, 'bad.yaml');
    await writeFile(
      file,
      'server:\n  port: -1\n  bodyLimit: lots\n  colour: red\nlogLevel: loud\nrateLimit:\n  max: 0\nnonsense: 1\n',
    );
    const result = await run(['config', 'check', file]);
    expect(result.code).to.equal(1);
    expect(result.out).to.equal('');
    for (const field of ['server.port', 'server.bodyLimit', 'logLevel', 'rateLimit.max'])
      expect(result.err, field).to.contain(field);
    expect(result.err)
      .to.contain('server.colour is not a known setting')
      .and.to.contain('nonsense is not a known setting');
  });

  it('exits 1 listing every alias whose target is unknown or does not serve its routes', async () => {
    const file = join(dir, 'aliases.yaml');
    await writeFile(file, 'aliases:\n  beta-latest: beta/no-such-model\n  alpha-latest: beta/beta-opus-5\n');
    const result = await run(['config', 'check', file]);
    expect(result.code).to.equal(1);
    expect(result.err).to.contain('aliases.beta-latest').and.to.contain('aliases.alpha-latest');
  });

  it('exits 1 listing a schema problem, an unknown alias target and a target that does not serve its alias’s routes, each by line and field', async () => {
    const file = join(dir, 'three.yaml');
    await writeFile(
      file,
      'rateLimit:\n  max: -1\naliases:\n  beta-latest: beta/no-such-model\n  alpha-latest: beta/beta-opus-5\nfallbacks:\n  alpha/gen-6-astra: [nope/model]\n',
    );
    const result = await run(['config', 'check', file]);
    expect(result.code).to.equal(1);
    expect(result.out).to.equal('');
    const lines = result.err.trimEnd().split('\n');
    expect(lines[0]).to.equal(`${file}: invalid`);
    expect(lines.slice(1)).to.have.length(4);
    expect(lines[1]).to.equal(`  ${file} line 2, column 3: rateLimit.max must be a positive number`);
    expect(lines[2]).to.match(
      new RegExp(`^  ${file} line 4, column 3: aliases\\.beta-latest: .*'beta/no-such-model' is not a known model`),
    );
    expect(lines[3]).to.match(
      new RegExp(
        `^  ${file} line 5, column 3: aliases\\.alpha-latest: .*does not serve the alias's route\\(s\\) responses`,
      ),
    );
    expect(lines[4]).to.match(
      new RegExp(`^  ${file} line 7, column 23: fallbacks: .*'nope/model' is not a canonical model ID`),
    );
  });

  it("exits 1 naming an endpoint's bad auth by its field path, without quoting the file", async () => {
    const file = join(dir, 'endpoint-auth.yaml');
    await writeFile(
      file,
      [
        'providers:',
        '  kappa:',
        '    endpoints:',
        '      - name: main',
        '        baseUrl: https://kappa.example/v1',
        '        apiKey: sk-upstream-TOPSECRET-1',
        '        auth: { header: X-Kappa-Key }',
        '      - name: region',
        '        baseUrl: https://eu.kappa.example/v1',
        '        apiKey: sk-upstream-TOPSECRET-2',
        '        auth: { query: key, prefix: sk-upstream-TOPSECRET-2 }',
        '',
      ].join('\n'),
    );
    const result = await run(['config', 'check', file]);
    expect(result.code).to.equal(1);
    expect(result.out).to.equal('');
    expect(result.err.trimEnd().split('\n')).to.deep.equal([
      `${file}: invalid`,
      `  ${file} line 11, column 29: providers.kappa.endpoints[1].auth.prefix: only a header credential takes a prefix`,
    ]);
    expect(result.err).not.to.contain('TOPSECRET');
    await writeFile(file, (await readFile(file, 'utf8')).replace(', prefix: sk-upstream-TOPSECRET-2', ''));
    const fixed = await run(['config', 'check', file]);
    expect(fixed.err).to.equal('');
    expect(fixed.code).to.equal(0);
  });

  it('exits 1 listing problems of the environment beside those of the file', async () => {
    const file = join(dir, 'env.yaml');
    await writeFile(file, 'rateLimit:\n  max: 0\n');
    const result = await run(['config', 'check', file], { PORT: 'eighty', REDIS_URL: 'http://cache' });
    expect(result.code).to.equal(1);
    expect(result.err)
      .to.contain('rateLimit.max')
      .and.to.contain("PORT must be an integer >= 0, got 'eighty'")
      .and.to.contain('REDIS_URL must start with redis://');
  });

  it('exits 1 for a file that is missing or not YAML', async () => {
    expect((await run(['config', 'check', join(dir, 'absent.yaml')])).code).to.equal(1);
    const file = join(dir, 'broken.yaml');
    await writeFile(file, 'aliases: [unclosed\n');
    const result = await run(['config', 'check', file]);
    expect(result.code).to.equal(1);
    expect(result.err).to.match(/broken\.yaml line 2, column 1: not valid YAML: .+ \([A-Z_]+\)/);
  });

  it('answers bad usage with exit 2', async () => {
    expect((await run(['config'])).code).to.equal(2);
    expect((await run(['config', 'check', 'a', 'b'])).code).to.equal(2);
  });
});
