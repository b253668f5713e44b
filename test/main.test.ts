import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GatewayProcess } from './helpers/gateway-process.ts';

describe('the start-up line', function () {
  this.timeout(60_000);
  let dir: string;
  let gateway: GatewayProcess | undefined;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gateway-main-'));
  });
  afterEach(async () => {
    await gateway?.stop();
    gateway = undefined;
    await rm(dir, { recursive: true, force: true });
  });

  const listeningLine = (process: GatewayProcess) =>
    process.logs
      .join('')
      .split('\n')
      .find((line) => line.includes('model gateway listening on'))!;

  it('says the host in force: HOST=0.0.0.0 as every interface, never as 127.0.0.1', async () => {
    gateway = await GatewayProcess.start({ HOST: '0.0.0.0', GATEWAY_DATA_DIR: dir });
    const line = listeningLine(gateway);
    expect(JSON.parse(line)).to.deep.include({ url: gateway.url });
    expect(JSON.parse(line).msg).to.match(/^model gateway listening on http:\/\/0\.0\.0\.0:\d+ \(every interface\)$/);
    expect(line).not.to.contain('127.0.0.1');
    const port = new URL(gateway.url).port;
    expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).to.equal(200);
  });

  it('says the address it is bound to for one host', async () => {
    gateway = await GatewayProcess.start({ HOST: '127.0.0.1', GATEWAY_DATA_DIR: dir });
    expect(JSON.parse(listeningLine(gateway)).msg).to.match(/^model gateway listening on http:\/\/127\.0\.0\.1:\d+$/);
  });
});
