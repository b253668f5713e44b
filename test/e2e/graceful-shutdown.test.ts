import { expect } from 'chai';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { startMockUpstream, type MockUpstream } from '../../mock-upstream/mock-upstream-server.ts';
import { eventually } from '../helpers/eventually.ts';
import { GatewayProcess, type StartCommand } from '../helpers/gateway-process.ts';

const KEY = 'sk-shutdown-test-0001-0123456789abcdef';

interface UsageRow {
  model: string;
  requests: number;
  input_tokens: number;
  output_tokens: number;
}

function startStream(gateway: GatewayProcess, content = 'a stream long enough to outlive the signal') {
  return request(`${gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY}` },
    body: JSON.stringify({ model: 'zeta/zeta-k3', stream: true, messages: [{ role: 'user', content }] }),
  });
}

/** The usage rows a fresh gateway on the same data directory reads back. */
async function storedUsage(env: NodeJS.ProcessEnv): Promise<UsageRow[]> {
  const restarted = await GatewayProcess.start(env);
  try {
    const usage = await request(`${restarted.url}/v1/usage`, { headers: { authorization: `Bearer ${KEY}` } });
    return ((await usage.body.json()) as { data: UsageRow[] }).data;
  } finally {
    await restarted.stop();
  }
}

describe('graceful shutdown', function () {
  this.timeout(120_000);
  let upstream: MockUpstream;
  let env: NodeJS.ProcessEnv;
  let gateway: GatewayProcess | undefined;

  async function setUp(
    chunkDelayMs: number,
    extra: NodeJS.ProcessEnv = {},
    command: StartCommand = 'source',
  ): Promise<GatewayProcess> {
    upstream = await startMockUpstream({ chunkDelayMs });
    const dataDir = await mkdtemp(join(tmpdir(), 'gateway-shutdown-'));
    env = { ZETA_BASE_URL: upstream.url, GATEWAY_API_KEYS: KEY, GATEWAY_DATA_DIR: dataDir, ...extra };
    gateway = await GatewayProcess.start(env, command);
    return gateway;
  }

  afterEach(async () => {
    await gateway?.kill();
    gateway = undefined;
    await upstream?.close();
  });

  it('finishes a stream in flight on SIGTERM, stores its usage, and exits 0', async () => {
    const process = await setUp(100);
    const response = await startStream(process);
    const exited = process.stop();
    const text = await response.body.text();
    expect(text.trimEnd().endsWith('data: [DONE]')).to.equal(true);
    expect(await exited).to.equal(0);
    const rows = await storedUsage(env);
    expect(rows.map((row) => row.model)).to.deep.equal(['zeta/zeta-k3']);
    expect(rows[0]!.output_tokens).to.equal(upstream.requests[0]!.reportedUsage!.outputTokens);
  });

  it('npm start runs the compiled build and delivers SIGTERM to the gateway: the stream finishes, its usage is stored, exit 0', async () => {
    const process = await setUp(100, {}, 'npm-start');
    expect(process.logs.join('')).not.to.contain('tsx');
    const response = await startStream(process);
    process.signal('SIGTERM');
    const text = await response.body.text();
    expect(text.trimEnd().endsWith('data: [DONE]')).to.equal(true);
    expect(await process.exited()).to.equal(0);
    expect(process.logs.join('')).to.contain('every usage record stored');
    const rows = await storedUsage(env);
    expect(rows.map((row) => [row.model, row.requests])).to.deep.equal([['zeta/zeta-k3', 1]]);
    expect(rows[0]!.output_tokens).to.equal(upstream.requests[0]!.reportedUsage!.outputTokens);
  });

  it('ends a stream that outlasts GATEWAY_DRAIN_MS, records its usage as estimated, and exits 0', async () => {
    const process = await setUp(2000, { GATEWAY_DRAIN_MS: '300' });
    const response = await startStream(process, 'a stream far longer than the drain time '.repeat(20));
    await eventually(() => upstream.requests.length === 1, 'the upstream to be called');
    const exited = process.stop();
    const text = await response.body.text().catch(() => 'cut');
    expect(text.includes('data: [DONE]')).to.equal(false);
    expect(await exited).to.equal(0);
    expect(process.logs.join('')).to.contain('drain time over');
    const rows = await storedUsage(env);
    expect(rows.map((row) => [row.model, row.requests])).to.deep.equal([['zeta/zeta-k3', 1]]);
    expect(rows[0]!.input_tokens).to.be.greaterThan(0);
  });

  it('reloads the configuration on SIGHUP: the stream goes on and the gateway keeps serving', async () => {
    const process = await setUp(100);
    const response = await startStream(process);
    process.signal('SIGHUP');
    const text = await response.body.text();
    expect(text.trimEnd().endsWith('data: [DONE]')).to.equal(true);
    expect((await request(`${process.url}/healthz`)).statusCode).to.equal(200);
    expect(process.exitCode).to.equal(null);
    await eventually(() => process.logs.join('').includes('configuration reloaded'), 'the reload log line');
    expect(await process.stop()).to.equal(0);
  });
});
