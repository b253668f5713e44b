import { expect } from 'chai';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Socket } from 'node:net';
import { PassThrough } from 'node:stream';
import { Agent, request } from 'undici';
import { loadConfig } from '../../../src/config/gateway-config.ts';
import { eventually, sleep } from '../../helpers/eventually.ts';
import { postHead, RawClient } from '../../helpers/raw-client.ts';
import { startTestGateway, TEST_KEY, type TestGateway } from '../../helpers/test-gateway.ts';

// Distinct loopback addresses stand for distinct clients.
const ATTACKER = '127.0.0.2';
const OTHER = '127.0.0.3';
const CHAT = JSON.stringify({ model: 'zeta/zeta-k3', messages: [{ role: 'user', content: 'hi' }] });
const PARTIAL_CHAT = '{"model":"zeta/zeta-k3",';

function metric(text: string, reason: string): number {
  const match = new RegExp(`^gateway_refusals_total\\{reason="${reason}"\\} (\\d+)`, 'm').exec(text);
  return match ? Number(match[1]) : Number.NaN;
}

describe('per-address caps on connections and half-sent requests', function () {
  this.timeout(60_000);
  let gateway: TestGateway | undefined;
  let logs = '';
  /** Requests whose headers the gateway has read. */
  let seen = 0;
  /** Client ends (`address:port`) of the connections the gateway has seen closed. */
  let closedByGateway = new Set<string>();
  const clients: RawClient[] = [];
  const agents: Agent[] = [];

  afterEach(async () => {
    clients.splice(0).forEach((client) => client.close());
    await Promise.all(agents.splice(0).map((agent) => agent.close()));
    await gateway?.close();
    gateway = undefined;
  });

  async function start(env: NodeJS.ProcessEnv): Promise<TestGateway> {
    logs = '';
    const logTo = new PassThrough();
    logTo.on('data', (chunk: Buffer) => (logs += chunk.toString()));
    gateway = await startTestGateway({ env: { LOG_LEVEL: 'warn', RATE_LIMIT_MAX: '100000', ...env }, logTo });
    seen = 0;
    gateway.gateway.server.on('request', () => (seen += 1));
    closedByGateway = new Set();
    // After the caps' own listener: its close handler has run when this one does.
    gateway.gateway.server.on('connection', (socket: Socket) => {
      const end = `${socket.remoteAddress}:${socket.remotePort}`;
      socket.once('close', () => closedByGateway.add(end));
    });
    return gateway;
  }

  async function open(localAddress: string, allowHalfOpen = false): Promise<RawClient> {
    const client = await RawClient.open(gateway!.url, { localAddress, allowHalfOpen });
    clients.push(client);
    return client;
  }

  /** A request on a new connection from `localAddress` (closed after the answer). */
  async function fromAddress(
    localAddress: string,
    path: string,
    body?: string,
  ): Promise<{ status: number; headers: Record<string, unknown>; body: unknown }> {
    // undici reads `localAddress` from the agent's own options (not from `connect`, where it is ignored).
    const agent = new Agent({ localAddress });
    agents.push(agent);
    const response = await request(`${gateway!.url}${path}`, {
      dispatcher: agent,
      reset: true,
      method: body === undefined ? 'GET' : 'POST',
      body,
      headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' },
    });
    const text = await response.body.text();
    return {
      status: response.statusCode,
      headers: response.headers,
      body: text.startsWith('{') ? JSON.parse(text) : text,
    };
  }

  it('keeps serving a second address while one address holds half-sent requests on as many connections as it can', async () => {
    await start({
      GATEWAY_MAX_CONNECTIONS: '40',
      GATEWAY_HEADERS_TIMEOUT_MS: '20000',
      GATEWAY_REQUEST_TIMEOUT_MS: '30000',
    });
    // The attacker keeps 60 connections going, reconnecting each as it is refused or cut: half of them
    // hold an unauthenticated upload that never ends, half never finish their headers.
    let attacking = true;
    let attempts = 0;
    const attack = async (slot: number): Promise<void> => {
      while (attacking) {
        attempts += 1;
        const client = await open(ATTACKER, true).catch(() => undefined);
        if (!client) continue;
        if (slot % 2 === 0) {
          client.write(postHead('/v1/chat/completions', 'sk-not-a-known-key-0001', 100_000));
          client.trickle(PARTIAL_CHAT);
        } else {
          client.write('POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\n');
        }
        await eventually(() => client.closed || !attacking, 'the connection to end', 60_000);
        client.close();
      }
    };
    const attackers = Array.from({ length: 60 }, (_, slot) => attack(slot));
    await eventually(() => attempts > 80, 'the attacker to reconnect after refusals', 20_000);
    try {
      for (let attempt = 0; attempt < 40; attempt += 1) {
        const answer = await fromAddress(OTHER, '/v1/chat/completions', CHAT);
        expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
      }
    } finally {
      attacking = false;
      clients.forEach((client) => client.close());
      await Promise.all(attackers);
    }
    const metrics = (await fromAddress(OTHER, '/metrics')).body as string;
    expect(metric(metrics, 'connections_per_address')).to.be.above(0);
    expect(metric(metrics, 'max_connections')).to.equal(0);
  });

  it('leaves a third address served while two addresses hold their full default share of a small global cap', async () => {
    // Defaults only: a tenth of the global cap per address, at least 16 but never above a quarter of it.
    await start({ GATEWAY_MAX_CONNECTIONS: '40' });
    const share = loadConfig({ GATEWAY_MAX_CONNECTIONS: '40' }, '/nonexistent').maxConnectionsPerAddress;
    for (const address of ['127.0.0.1', ATTACKER]) {
      for (let index = 0; index < share; index += 1) await open(address);
      // The address's share is full: one more of it is refused as its own (429), not as the gateway's (503).
      const refused = await open(address);
      await eventually(() => refused.closed, `the connection over the share of ${address} to be refused`);
      expect(refused.received, address).to.match(/^HTTP\/1.1 429 /);
    }
    for (let attempt = 0; attempt < 5; attempt += 1) {
      const answer = await fromAddress(OTHER, '/v1/chat/completions', CHAT);
      expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
    }
    const metrics = (await fromAddress(OTHER, '/metrics')).body as string;
    expect(metric(metrics, 'connections_per_address')).to.equal(2);
    expect(metric(metrics, 'max_connections')).to.equal(0);
  });

  it('counts every spelling of one client a trusted proxy names as one address: bad keys with varying ports are throttled', async () => {
    // The default budget of failed credentials (20 a minute); the test's own connections come from
    // loopback, the trusted proxy.
    await start({ GATEWAY_TRUSTED_PROXIES: 'loopback' });
    const spellings = [
      (port: number) => `10.0.0.1:${port}`,
      (port: number) => `[::ffff:10.0.0.1]:${port}`,
      (port: number) => `010.0.0.1:${port}`,
      (port: number) => `10.0.0.1%eth${port}`,
      (port: number) => `167772161:${port}`,
      (port: number) => `198.51.100.${port % 250}, 10.0.0.1:${port}`,
      () => '::ffff:a00:1',
      () => '010.000.000.001',
    ];
    const statuses: number[] = [];
    for (let index = 0; index < 60; index += 1) {
      const response = await request(`${gateway!.url}/v1/usage`, {
        headers: {
          authorization: `Bearer sk-not-a-known-key-${index}-0000`,
          'x-forwarded-for': spellings[index % spellings.length]!(40_000 + index),
        },
      });
      await response.body.dump();
      statuses.push(response.statusCode);
    }
    expect(statuses).to.deep.equal([...Array(20).fill(401), ...Array(40).fill(429)]);
    // The client is refused under any spelling, its valid key included; another client is not.
    const withKey = async (forwardedFor: string) => {
      const response = await request(`${gateway!.url}/v1/usage`, {
        headers: { authorization: `Bearer ${TEST_KEY}`, 'x-forwarded-for': forwardedFor },
      });
      await response.body.dump();
      return response.statusCode;
    };
    expect(await withKey('10.0.0.1:1')).to.equal(429);
    expect(await withKey('10.0.0.2:1')).to.equal(200);
  });

  it('caps the open connections of one address with a JSON 429, logged once per burst, and accepts it again when one closes', async () => {
    await start({ GATEWAY_MAX_CONNECTIONS: '20', GATEWAY_MAX_CONNECTIONS_PER_ADDRESS: '3' });
    const held = [await open(ATTACKER), await open(ATTACKER), await open(ATTACKER)];
    for (let refusal = 0; refusal < 2; refusal += 1) {
      const refused = await open(ATTACKER);
      await eventually(() => refused.closed, 'the refused connection to close');
      const [head, body] = refused.received.split('\r\n\r\n');
      expect(head).to.match(/^HTTP\/1.1 429 /);
      expect(head).to.match(/\r\nRetry-After: 1\r\n/);
      expect(head).to.match(/\r\nContent-Type: application\/json/);
      expect(JSON.parse(body!)).to.deep.equal({
        detail: 'This address has too many open connections (at most 3); please retry shortly',
      });
    }
    expect((await fromAddress(OTHER, '/healthz')).status).to.equal(200);
    const end = `${held[0]!.socket.localAddress}:${held[0]!.socket.localPort}`;
    held[0]!.close();
    await eventually(() => closedByGateway.has(end), 'the gateway to see the connection closed');
    expect((await fromAddress(ATTACKER, '/healthz')).status, 'the address accepted again').to.equal(200);
    expect(logs.match(/per-address connection cap reached/g)).to.have.length(1);
    expect(logs).to.contain(`"address":"${ATTACKER}"`);
    expect(metric((await fromAddress(OTHER, '/metrics')).body as string, 'connections_per_address')).to.equal(2);
  });

  it('caps the half-sent requests of one address with a 429 in the route envelope, and serves its complete requests meanwhile', async () => {
    await start({ GATEWAY_MAX_CONNECTIONS: '20', GATEWAY_MAX_PENDING_REQUESTS_PER_ADDRESS: '2' });
    const halfSent = [await open(ATTACKER), await open(ATTACKER)];
    for (const client of halfSent)
      client.write(postHead('/v1/chat/completions', TEST_KEY, Buffer.byteLength(CHAT)) + PARTIAL_CHAT);
    await eventually(() => seen === 2, 'the gateway to read both heads');
    const refused = await open(ATTACKER, true);
    refused.write(postHead('/v1/chat/completions', TEST_KEY, 100_000) + PARTIAL_CHAT);
    refused.trickle('a');
    await eventually(() => refused.received.includes('\r\n\r\n{'), 'the 429');
    const [head, body] = refused.received.split('\r\n\r\n');
    expect(head).to.match(/^HTTP\/1.1 429 /);
    expect(head).to.match(/\r\nretry-after: 1\r\n/i);
    const message = 'This address has too many requests still sending their body (at most 2); please retry shortly';
    expect(JSON.parse(body!)).to.deep.equal({
      detail: message,
      error: { message, type: 'rate_limit_error', param: null, code: 'GW_ERR_RATE_LIMITED' },
    });
    // Not half-sent: a request whose body came with its headers, and one without a body.
    expect((await fromAddress(ATTACKER, '/v1/chat/completions', CHAT)).status).to.equal(200);
    expect((await fromAddress(ATTACKER, '/healthz')).status).to.equal(200);
    // Another address's upload is admitted: it is answered once its body is complete.
    const other = await open(OTHER);
    other.write(postHead('/v1/chat/completions', TEST_KEY, Buffer.byteLength(CHAT)) + PARTIAL_CHAT);
    await sleep(200);
    other.write(CHAT.slice(PARTIAL_CHAT.length));
    await eventually(() => other.received.includes('\r\n\r\n'), 'the answer to the other address');
    expect(other.received).to.match(/^HTTP\/1.1 200 /);
    // A refusal lingers briefly (2 s), not for the 30 s of other early answers.
    await eventually(() => refused.closed, 'the refused upload to be closed', 10_000);
    // Once one of them completes, the address may start another upload.
    halfSent[0]!.write(CHAT.slice(PARTIAL_CHAT.length));
    await eventually(() => halfSent[0]!.received.startsWith('HTTP/1.1 200 '), 'the completed upload to be answered');
    const next = await open(ATTACKER);
    next.write(postHead('/v1/chat/completions', TEST_KEY, Buffer.byteLength(CHAT)) + PARTIAL_CHAT);
    await sleep(200);
    next.write(CHAT.slice(PARTIAL_CHAT.length));
    await eventually(() => next.received.includes('\r\n\r\n'), 'the answer to the new upload');
    expect(next.received).to.match(/^HTTP\/1.1 200 /);
    expect(logs.match(/per-address cap of half-sent requests reached/g)).to.have.length(1);
    expect(metric((await fromAddress(OTHER, '/metrics')).body as string, 'pending_requests_per_address')).to.equal(1);
  });

  it("does not cap a trusted proxy's connections per address, and caps half-sent requests per client it names", async () => {
    await start({
      GATEWAY_MAX_CONNECTIONS: '20',
      GATEWAY_MAX_CONNECTIONS_PER_ADDRESS: '2',
      GATEWAY_MAX_PENDING_REQUESTS_PER_ADDRESS: '1',
      GATEWAY_TRUSTED_PROXIES: ATTACKER,
    });
    const viaProxy: RawClient[] = [];
    for (let index = 0; index < 4; index += 1) viaProxy.push(await open(ATTACKER, true));
    const upload = (client: RawClient, forwardedFor: string) =>
      client.write(
        postHead('/v1/chat/completions', TEST_KEY, 100_000, `X-Forwarded-For: ${forwardedFor}`) + PARTIAL_CHAT,
      );
    upload(viaProxy[0]!, '198.51.100.1');
    await eventually(() => seen === 1, 'the gateway to read the first head');
    upload(viaProxy[1]!, '198.51.100.1');
    upload(viaProxy[2]!, '198.51.100.2');
    await eventually(() => viaProxy[1]!.received.includes('\r\n\r\n{'), 'the 429 to the second upload of 198.51.100.1');
    expect(viaProxy[1]!.received).to.match(/^HTTP\/1.1 429 /);
    await sleep(200);
    for (const index of [0, 2, 3]) expect(viaProxy[index]!.received, `connection ${index}`).to.equal('');
    expect(logs).to.contain('"address":"198.51.100.1"');
    // An untrusted address stays capped per address.
    await open(OTHER);
    await open(OTHER);
    const refused = await open(OTHER);
    await eventually(() => refused.closed, 'the third connection of the untrusted address to be refused');
    expect(refused.received).to.match(/^HTTP\/1.1 429 /);
  });

  it('reads the per-address settings from env over the file, derives defaults from the global cap, and refuses caps above it', async () => {
    const directory = await mkdtemp(join(tmpdir(), 'address-caps-'));
    try {
      const file = join(directory, 'gateway.yaml');
      await writeFile(
        file,
        'server:\n  maxConnections: 100\n  maxConnectionsPerAddress: 10\n  maxPendingRequestsPerAddress: 4\n',
      );
      expect(loadConfig({ GATEWAY_CONFIG: file }, directory)).to.deep.include({
        maxConnections: 100,
        maxConnectionsPerAddress: 10,
        maxPendingRequestsPerAddress: 4,
      });
      expect(
        loadConfig({ GATEWAY_CONFIG: file, GATEWAY_MAX_CONNECTIONS_PER_ADDRESS: '20' }, directory),
      ).to.deep.include({ maxConnectionsPerAddress: 20 });
      await writeFile(file, 'server:\n  maxConnections: 100\n  maxPendingRequestsPerAddress: 101\n');
      expect(() => loadConfig({ GATEWAY_CONFIG: file }, directory)).to.throw(
        'server.maxPendingRequestsPerAddress (101) cannot be more than the open connections at most (100)',
      );
    } finally {
      await rm(directory, { recursive: true, force: true });
    }
    expect(loadConfig({ GATEWAY_MAX_CONNECTIONS: '200' }, '/nonexistent')).to.deep.include({
      maxConnections: 200,
      maxConnectionsPerAddress: 20,
      maxPendingRequestsPerAddress: 10,
    });
    expect(loadConfig({ GATEWAY_MAX_CONNECTIONS: '3' }, '/nonexistent')).to.deep.include({
      maxConnectionsPerAddress: 1,
      maxPendingRequestsPerAddress: 1,
    });
    const set = loadConfig(
      {
        GATEWAY_MAX_CONNECTIONS: '200',
        GATEWAY_MAX_CONNECTIONS_PER_ADDRESS: '30',
        GATEWAY_MAX_PENDING_REQUESTS_PER_ADDRESS: '5',
      },
      '/nonexistent',
    );
    expect(set).to.deep.include({ maxConnectionsPerAddress: 30, maxPendingRequestsPerAddress: 5 });
    expect(() =>
      loadConfig({ GATEWAY_MAX_CONNECTIONS: '200', GATEWAY_MAX_CONNECTIONS_PER_ADDRESS: '300' }, '/nonexistent'),
    ).to.throw('GATEWAY_MAX_CONNECTIONS_PER_ADDRESS (300) cannot be more than the open connections at most (200)');
    expect(() => loadConfig({ GATEWAY_MAX_PENDING_REQUESTS_PER_ADDRESS: '0' }, '/nonexistent')).to.throw(
      /GATEWAY_MAX_PENDING_REQUESTS_PER_ADDRESS must be an integer >= 1/,
    );
  });
});
