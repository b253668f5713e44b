import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { eventually } from '../helpers/eventually.ts';
import { withinOneWindow } from '../helpers/limit-window.ts';
import { containerSupport, Podman } from '../helpers/podman.ts';
import { freePort } from '../helpers/redis-server.ts';

// The image built from the Dockerfile, run as users run it: alone with the bundled mock upstream, and as
// compose.yaml's two replicas on one Redis. Rootful podman with runc (scripts/test-setup.sh installs
// them as root); the base image comes from Debian's archive when no registry is reachable
// (scripts/container-base.sh).
const ROOT = join(import.meta.dirname, '..', '..');
const IMAGE = 'localhost/model-gateway:test';
const REDIS_IMAGE = 'localhost/model-gateway-redis:test';
const STATIC_KEY = `sk-container-${randomBytes(16).toString('hex')}`;
const UPSTREAM_KEY = 'mock-upstream-key';
const run = `t${process.pid}`;

async function json(url: string, init?: RequestInit): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(url, init);
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

const ready = async (url: string) => {
  try {
    return (await json(`${url}/readyz`)).status === 200;
  } catch {
    return false;
  }
};

describe('container image (Dockerfile, podman)', function () {
  const unsupported = containerSupport();
  let podman: Podman;
  let work: string;
  let marker: string;
  const timings: string[] = [];

  before(async function () {
    if (unsupported) {
      console.log(`      skipped: ${unsupported}`);
      this.skip();
    }
    this.timeout(30 * 60_000);
    podman = new Podman();
    work = mkdtempSync(join(tmpdir(), 'container-test-'));
    let started = Date.now();
    await podman.must([join(ROOT, 'scripts', 'container-base.sh')], { command: 'bash', timeoutMs: 20 * 60_000 });
    timings.push(`base image ${Math.round((Date.now() - started) / 1000)} s`);
    // npm inside the build trusts what this machine trusts (its egress may need an extra authority),
    // passed as a build secret. A marker line in it lets the test prove it is in no layer.
    marker = `build-secret-marker-${randomBytes(12).toString('hex')}`;
    const authorities = process.env.NODE_EXTRA_CA_CERTS && existsSync(process.env.NODE_EXTRA_CA_CERTS) ? process.env.NODE_EXTRA_CA_CERTS : '/etc/ssl/certs/ca-certificates.crt';
    const secret = join(work, 'npm-ca.pem');
    writeFileSync(secret, `${existsSync(authorities) ? readFileSync(authorities, 'utf8') : ''}\n# ${marker}\n`);
    started = Date.now();
    await podman.must(['build', '--pull=never', '--secret', `id=npm_ca,src=${secret}`, '-t', IMAGE, ROOT], { timeoutMs: 20 * 60_000 });
    timings.push(`gateway image ${Math.round((Date.now() - started) / 1000)} s`);
    started = Date.now();
    await podman.must(['build', '--pull=never', '-t', REDIS_IMAGE, join(ROOT, 'deploy', 'redis')], { timeoutMs: 10 * 60_000 });
    timings.push(`redis image ${Math.round((Date.now() - started) / 1000)} s`);
    const size = Number((await podman.must(['image', 'inspect', '--format', '{{.Size}}', IMAGE])).trim());
    console.log(`      built in ${timings.join(', ')}; image ${(size / 1e6).toFixed(0)} MB`);
  });

  after(async function () {
    this.timeout(120_000);
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('runs as a non-root user on a read-only root file system, writing only its data volume', async function () {
    this.timeout(120_000);
    const user = (await podman.must(['image', 'inspect', '--format', '{{.Config.User}}', IMAGE])).trim();
    expect(user).to.equal('10001:10001');
    const probe = await podman.run(['run', '--rm', '--read-only', IMAGE, 'sh', '-c', 'id -u; touch /app/written 2>/dev/null && echo root-writable; touch /data/written && echo data-writable']);
    expect(probe.code, probe.stderr).to.equal(0);
    expect(probe.stdout.trim().split('\n')).to.deep.equal(['10001', 'data-writable']);
  });

  it('keeps the build secret out of every layer and out of the history', async function () {
    this.timeout(300_000);
    const history = await podman.must(['history', '--no-trunc', '--format', '{{.CreatedBy}}', IMAGE]);
    expect(history).to.include('apt-get install');
    expect(history).not.to.include(marker);
    expect(history).not.to.include('BEGIN CERTIFICATE');
    const saved = join(work, 'saved');
    await podman.must(['save', '--format', 'oci-dir', '-o', saved, IMAGE], { timeoutMs: 240_000 });
    const blobs = join(saved, 'blobs', 'sha256');
    let scanned = 0;
    for (const name of readdirSync(blobs)) {
      const blob = readFileSync(join(blobs, name));
      scanned += statSync(join(blobs, name)).size;
      expect(blob.includes(marker), `layer ${name} holds the build secret`).to.equal(false);
    }
    expect(scanned).to.be.greaterThan(50e6);
  });

  describe('alone, with the bundled mock upstream', () => {
    const network = `gw-${run}`;
    const gateway = `gw-${run}-gateway`;
    const upstream = `gw-${run}-mock`;
    let url: string;

    before(async function () {
      if (unsupported) this.skip();
      this.timeout(180_000);
      await podman.must(['network', 'create', network]);
      await podman.must(['run', '-d', '--read-only', '--name', upstream, '--network', network, '--network-alias', 'mock-upstream', IMAGE,
        'node', 'dist/scripts/mock-upstream.js', '--host', '0.0.0.0', '--port', '9000', '--api-key', UPSTREAM_KEY, '--chunk-delay-ms', '250']);
      const port = await freePort();
      const providers = ['ALPHA', 'BETA', 'GAMMA', 'DELTA', 'EPSILON', 'ZETA'].flatMap((vendor) => ['-e', `${vendor}_BASE_URL=http://mock-upstream:9000/v1`, '-e', `${vendor}_API_KEY=${UPSTREAM_KEY}`]);
      await podman.must(['run', '-d', '--read-only', '--name', gateway, '--network', network, '-p', `127.0.0.1:${port}:8080`,
        '-e', `GATEWAY_API_KEYS=${STATIC_KEY}`, '-e', 'GATEWAY_DRAIN_MS=20000', ...providers, IMAGE]);
      url = `http://127.0.0.1:${port}`;
      await eventually(() => ready(url), 'the gateway container to be ready', 60_000);
    });

    after(async function () {
      this.timeout(120_000);
      if (!podman) return;
      await podman.run(['rm', '-f', '-t', '0', gateway, upstream]);
      await podman.run(['network', 'rm', '-f', network]);
    });

    it('answers /healthz, /readyz and the catalog', async () => {
      expect(await json(`${url}/healthz`)).to.deep.equal({ status: 200, body: { status: 'ok' } });
      const readiness = await json(`${url}/readyz`);
      expect(readiness.status).to.equal(200);
      expect(readiness.body).to.deep.include({ status: 'ok', redis: 'not configured', usage: 'stored' });
      const models = await json(`${url}/v1/models`);
      expect(models.status).to.equal(200);
      const ids = (models.body.data as { id: string }[]).map((model) => model.id);
      expect(ids).to.include('alpha-latest');
      expect(ids.length).to.be.greaterThan(6);
    });

    it('serves a JSON and a streamed chat completion to the official client, and records both', async function () {
      this.timeout(60_000);
      const client = new OpenAI({ apiKey: STATIC_KEY, baseURL: `${url}/v1`, maxRetries: 0 });
      const answer = await client.chat.completions.create({ model: 'alpha-latest', messages: [{ role: 'user', content: 'Hello from a container test' }] });
      expect(answer.choices[0]!.message.content).to.be.a('string').and.not.equal('');
      expect(answer.usage!.prompt_tokens).to.be.greaterThan(0);
      const stream = await client.chat.completions.create({ model: 'alpha-latest', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'Stream please' }] });
      let text = '';
      let usage: OpenAI.CompletionUsage | undefined | null;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta.content ?? '';
        usage ??= chunk.usage;
      }
      expect(text).to.not.equal('');
      expect(usage!.completion_tokens).to.be.greaterThan(0);
      const own = await json(`${url}/v1/usage`, { headers: { authorization: `Bearer ${STATIC_KEY}` } });
      expect(own.status).to.equal(200);
      const rows = own.body.data as { model: string; requests: number; input_tokens: number; output_tokens: number }[];
      const requests = rows.reduce((sum, row) => sum + row.requests, 0);
      expect(requests).to.equal(2);
      expect(rows.every((row) => row.model.startsWith('alpha/'))).to.equal(true);
    });

    it('drains a stream in flight on SIGTERM, records it, and exits 0', async function () {
      this.timeout(120_000);
      const client = new OpenAI({ apiKey: STATIC_KEY, baseURL: `${url}/v1`, maxRetries: 0 });
      const stream = await client.chat.completions.create({ model: 'alpha-latest', stream: true, messages: [{ role: 'user', content: 'A stream that outlives the stop signal' }] });
      const chunks: OpenAI.ChatCompletionChunk[] = [];
      let signalled = false;
      for await (const chunk of stream) {
        chunks.push(chunk);
        if (!signalled) {
          signalled = true;
          await podman.must(['kill', '--signal', 'TERM', gateway]);
          // New connections are refused while the stream goes on.
          await eventually(async () => !(await ready(url)), 'the draining gateway to stop answering readiness', 10_000);
        }
      }
      expect(signalled).to.equal(true);
      expect(chunks.length).to.be.greaterThan(2);
      expect(chunks.at(-1)!.choices[0]?.finish_reason ?? chunks.at(-2)!.choices[0]?.finish_reason).to.equal('stop');
      const exit = (await podman.must(['wait', gateway], { timeoutMs: 60_000 })).trim();
      expect(exit).to.equal('0');
      const logs = await podman.run(['logs', gateway]);
      const lines = logs.stdout.split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as Record<string, unknown>);
      expect(lines.some((line) => line.msg === 'shut down: every usage record stored')).to.equal(true);
      const streamed = lines.filter((line) => line.msg === 'request' && line.stream === true);
      expect(streamed.at(-1)).to.deep.include({ status: 200, outcome: 'complete' });
    });
  });

  describe('compose.yaml: two replicas on one Redis', () => {
    const project = `gwcompose${run}`;
    const files = ['-f', join(ROOT, 'compose.yaml'), '-f', join(ROOT, 'deploy', 'compose.mock-upstream.yaml')];
    const limit = 6;
    let env: NodeJS.ProcessEnv;
    let replicas: string[];
    let adminToken: string;

    before(async function () {
      if (unsupported) this.skip();
      this.timeout(300_000);
      const secrets = join(work, 'secrets');
      mkdirSync(secrets, { recursive: true });
      adminToken = randomBytes(32).toString('hex');
      writeFileSync(join(secrets, 'admin-token'), `${adminToken}\n`);
      writeFileSync(join(secrets, 'api-keys'), `${STATIC_KEY}\n`);
      const ports = [await freePort(), await freePort()];
      replicas = ports.map((port) => `http://127.0.0.1:${port}`);
      env = {
        GATEWAY_IMAGE: IMAGE,
        REDIS_IMAGE,
        GATEWAY_SECRETS_DIR: secrets,
        GATEWAY_1_PORT: `127.0.0.1:${ports[0]}`,
        GATEWAY_2_PORT: `127.0.0.1:${ports[1]}`,
        RATE_LIMIT_MAX: String(limit),
        LOG_LEVEL: 'warn',
      };
      await podman.must(['-p', project, ...files, 'up', '-d'], { command: 'podman-compose', env, cwd: ROOT, timeoutMs: 240_000 });
      for (const url of replicas) {
        await eventually(async () => (await json(`${url}/readyz`)).body.redis === 'ready', `replica ${url} to reach Redis`, 90_000);
      }
    });

    after(async function () {
      this.timeout(180_000);
      if (!podman || !env) return;
      await podman.run(['-p', project, ...files, 'down', '-v', '-t', '1'], { command: 'podman-compose', env, cwd: ROOT, timeoutMs: 150_000 });
      const left = (await podman.run(['ps', '-aq', '--filter', `label=io.podman.compose.project=${project}`])).stdout.split('\n').filter(Boolean);
      if (left.length) await podman.run(['rm', '-f', '-t', '0', ...left]);
      await podman.run(['network', 'rm', '-f', `${project}_default`]);
      await podman.run(['volume', 'rm', '-f', `${project}_redis-data`]);
    });

    it('holds one key\'s rpm exactly across the two replicas, and both read the same usage', async function () {
      this.timeout(180_000);
      const sent = limit + 4;
      await withinOneWindow(30_000);
      const statuses: number[] = [];
      for (let index = 0; index < sent; index += 1) {
        const response = await fetch(`${replicas[index % 2]}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${STATIC_KEY}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'beta-latest', messages: [{ role: 'user', content: `request ${index}` }] }),
        });
        await response.arrayBuffer();
        statuses.push(response.status);
      }
      expect(statuses).to.deep.equal([...Array<number>(limit).fill(200), ...Array<number>(sent - limit).fill(429)]);
      // The key itself is limited now (its /v1/usage too): read its usage with the admin token instead.
      for (const url of replicas) {
        await eventually(async () => {
          const usage = await json(`${url}/admin/usage`, { headers: { authorization: `Bearer ${adminToken}` } });
          return (usage.body.data as { requests: number }[]).reduce((sum, row) => sum + row.requests, 0) === limit;
        }, `replica ${url} to read ${limit} requests`, 10_000);
      }
    });

    it('takes the admin token and the keys from compose secrets (files), not from the environment', async () => {
      for (const url of replicas) {
        const keys = await json(`${url}/admin/keys`, { headers: { authorization: `Bearer ${adminToken}` } });
        expect(keys.status).to.equal(200);
        expect((await json(`${url}/admin/keys`, { headers: { authorization: 'Bearer wrong-token-wrong-token-wrong-token' } })).status).to.equal(401);
      }
      const inspected = await podman.must(['inspect', '--format', '{{range .Config.Env}}{{println .}}{{end}}', `${project}_gateway-1_1`]);
      expect(inspected).to.include('GATEWAY_ADMIN_TOKEN_FILE=/run/secrets/admin_token');
      expect(inspected).not.to.include(adminToken);
      expect(inspected).not.to.include(STATIC_KEY);
    });
  });
});
