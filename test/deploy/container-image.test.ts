import { expect } from 'chai';
import { createHash, randomBytes } from 'node:crypto';
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { eventually } from '../helpers/eventually.ts';
import { withinOneWindow } from '../helpers/limit-window.ts';
import { launchBrowser } from '../helpers/headless-browser.ts';
import { startOidcIssuer, type OidcIssuer } from '../helpers/oidc-issuer.ts';
import { OtlpReceiver } from '../helpers/otlp-receiver.ts';
import { containerSupport, Podman } from '../helpers/podman.ts';
import { freePort, TestRedisServer } from '../helpers/redis-server.ts';
import { startMockUpstream, type MockUpstream } from '../../mock-upstream/mock-upstream-server.ts';

// The image built from the Dockerfile, run as users run it: alone with the bundled mock upstream, and as
// compose.yaml's two replicas on one Redis. Rootful podman with runc (scripts/test-setup.sh installs
// them as root); the base image comes from Debian's archive when no registry is reachable
// (scripts/container-base.sh).
const ROOT = join(import.meta.dirname, '..', '..');
// A tag per checkout: checkouts of other branches on the same machine build their own at the same time.
const TAG = `test-${createHash('sha256').update(ROOT).digest('hex').slice(0, 8)}`;
const IMAGE = `localhost/model-gateway:${TAG}`;
const REDIS_IMAGE = `localhost/model-gateway-redis:${TAG}`;
const PROMETHEUS_IMAGE = `localhost/model-gateway-prometheus:${TAG}`;
const STATIC_KEY = `sk-container-${randomBytes(16).toString('hex')}`;
// A second key for the compose tests that follow the rpm test (each key has its own requests per minute).
const STREAM_KEY = `sk-container-${randomBytes(16).toString('hex')}`;
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
    const authorities =
      process.env.NODE_EXTRA_CA_CERTS && existsSync(process.env.NODE_EXTRA_CA_CERTS)
        ? process.env.NODE_EXTRA_CA_CERTS
        : '/etc/ssl/certs/ca-certificates.crt';
    const secret = join(work, 'npm-ca.pem');
    writeFileSync(secret, `${existsSync(authorities) ? readFileSync(authorities, 'utf8') : ''}\n# ${marker}\n`);
    started = Date.now();
    await podman.must(['build', '--pull=never', '--secret', `id=npm_ca,src=${secret}`, '-t', IMAGE, ROOT], {
      timeoutMs: 20 * 60_000,
    });
    timings.push(`gateway image ${Math.round((Date.now() - started) / 1000)} s`);
    started = Date.now();
    await podman.must(['build', '--pull=never', '-t', REDIS_IMAGE, join(ROOT, 'deploy', 'redis')], {
      timeoutMs: 10 * 60_000,
    });
    timings.push(`redis image ${Math.round((Date.now() - started) / 1000)} s`);
    started = Date.now();
    await podman.must(['build', '--pull=never', '-t', PROMETHEUS_IMAGE, join(ROOT, 'deploy', 'prometheus')], {
      timeoutMs: 10 * 60_000,
    });
    timings.push(`prometheus image ${Math.round((Date.now() - started) / 1000)} s`);
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
    const probe = await podman.run([
      'run',
      '--rm',
      '--read-only',
      IMAGE,
      'sh',
      '-c',
      'id -u; touch /app/written 2>/dev/null && echo root-writable; touch /data/written && echo data-writable',
    ]);
    expect(probe.code, probe.stderr).to.equal(0);
    expect(probe.stdout.trim().split('\n')).to.deep.equal(['10001', 'data-writable']);
  });

  it('carries its SBOM (CycloneDX, the production install) and says where it is', async function () {
    this.timeout(120_000);
    const labels = JSON.parse(await podman.must(['image', 'inspect', '--format', '{{json .Labels}}', IMAGE])) as Record<
      string,
      string
    >;
    expect(labels['dev.model-gateway.sbom']).to.equal('/app/sbom.cdx.json');
    expect(labels['org.opencontainers.image.revision']).to.be.a('string').and.not.equal('');
    const sbom = JSON.parse(
      await podman.must(['run', '--rm', '--read-only', IMAGE, 'cat', labels['dev.model-gateway.sbom']!]),
    ) as {
      bomFormat: string;
      specVersion: string;
      metadata: { component: { name: string } };
      components: { group?: string; name: string; version: string }[];
    };
    expect(sbom).to.deep.include({ bomFormat: 'CycloneDX', specVersion: '1.5' });
    expect(sbom.metadata.component.name).to.equal('model-gateway');
    // Every package of the image's node_modules is listed, at its installed version, and nothing of the build.
    const installed = JSON.parse(
      await podman.must([
        'run',
        '--rm',
        '--read-only',
        IMAGE,
        'node',
        '-e',
        `
        const { readdirSync, readFileSync, existsSync } = require('node:fs');
        const found = {};
        const walk = (dir) => { for (const name of readdirSync(dir)) {
          if (name.startsWith('.')) continue;
          if (name.startsWith('@')) { walk(dir + '/' + name); continue; }
          const manifest = dir + '/' + name + '/package.json';
          if (existsSync(manifest)) {
            const { name: id, version } = JSON.parse(readFileSync(manifest, 'utf8'));
            found[id + '@' + version] = true;
          }
          if (existsSync(dir + '/' + name + '/node_modules')) walk(dir + '/' + name + '/node_modules');
        } };
        walk('node_modules');
        console.log(JSON.stringify(Object.keys(found)));`,
      ]),
    ) as string[];
    const listed = new Set(
      sbom.components.map(
        (component) => `${component.group ? `${component.group}/` : ''}${component.name}@${component.version}`,
      ),
    );
    expect(installed.length).to.be.greaterThan(50);
    expect(installed.filter((id) => !listed.has(id))).to.deep.equal([]);
    expect([...listed].filter((id) => /^(typescript|tsx|mocha|@cyclonedx\/cyclonedx-library)@/.test(id))).to.deep.equal(
      [],
    );
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
      await podman.must([
        'run',
        '-d',
        '--read-only',
        '--name',
        upstream,
        '--network',
        network,
        '--network-alias',
        'mock-upstream',
        IMAGE,
        'node',
        'dist/scripts/mock-upstream.js',
        '--host',
        '0.0.0.0',
        '--port',
        '9000',
        '--api-key',
        UPSTREAM_KEY,
        '--chunk-delay-ms',
        '250',
      ]);
      const port = await freePort();
      const providers = ['ALPHA', 'BETA', 'GAMMA', 'DELTA', 'EPSILON', 'ZETA'].flatMap((vendor) => [
        '-e',
        `${vendor}_BASE_URL=http://mock-upstream:9000/v1`,
        '-e',
        `${vendor}_API_KEY=${UPSTREAM_KEY}`,
      ]);
      await podman.must([
        'run',
        '-d',
        '--read-only',
        '--name',
        gateway,
        '--network',
        network,
        '-p',
        `127.0.0.1:${port}:8080`,
        '-e',
        `GATEWAY_API_KEYS=${STATIC_KEY}`,
        '-e',
        'GATEWAY_DRAIN_MS=20000',
        ...providers,
        IMAGE,
      ]);
      url = `http://127.0.0.1:${port}`;
      await eventually(() => ready(url), 'the gateway container to be ready', 60_000);
    });

    after(async function () {
      this.timeout(120_000);
      if (!podman) return;
      await podman.run(['rm', '-f', '-v', '-t', '0', gateway, upstream]);
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
      const answer = await client.chat.completions.create({
        model: 'alpha-latest',
        messages: [{ role: 'user', content: 'Hello from a container test' }],
      });
      expect(answer.choices[0]!.message.content).to.be.a('string').and.not.equal('');
      expect(answer.usage!.prompt_tokens).to.be.greaterThan(0);
      const stream = await client.chat.completions.create({
        model: 'alpha-latest',
        stream: true,
        stream_options: { include_usage: true },
        messages: [{ role: 'user', content: 'Stream please' }],
      });
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
      const stream = await client.chat.completions.create({
        model: 'alpha-latest',
        stream: true,
        messages: [{ role: 'user', content: 'A stream that outlives the stop signal' }],
      });
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
      const lines = logs.stdout
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as Record<string, unknown>);
      expect(lines.some((line) => line.msg === 'shut down: every usage record stored')).to.equal(true);
      const streamed = lines.filter((line) => line.msg === 'request' && line.stream === true);
      expect(streamed.at(-1)).to.deep.include({ status: 200, outcome: 'complete' });
    });
  });

  // With every feature that loads code of its own configured, so that a file of node_modules the image's
  // build pruned but the gateway needs fails here: OTLP traces and metrics to a receiver, Redis, guardrails,
  // the response cache, an estimate on the tokenizer thread, the account page with its charts and single
  // sign-on through a real OpenID provider. On the host's network: every party listens on 127.0.0.1.
  describe('every feature on: traces, Redis, guardrails, cache, an estimate, the account page, sign-on', () => {
    const gateway = `gw-${run}-features`;
    const adminToken = randomBytes(32).toString('hex');
    const clientSecret = randomBytes(24).toString('hex');
    const people = { alice: { email: 'alice@example.com', name: 'Alice', groups: ['platform-admins'] } };
    let redis: TestRedisServer;
    let receiver: OtlpReceiver;
    let upstream: MockUpstream;
    let issuer: OidcIssuer;
    let url: string;
    const logLines = async () =>
      (await podman.must(['logs', gateway]))
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as Record<string, unknown>);
    const chat = (body: Record<string, unknown>) =>
      fetch(`${url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${STATIC_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'alpha-latest', ...body }),
      });

    before(async function () {
      if (unsupported) this.skip();
      this.timeout(180_000);
      redis = await TestRedisServer.start();
      receiver = await OtlpReceiver.start();
      upstream = await startMockUpstream({ host: '127.0.0.1', apiKey: UPSTREAM_KEY });
      issuer = await startOidcIssuer(people);
      const port = await freePort();
      url = `http://127.0.0.1:${port}`;
      issuer.register({ clientId: 'model-gateway', clientSecret, redirectUri: `${url}/account/api/sso/callback` });
      const configDir = join(work, 'features-config');
      mkdirSync(configDir);
      chmodSync(configDir, 0o755);
      writeFileSync(
        join(configDir, 'gateway.yaml'),
        [
          'access:',
          '  oidc: { scopes: [profile, email, groups] }',
          '  roles: [{ group: platform-admins, role: admin }]',
          'guardrails:',
          "  - { name: no-codes, use: regex, on: both, action: block, patterns: ['PROJECT-[0-9]{4}'] }",
          '  - { name: no-emails, use: pii, on: request, action: redact, entities: [email] }',
          '',
        ].join('\n'),
      );
      chmodSync(join(configDir, 'gateway.yaml'), 0o644);
      const providers = ['ALPHA', 'BETA', 'GAMMA', 'DELTA', 'EPSILON', 'ZETA'].flatMap((vendor) => [
        '-e',
        `${vendor}_BASE_URL=${upstream.url}`,
        '-e',
        `${vendor}_API_KEY=${UPSTREAM_KEY}`,
      ]);
      const settings = {
        PORT: String(port),
        HOST: '127.0.0.1',
        GATEWAY_CONFIG: '/etc/model-gateway/gateway.yaml',
        GATEWAY_API_KEYS: STATIC_KEY,
        GATEWAY_ADMIN_TOKEN: adminToken,
        GATEWAY_OIDC_ISSUER: issuer.url,
        GATEWAY_OIDC_CLIENT_ID: 'model-gateway',
        GATEWAY_OIDC_CLIENT_SECRET: clientSecret,
        REDIS_URL: redis.url,
        GATEWAY_CACHE_TTL_S: '300',
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        // Traces in protobuf, metrics in JSON: both exporters' code is loaded.
        OTEL_EXPORTER_OTLP_METRICS_PROTOCOL: 'http/json',
        OTEL_BSP_SCHEDULE_DELAY: '200',
        OTEL_METRIC_EXPORT_INTERVAL: '1000',
      };
      await podman.must([
        'run',
        '-d',
        '--read-only',
        '--name',
        gateway,
        '--network',
        'host',
        '-v',
        `${configDir}:/etc/model-gateway:ro`,
        ...Object.entries(settings).flatMap(([name, value]) => ['-e', `${name}=${value}`]),
        ...providers,
        IMAGE,
      ]);
      await eventually(() => ready(url), 'the gateway container to be ready', 60_000).catch(async (error: Error) => {
        const logs = await podman.run(['logs', gateway]);
        throw new Error(`${error.message}; its output:\n${logs.stdout.slice(-2000)}${logs.stderr.slice(-3000)}`);
      });
    });

    after(async function () {
      this.timeout(120_000);
      if (podman) await podman.run(['rm', '-f', '-v', '-t', '0', gateway]);
      await Promise.all([redis?.close(), receiver?.close(), upstream?.close(), issuer?.close()]);
    });

    it('keeps its keys in Redis: a key the CLI in the container makes serves at once', async function () {
      this.timeout(60_000);
      const readiness = await json(`${url}/readyz`);
      expect(readiness.body).to.deep.include({ status: 'ok', redis: 'ready' });
      const created = await podman.must([
        'exec',
        gateway,
        'node',
        'bin/model-gateway.js',
        'keys',
        'create',
        '--name',
        'cli',
      ]);
      const key = /^sk-\S+$/m.exec(created)?.[0];
      expect(key, created).to.be.a('string');
      const models = await fetch(`${url}/v1/models`, { headers: { authorization: `Bearer ${key}` } });
      expect(models.status).to.equal(200);
      const usage = await fetch(`${url}/v1/usage`, { headers: { authorization: `Bearer ${key}` } });
      expect(usage.status).to.equal(200);
    });

    it('answers a repeated request from the cache and blocks what a guardrail forbids', async function () {
      this.timeout(60_000);
      const body = { messages: [{ role: 'user', content: 'Cache this answer for alice@example.com' }] };
      const first = await chat(body);
      expect(first.status).to.equal(200);
      expect(first.headers.get('x-gateway-cache')).to.equal('miss');
      await first.arrayBuffer();
      const second = await chat(body);
      expect(second.status).to.equal(200);
      expect(second.headers.get('x-gateway-cache')).to.equal('hit');
      await second.arrayBuffer();
      // The pii guardrail redacted the address before the request went upstream.
      expect(JSON.stringify(upstream.requests.at(-1)!.body))
        .to.include('[EMAIL]')
        .and.not.include('alice@example.com');
      const blocked = await chat({ messages: [{ role: 'user', content: 'Read PROJECT-1234 aloud' }] });
      expect(blocked.status).to.equal(400);
      expect(((await blocked.json()) as { error: { code: string } }).error.code).to.equal('GW_ERR_GUARDRAIL');
    });

    it('estimates the usage of a stream the upstream did not report on the tokenizer thread', async function () {
      this.timeout(60_000);
      upstream.enqueue({ kind: 'no-usage' });
      const client = new OpenAI({ apiKey: STATIC_KEY, baseURL: `${url}/v1`, maxRetries: 0 });
      const stream = await client.chat.completions.create({
        model: 'alpha-latest',
        stream: true,
        messages: [{ role: 'user', content: 'A stream whose upstream forgets its usage' }],
      });
      let text = '';
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
      expect(text).to.not.equal('');
      let estimated: Record<string, unknown> | undefined;
      await eventually(
        async () => (estimated = (await logLines()).find((line) => line.tokens_estimated === true)) !== undefined,
        'the estimated request line',
        30_000,
      );
      expect(estimated).to.deep.include({ msg: 'request', status: 200, stream: true });
      expect(estimated!.input_tokens).to.be.greaterThan(0);
      expect(estimated!.output_tokens).to.be.greaterThan(0);
      expect((await logLines()).filter((line) => /estimate failed/.test(String(line.msg)))).to.deep.equal([]);
    });

    it('exports traces in OTLP protobuf and the GenAI metrics in OTLP JSON to the receiver', async function () {
      this.timeout(60_000);
      // A chat completion's server span, and the client span of its upstream call in the same trace.
      await eventually(
        () =>
          receiver.spans.some(
            (server) =>
              server.kind === 2 &&
              server.name === 'POST /v1/chat/completions' &&
              receiver
                .trace(server.traceId)
                .some((client) => client.kind === 3 && client.attributes['gen_ai.operation.name'] === 'chat'),
          ),
        'the spans of a chat completion',
        30_000,
      );
      await eventually(
        () => receiver.metrics.some((metric) => metric.name === 'gen_ai.client.token.usage'),
        'the token usage metric',
        30_000,
      );
      expect(receiver.contentTypes).to.include('application/x-protobuf').and.include('application/json');
      expect(receiver.problems).to.deep.equal([]);
    });

    it('signs a person in through the OpenID provider and draws the account page with Chart.js', async function () {
      this.timeout(180_000);
      const script = await fetch(`${url}/account/vendor/chart.umd.min.js`);
      expect(script.status).to.equal(200);
      expect(await script.text()).to.have.length.greaterThan(100_000);
      const browser = await launchBrowser();
      try {
        const page = await browser.newPage();
        page.setDefaultTimeout(30_000);
        await page.goto(`${url}/account`);
        await page.getByRole('link', { name: 'Sign in with single sign-on' }).click();
        await page.locator('input[name="login"]').fill('alice');
        await page.locator('input[name="password"]').fill('any password');
        await page.getByRole('button', { name: 'Sign-in' }).click();
        await page.getByRole('button', { name: 'Continue' }).click();
        await page.waitForURL(`${url}/account**`);
        // The provider's development pages load fonts from the internet, which cannot be reached here.
        browser.problems.length = 0;
        await page.locator('#who').filter({ hasText: 'Alice' }).waitFor();
        await page.goto(`${url}/account#usage`);
        await page.waitForFunction(() => {
          const chart = (globalThis as { Chart?: { getChart(id: string): unknown } }).Chart;
          return chart?.getChart('day-chart') !== undefined;
        });
        expect(browser.problems).to.deep.equal([]);
      } finally {
        await browser.close();
      }
    });
  });

  describe('compose.yaml: two replicas on one Redis', () => {
    const project = `gwcompose${run}`;
    const files = [
      '-f',
      join(ROOT, 'compose.yaml'),
      '-f',
      join(ROOT, 'deploy', 'compose.mock-upstream.yaml'),
      '-f',
      join(ROOT, 'deploy', 'compose.observability.yaml'),
    ];
    const limit = 6;
    const compose = (args: readonly string[], timeoutMs = 240_000) =>
      podman.must(['-p', project, ...files, ...args], { command: 'podman-compose', env, cwd: ROOT, timeoutMs });
    const container = (service: string) => `${project}_${service}_1`;
    const admin = (url: string) => json(`${url}/admin/usage`, { headers: { authorization: `Bearer ${adminToken}` } });
    const requestsIn = (usage: { body: Record<string, unknown> }) =>
      (usage.body.data as { requests: number }[]).reduce((sum, row) => sum + row.requests, 0);
    const allReady = async () => {
      for (const url of replicas)
        await eventually(
          async () => (await json(`${url}/readyz`)).body.redis === 'ready',
          `replica ${url} to reach Redis`,
          90_000,
        );
    };
    let env: NodeJS.ProcessEnv;
    let replicas: string[];
    let adminToken: string;
    let redisPassword: string;
    let configDir: string;
    let prometheus: string;

    before(async function () {
      if (unsupported) this.skip();
      this.timeout(300_000);
      // As docs/deploy.md has the operator make them.
      const secrets = join(work, 'secrets');
      mkdirSync(secrets, { recursive: true });
      adminToken = randomBytes(32).toString('hex');
      redisPassword = randomBytes(32).toString('hex');
      writeFileSync(join(secrets, 'admin-token'), `${adminToken}\n`);
      writeFileSync(join(secrets, 'api-keys'), `${STATIC_KEY},${STREAM_KEY}\n`);
      writeFileSync(join(secrets, 'redis-password'), `${redisPassword}\n`);
      writeFileSync(join(secrets, 'redis-url'), `redis://:${redisPassword}@redis:6379\n`);
      // The config directory the replicas mount and reload live: a copy, so that the test may edit it.
      configDir = join(work, 'config');
      cpSync(join(ROOT, 'config'), configDir, { recursive: true });
      chmodSync(configDir, 0o755);
      // The replicas' settings, as the operator's .env holds them.
      const envFile = join(work, 'gateway.env');
      // Traces go to the mock upstream, which refuses them: enough to see the setting reach both replicas.
      writeFileSync(
        envFile,
        `RATE_LIMIT_MAX=${limit}\nLOG_LEVEL=info\nOTEL_EXPORTER_OTLP_ENDPOINT=http://mock-upstream:9000\n`,
      );
      const ports = [await freePort(), await freePort()];
      prometheus = `http://127.0.0.1:${await freePort()}`;
      replicas = ports.map((port) => `http://127.0.0.1:${port}`);
      env = {
        GATEWAY_IMAGE: IMAGE,
        REDIS_IMAGE,
        GATEWAY_SECRETS_DIR: secrets,
        GATEWAY_CONFIG_DIR: configDir,
        GATEWAY_ENV_FILE: envFile,
        GATEWAY_1_PORT: `127.0.0.1:${ports[0]}`,
        GATEWAY_2_PORT: `127.0.0.1:${ports[1]}`,
        PROMETHEUS_IMAGE,
        PROMETHEUS_PORT: prometheus.slice('http://'.length),
        // About 2 s between streamed events: a chat completion streams for some 15 s.
        MOCK_CHUNK_DELAY_MS: '2000',
      };
      await compose(['up', '-d']);
      await allReady();
    });

    after(async function () {
      this.timeout(180_000);
      if (!podman || !env) return;
      await podman.run(['-p', project, ...files, 'down', '-v', '-t', '1'], {
        command: 'podman-compose',
        env,
        cwd: ROOT,
        timeoutMs: 150_000,
      });
      const left = (await podman.run(['ps', '-aq', '--filter', `label=io.podman.compose.project=${project}`])).stdout
        .split('\n')
        .filter(Boolean);
      if (left.length) await podman.run(['rm', '-f', '-v', '-t', '0', ...left]);
      await podman.run(['network', 'rm', '-f', `${project}_default`]);
      for (const volume of ['redis-data', 'gateway-1-data', 'gateway-2-data', 'prometheus-data'])
        await podman.run(['volume', 'rm', '-f', `${project}_${volume}`]);
    });

    it("holds one key's rpm exactly across the two replicas, and both read the same usage", async function () {
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
        await eventually(
          async () => {
            const usage = await json(`${url}/admin/usage`, { headers: { authorization: `Bearer ${adminToken}` } });
            return (usage.body.data as { requests: number }[]).reduce((sum, row) => sum + row.requests, 0) === limit;
          },
          `replica ${url} to read ${limit} requests`,
          10_000,
        );
      }
    });

    it('takes the admin token and the keys from compose secrets (files), not from the environment', async () => {
      for (const url of replicas) {
        const keys = await json(`${url}/admin/keys`, { headers: { authorization: `Bearer ${adminToken}` } });
        expect(keys.status).to.equal(200);
        expect(
          (
            await json(`${url}/admin/keys`, {
              headers: { authorization: 'Bearer wrong-token-wrong-token-wrong-token' },
            })
          ).status,
        ).to.equal(401);
      }
      const inspected = await podman.must([
        'inspect',
        '--format',
        '{{range .Config.Env}}{{println .}}{{end}}',
        `${project}_gateway-1_1`,
      ]);
      expect(inspected).to.include('GATEWAY_ADMIN_TOKEN_FILE=/run/secrets/admin_token');
      expect(inspected).not.to.include(adminToken);
      expect(inspected).not.to.include(STATIC_KEY);
    });

    it('keeps Redis behind a secret password in protected mode; replicas use REDIS_URL_FILE', async function () {
      this.timeout(60_000);
      // What any container on the compose network can do (the mock upstream's has node): talk RESP to redis:6379.
      const redis = async (commands: string) =>
        podman.must([
          'exec',
          container('mock-upstream'),
          'node',
          '-e',
          `
          const socket = require('node:net').connect(6379, 'redis', () => socket.end(process.argv[1]));
          let reply = '';
          socket.on('data', (chunk) => (reply += chunk));
          socket.on('close', () => console.log(JSON.stringify(reply)));
          socket.on('error', (error) => console.log(JSON.stringify('error ' + error.code)));`,
          commands,
        ]);
      const refused = JSON.parse(await redis('PING\r\nKEYS *\r\n')) as string;
      expect(refused).to.match(/^-NOAUTH Authentication required\.\r\n-NOAUTH/);
      const allowed = JSON.parse(
        await redis(`AUTH ${redisPassword}\r\nPING\r\nCONFIG GET protected-mode\r\n`),
      ) as string;
      expect(allowed).to.equal('+OK\r\n+PONG\r\n*2\r\n$14\r\nprotected-mode\r\n$3\r\nyes\r\n');
      // The password is in no variable and no command line: not in `inspect`, not in Redis's own arguments.
      for (const service of ['gateway-1', 'gateway-2', 'redis']) {
        const inspected = await podman.must(['inspect', container(service)]);
        expect(inspected, service).not.to.include(redisPassword);
      }
      expect(
        await podman.must(['inspect', '--format', '{{range .Config.Env}}{{println .}}{{end}}', container('gateway-1')]),
      ).to.include('REDIS_URL_FILE=/run/secrets/redis_url');
      expect(await podman.must(['exec', container('redis'), 'cat', '/proc/1/cmdline'])).not.to.include(redisPassword);
      for (const url of replicas)
        expect((await json(`${url}/readyz`)).body).to.deep.include({ redis: 'ready', rate_limits: 'shared' });
    });

    it("passes its shell-form health checks; the replicas' asks /readyz?degraded=ready", async function () {
      this.timeout(60_000);
      for (const service of ['gateway-1', 'gateway-2', 'redis']) {
        const outcome = await podman.run(['healthcheck', 'run', container(service)]);
        expect(outcome.code, `${service}: ${outcome.stdout}${outcome.stderr}`).to.equal(0);
      }
      expect(
        await podman.must(['inspect', '--format', '{{json .Config.Healthcheck.Test}}', container('gateway-1')]),
      ).to.include('/readyz?degraded=ready');
    });

    it('serves /metrics on port 9464 to the compose network only, not on the published port', async function () {
      this.timeout(60_000);
      for (const service of ['gateway-1', 'gateway-2']) {
        const published = (await podman.must(['port', container(service)])).trim().split('\n');
        expect(published, service).to.have.length(1);
        expect(published[0]).to.match(/^8080\/tcp -> 127\.0\.0\.1:\d+$/);
      }
      expect((await fetch(`${replicas[0]}/metrics`)).status).to.equal(404);
      const scraped = await podman.must([
        'exec',
        container('mock-upstream'),
        'node',
        '-e',
        "fetch('http://gateway-2:9464/metrics').then(async (r) => console.log(r.status, await r.text()))",
      ]);
      expect(scraped).to.match(/^200 /);
      expect(scraped).to.match(/^gateway_build_info\{version="[^"]+",revision="[^"]+",nodejs_version="[^"]+"\} 1$/m);
    });

    it('reads every other setting from the env file: both replicas export traces where it says', async function () {
      this.timeout(30_000);
      for (const service of ['gateway-1', 'gateway-2']) {
        const lines = (await podman.must(['logs', container(service)]))
          .split('\n')
          .filter((line) => line.startsWith('{'))
          .map((line) => JSON.parse(line) as Record<string, unknown>);
        expect(
          lines.find((line) => line.msg === 'tracing on: OTLP traces'),
          service,
        ).to.deep.include({ traces: 'http://mock-upstream:9000/v1/traces' });
      }
    });

    it('has Prometheus scrape both replicas and load the recommended alerts', async function () {
      this.timeout(120_000);
      const api = async (path: string) => (await json(`${prometheus}/api/v1/${path}`)).body.data as Record<string, any>;
      await eventually(
        async () => {
          const targets = (await api('targets')).activeTargets as { labels: { instance: string }; health: string }[];
          return (
            targets
              .filter((target) => target.health === 'up')
              .map((target) => target.labels.instance)
              .sort()
              .join() === 'gateway-1:9464,gateway-2:9464'
          );
        },
        'both replicas scraped',
        90_000,
      );
      const builds = (await api(`query?query=${encodeURIComponent('gateway_build_info')}`)).result as unknown[];
      expect(builds).to.have.length(2);
      const rules = async () =>
        ((await api('rules')).groups as { rules: { name: string; health: string; type: string }[] }[]).flatMap(
          (group) => group.rules,
        );
      expect((await rules()).map((rule) => rule.name)).to.deep.equal([
        'ModelGatewayConfigStale',
        'ModelGatewayUsageQueued',
        'ModelGatewayUpstreamEndpointDown',
        'ModelGatewayHighErrorRate',
        'ModelGatewayTraceSpansDropped',
        'ModelGatewayLimitNearlySpent',
        'ModelGatewayLimitSpent',
      ]);
      // Evaluated without an error (every 30 s).
      await eventually(
        async () => (await rules()).every((rule) => rule.type === 'alerting' && rule.health === 'ok'),
        'every alert rule evaluated',
        60_000,
      );
    });

    it('reloads the mounted config file live on both replicas', async function () {
      this.timeout(60_000);
      const versions = await Promise.all(
        replicas.map(async (url) => (await json(`${url}/readyz`)).body.config_version as string),
      );
      expect(versions[0]).to.equal(versions[1]);
      const file = join(configDir, 'gateway.yaml');
      const text = readFileSync(file, 'utf8');
      expect(text).to.include('\naliases: {}\n');
      writeFileSync(file, text.replace('\naliases: {}\n', '\naliases:\n  beta-latest: beta/beta-fable-5\n'));
      for (const url of replicas) {
        await eventually(
          async () => {
            const body = (await json(`${url}/readyz`)).body;
            return body.config_version !== versions[0] && body.config_stale === false;
          },
          `replica ${url} to reload the edited file`,
          20_000,
        );
      }
    });

    it('lets a replica stopped mid-stream (stop -t 30) finish it whole and store its record', async function () {
      this.timeout(180_000);
      const before = requestsIn(await admin(replicas[1]!));
      const client = new OpenAI({ apiKey: STREAM_KEY, baseURL: `${replicas[0]!}/v1`, maxRetries: 0 });
      const started = Date.now();
      const stream = await client.chat.completions.create({
        model: 'alpha-latest',
        stream: true,
        stream_options: { include_usage: true },
        messages: [{ role: 'user', content: 'A stream that outlives the stop' }],
      });
      const chunks: OpenAI.ChatCompletionChunk[] = [];
      let stopping: Promise<string> | undefined;
      for await (const chunk of stream) {
        chunks.push(chunk);
        // As docs/deploy.md says to stop a replica under podman-compose.
        stopping ??= compose(['stop', '-t', '30', 'gateway-1'], 90_000);
      }
      const streamedMs = Date.now() - started;
      await stopping;
      expect(streamedMs, 'the stream lasted').to.be.greaterThan(12_000);
      expect(chunks.some((chunk) => chunk.choices[0]?.finish_reason === 'stop')).to.equal(true);
      expect(chunks.at(-1)!.usage!.completion_tokens).to.be.greaterThan(0);
      expect(
        (await podman.must(['inspect', '--format', '{{.State.ExitCode}}', container('gateway-1')])).trim(),
      ).to.equal('0');
      expect((await podman.run(['logs', container('gateway-1')])).stdout).to.include(
        '"msg":"shut down: every usage record stored"',
      );
      await eventually(
        async () => requestsIn(await admin(replicas[1]!)) === before + 1,
        "the stream's record in the shared usage",
        10_000,
      );
      await compose(['start', 'gateway-1']);
      await allReady();
    });

    it('rides out a Redis outage; after down and up, replays what each replica spilled', async function () {
      this.timeout(300_000);
      const before = requestsIn(await admin(replicas[0]!));
      await compose(['stop', 'redis'], 60_000);
      for (const url of replicas)
        await eventually(
          async () => (await json(`${url}/readyz`)).body.redis === 'unavailable',
          `replica ${url} to miss Redis`,
          30_000,
        );
      // Degraded but serving: plain /readyz says so, the health check (degraded=ready) stays healthy.
      expect((await json(`${replicas[0]}/readyz`)).status).to.equal(503);
      expect((await podman.run(['healthcheck', 'run', container('gateway-1')])).code).to.equal(0);
      for (const url of replicas) {
        const response = await fetch(`${url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${STREAM_KEY}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'beta-latest', messages: [{ role: 'user', content: 'during the outage' }] }),
        });
        await response.arrayBuffer();
        expect(response.status).to.equal(200);
      }
      await compose(['down', '-t', '30'], 180_000);
      await compose(['up', '-d']);
      await allReady();
      await eventually(
        async () => requestsIn(await admin(replicas[0]!)) === before + 2,
        'the spilled records replayed',
        60_000,
      );
    });
  });
});
