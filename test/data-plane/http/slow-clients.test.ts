import { expect } from 'chai';
import { request } from 'undici';
import { eventually } from '../../helpers/eventually.ts';
import { postHead, RawClient } from '../../helpers/raw-client.ts';
import { startTestGateway, TEST_KEY, type TestGateway } from '../../helpers/test-gateway.ts';

describe('slow clients and connection limits', function () {
  this.timeout(30_000);
  let gateway: TestGateway | undefined;
  const clients: RawClient[] = [];

  afterEach(async () => {
    clients.splice(0).forEach((client) => client.close());
    await gateway?.close();
    gateway = undefined;
  });

  async function open(allowHalfOpen = false): Promise<RawClient> {
    const client = await RawClient.open(gateway!.url, { allowHalfOpen });
    clients.push(client);
    return client;
  }

  it('closes the connection after answering 401 before a slow body arrived', async () => {
    gateway = await startTestGateway();
    const client = await open();
    client.write(postHead('/v1/chat/completions', 'sk-not-a-known-key-0001', 100_000));
    client.write('{"model":');
    await eventually(() => client.received.includes('\r\n\r\n'), 'the 401');
    expect(client.received).to.match(/^HTTP\/1.1 401 /);
    expect(client.received.toLowerCase()).to.contain('connection: close');
    await eventually(() => client.closed, 'the gateway to close the connection');
  });

  it('cuts a client that does not finish its headers within GATEWAY_HEADERS_TIMEOUT_MS', async () => {
    gateway = await startTestGateway({
      env: { GATEWAY_HEADERS_TIMEOUT_MS: '500', GATEWAY_REQUEST_TIMEOUT_MS: '5000' },
    });
    const client = await open();
    client.write('POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\n');
    await eventually(() => client.closed, 'the gateway to close the connection', 5000);
    expect(client.received).to.match(/^(HTTP\/1.1 408 |$)/);
  });

  it('answers 408 and closes when a body does not arrive within GATEWAY_REQUEST_TIMEOUT_MS', async () => {
    gateway = await startTestGateway({
      env: { GATEWAY_HEADERS_TIMEOUT_MS: '500', GATEWAY_REQUEST_TIMEOUT_MS: '1000' },
    });
    const client = await open();
    client.write(postHead('/v1/chat/completions', TEST_KEY, 1000));
    client.write('{"model":"zeta/zeta-k3",');
    await eventually(() => client.closed, 'the gateway to close the connection', 6000);
    expect(client.received).to.match(/^HTTP\/1.1 408 /);
    expect((await request(`${gateway.url}/healthz`)).statusCode).to.equal(200);
  });

  it('answers 408 and closes when a body trickles in at 1 byte/s past GATEWAY_REQUEST_TIMEOUT_MS', async () => {
    gateway = await startTestGateway({
      env: { GATEWAY_HEADERS_TIMEOUT_MS: '500', GATEWAY_REQUEST_TIMEOUT_MS: '2000' },
    });
    const client = await open(true);
    client.write(postHead('/v1/chat/completions', TEST_KEY, 1000));
    client.trickle('{"model":"zeta/zeta-k3","messages":[]}');
    // A bound well below the 30 s a lingering close may take: the request timeout ends it.
    await eventually(() => client.closed, 'the gateway to close the connection', 15_000);
    expect(client.received).to.match(/^HTTP\/1.1 408 /);
  });

  it('reads a 401 given while a body trickles in, and still closes at GATEWAY_REQUEST_TIMEOUT_MS', async () => {
    gateway = await startTestGateway({
      env: { GATEWAY_HEADERS_TIMEOUT_MS: '500', GATEWAY_REQUEST_TIMEOUT_MS: '2000' },
    });
    const client = await open(true);
    client.write(postHead('/v1/chat/completions', 'sk-not-a-known-key-0001', 100_000));
    client.trickle('{"model":"zeta/zeta-k3","messages":[]}');
    await eventually(() => client.received.includes('Invalid API key'), 'the 401');
    expect(client.received).to.match(/^HTTP\/1.1 401 /);
    // The gateway lingers, reading the body, but no longer than the request may take.
    await eventually(() => client.closed, 'the gateway to close the connection', 15_000);
    expect(client.received).not.to.contain('HTTP/1.1 408');
  });

  it('refuses connections over GATEWAY_MAX_CONNECTIONS at once with a JSON 503, and accepts again when some close', async () => {
    gateway = await startTestGateway({
      env: { GATEWAY_MAX_CONNECTIONS: '8', GATEWAY_MAX_CONNECTIONS_PER_ADDRESS: '8' },
    });
    const idle = [];
    for (let index = 0; index < 8; index += 1) idle.push(await open());
    const refused = await request(`${gateway.url}/healthz`, { reset: true });
    expect(refused.statusCode).to.equal(503);
    expect(refused.headers['retry-after']).to.equal('1');
    expect(await refused.body.json()).to.deep.equal({
      detail: 'The gateway has too many open connections; please retry shortly',
    });
    idle.slice(0, 4).forEach((client) => client.close());
    await eventually(
      async () => (await request(`${gateway!.url}/healthz`, { reset: true })).statusCode === 200,
      'a connection to be accepted again',
    );
  });

  it('never serves a request sent on a refused connection, and the refused client reads its 503 while uploading', async () => {
    gateway = await startTestGateway({
      env: { GATEWAY_MAX_CONNECTIONS: '2', GATEWAY_MAX_CONNECTIONS_PER_ADDRESS: '2' },
    });
    let served = 0;
    gateway.gateway.server.on('request', () => (served += 1));
    await open();
    await open();
    const refused = await open(true);
    // A whole request, then a large body it keeps sending: the gateway reads none of it as a request.
    refused.write(postHead('/v1/chat/completions', TEST_KEY, 50_000_000));
    const chunk = 'a'.repeat(1024 * 1024);
    for (let sent = 0; sent < 8 && !refused.closed; sent += 1) refused.write(chunk);
    await eventually(() => refused.received.includes('too many open connections'), 'the 503');
    expect(refused.received).to.match(/^HTTP\/1.1 503 /);
    // Still sending, so that the client sees the gateway's close (a reset) rather than only its end of stream.
    refused.trickle('a');
    await eventually(() => refused.closed, 'the gateway to close the refused connection', 15_000);
    expect(served).to.equal(0);
  });
});
