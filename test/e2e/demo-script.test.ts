import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** Runs `npm run demo`'s script on a free port and waits for its whole banner. */
async function startDemo(env: NodeJS.ProcessEnv): Promise<{ child: ChildProcess; banner: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/demo.ts'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const banner = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the demo printed no banner:\n${output}`)), 20_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('Ctrl-C stops it.')) {
        clearTimeout(timer);
        resolve(output);
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the demo exited with ${code}:\n${output}`));
    });
  });
  return { child, banner };
}

async function stopDemo(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

describe('npm run demo', function () {
  this.timeout(60_000);
  let dataDir: string;
  let child: ChildProcess | undefined;
  beforeEach(async () => (dataDir = await mkdtemp(join(tmpdir(), 'gateway-demo-'))));
  afterEach(async () => {
    await stopDemo(child);
    child = undefined;
    await rm(dataDir, { recursive: true, force: true });
  });

  it('prints an API key, a fresh admin token shown once and the account page, where that token signs in', async () => {
    const started = await startDemo({ GATEWAY_DATA_DIR: dataDir });
    child = started.child;
    const { banner } = started;
    const url = /Model gateway running at (http:\/\/127\.0\.0\.1:\d+)/.exec(banner)?.[1];
    const key = /API key \(shown once\): (sk-\S+)/.exec(banner)?.[1];
    const token = /Admin token \(shown once\): (\S+)/.exec(banner)?.[1];
    expect(url, banner).to.be.a('string');
    expect(key, banner).to.be.a('string');
    expect(token, banner).to.be.a('string');
    expect(token!.length).to.be.at.least(32);
    expect(banner.split(token!)).to.have.length(2);
    expect(banner).to.contain(`Account page (sign in with the admin token): ${url}/account\n`);

    const page = await fetch(`${url}/account`);
    expect(page.status).to.equal(200);
    expect(await (await fetch(`${url}/account/api/session`)).json()).to.include({ enabled: true, signed_in: false });
    const signedIn = await fetch(`${url}/account/api/session`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token }),
    });
    expect(signedIn.status).to.equal(201);
    const cookie = signedIn.headers.get('set-cookie')!.split(';')[0]!;
    const keys = (await (await fetch(`${url}/account/api/keys`, { headers: { cookie } })).json()) as {
      data: { name: string }[];
    };
    expect(keys.data.map((entry) => entry.name)).to.deep.equal(['demo']);
    const admin = await fetch(`${url}/admin/keys`, { headers: { authorization: `Bearer ${token}` } });
    expect(admin.status).to.equal(200);

    const chat = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'alpha-latest', messages: [{ role: 'user', content: 'Hello' }] }),
    });
    expect(chat.status).to.equal(200);
    await chat.text();
  });

  it('keeps a GATEWAY_ADMIN_TOKEN that is set, without printing it', async () => {
    const token = 'operator-chosen-admin-token-0123456789abcdef';
    const started = await startDemo({ GATEWAY_DATA_DIR: dataDir, GATEWAY_ADMIN_TOKEN: token });
    child = started.child;
    expect(started.banner).to.contain('Admin token: the GATEWAY_ADMIN_TOKEN you set').and.not.to.contain(token);
    const url = /Model gateway running at (http:\/\/127\.0\.0\.1:\d+)/.exec(started.banner)![1]!;
    expect((await fetch(`${url}/admin/keys`, { headers: { authorization: `Bearer ${token}` } })).status).to.equal(200);
  });
});
