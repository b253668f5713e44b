import { expect } from 'chai';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import type { Page } from 'playwright-core';
import { startMockUpstream, type MockUpstream } from '../../mock-upstream/mock-upstream-server.ts';
import { eventually } from '../helpers/eventually.ts';
import { writeJavaScriptPlugin } from '../helpers/external-plugin.ts';
import { GatewayProcess } from '../helpers/gateway-process.ts';
import { launchBrowser, type HeadlessBrowser } from '../helpers/headless-browser.ts';
import { VENDORS } from '../helpers/test-gateway.ts';
import { accountJourney } from './account-journey.ts';
import { teamBudgetJourney } from './account-team-journey.ts';

const ADMIN_TOKEN = 'compiled-build-admin-token-0123456789abcdef';
const CLIENT_KEY = 'sk-compiled-build-key-0123456789abcdef0123';
const UPSTREAM_KEY = 'compiled-upstream-key';

/** The content type each kind of file the account page loads must be served with. */
const CONTENT_TYPES: Record<string, RegExp> = {
  html: /^text\/html\b/,
  css: /^text\/css\b/,
  js: /^(text|application)\/javascript\b/,
};

/** Every same-origin file a page of the account UI loads: its HTML's scripts and styles, and what those import. */
async function accountAssets(base: string): Promise<Map<string, { status: number; type: string }>> {
  const seen = new Map<string, { status: number; type: string }>();
  const pending = ['/account'];
  while (pending.length) {
    const path = pending.shift()!;
    if (seen.has(path)) continue;
    const response = await fetch(`${base}${path}`);
    const text = await response.text();
    seen.set(path, { status: response.status, type: response.headers.get('content-type') ?? '' });
    const references = [
      ...text.matchAll(/<(?:script|link)\b[^>]*?\b(?:src|href)="(\/[^"]+)"/g),
      ...text.matchAll(/\bimport\s[^'"]*?['"](\.{1,2}\/[^'"]+)['"]/g),
      ...text.matchAll(/url\(['"]?(\/[^'")]+)['"]?\)/g),
    ].map(
      (match) =>
        new URL(
          match[1]!,
          `${base}${path.endsWith('/') || path === '/account' ? `${path.replace(/\/?$/, '/')}` : path}`,
        ).pathname,
    );
    pending.push(...references);
  }
  return seen;
}

describe('the compiled build, run as npm start runs it (node dist/src/main.js)', function () {
  this.timeout(90_000);
  let upstream: MockUpstream;
  let outside: string;
  let gateway: GatewayProcess;
  let browser: HeadlessBrowser | undefined;

  before(async () => {
    upstream = await startMockUpstream({ apiKey: UPSTREAM_KEY });
    outside = await mkdtemp(join(tmpdir(), 'gateway-compiled-'));
    await writeJavaScriptPlugin(join(outside, 'plugins'));
    gateway = await GatewayProcess.start(
      {
        GATEWAY_PLUGIN_PATH: join(outside, 'plugins'),
        GATEWAY_API_KEYS: CLIENT_KEY,
        GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN,
        GATEWAY_DATA_DIR: join(outside, 'data'),
        ...Object.fromEntries(
          [...VENDORS, 'sigma'].flatMap((vendor) => [
            [`${vendor.toUpperCase()}_BASE_URL`, upstream.url],
            [`${vendor.toUpperCase()}_API_KEY`, UPSTREAM_KEY],
          ]),
        ),
      },
      'compiled',
    );
  });
  after(async () => {
    await browser?.close();
    await gateway?.stop();
    await upstream?.close();
    await rm(outside, { recursive: true, force: true });
  });

  const client = () => new OpenAI({ baseURL: `${gateway.url}/v1`, apiKey: CLIENT_KEY, maxRetries: 0 });

  it('runs the compiled JavaScript, not the source', async () => {
    expect(gateway.logs.join('')).to.include('model gateway listening on');
    const commandLine = (await readFile(`/proc/${gateway.pid}/cmdline`, 'utf8')).split('\0').filter(Boolean);
    expect(commandLine).to.deep.equal([process.execPath, 'dist/src/main.js']);
  });

  it('serves /account and every file it loads with 200 and the right content type', async () => {
    const assets = await accountAssets(gateway.url);
    expect([...assets.keys()]).to.include.members([
      '/account',
      '/account/account.css',
      '/account/app.js',
      '/account/vendor/chart.umd.min.js',
    ]);
    expect(assets.size).to.be.greaterThan(5);
    for (const [path, { status, type }] of assets) {
      expect(status, path).to.equal(200);
      const kind = path === '/account' ? 'html' : path.split('.').pop()!;
      expect(type, path).to.match(CONTENT_TYPES[kind]!);
    }
  });

  it('serves /openapi.json and /metrics', async () => {
    const openapi = await fetch(`${gateway.url}/openapi.json`);
    expect(openapi.status).to.equal(200);
    expect(openapi.headers.get('content-type')).to.match(/^application\/json/);
    expect(((await openapi.json()) as { openapi: string }).openapi).to.match(/^3\./);
    const metrics = await fetch(`${gateway.url}/metrics`);
    expect(metrics.status).to.equal(200);
    expect(metrics.headers.get('content-type')).to.match(/^text\/plain/);
    expect(await metrics.text()).to.include('gateway_');
  });

  it('answers chat in JSON and SSE, serves the external plugin, and reads the usage back', async () => {
    const answer = await client().chat.completions.create({
      model: 'alpha-latest',
      messages: [{ role: 'user', content: 'Hello compiled' }],
    });
    expect(answer.choices[0]!.message.content).to.equal('Mock reply to: Hello compiled');
    const stream = await client().chat.completions.create({
      model: 'alpha-latest',
      messages: [{ role: 'user', content: 'Stream' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    expect(text).to.equal('Mock reply to: Stream');
    const external = await client().chat.completions.create({
      model: 'sigma/sigma-2',
      messages: [{ role: 'user', content: 'Hello sigma' }],
    });
    expect(external.choices[0]!.message.content).to.equal('Mock reply to: Hello sigma');
    expect(upstream.requests.map((sent) => sent.body.model).slice(-1)).to.deep.equal(['sigma-2-2026']);
    await eventually(async () => {
      const usage = (await (
        await fetch(`${gateway.url}/v1/usage`, { headers: { authorization: `Bearer ${CLIENT_KEY}` } })
      ).json()) as { data: { model: string; requests: number }[] };
      const byModel = Object.fromEntries(usage.data.map((row) => [row.model, row.requests]));
      return (
        byModel['sigma/sigma-2'] === 1 &&
        Object.entries(byModel).some(([model, requests]) => model.startsWith('alpha/') && requests === 2)
      );
    }, 'the usage of the three calls');
  });

  it('passes the account page journey in Chromium', async () => {
    browser = await launchBrowser({ permissions: ['clipboard-read', 'clipboard-write'] });
    const page: Page = await browser.newPage();
    page.setDefaultTimeout(10_000);
    await accountJourney(
      { url: gateway.url, adminToken: ADMIN_TOKEN, providers: VENDORS.length + 1, upstreamKey: UPSTREAM_KEY },
      browser,
      page,
    );
  });

  it('runs a team on the account page: budget, key in it, use and cost on Limits and Usage, budget change enforced, 409 on delete', async () => {
    browser ??= await launchBrowser();
    const page: Page = await browser.newPage();
    page.setDefaultTimeout(10_000);
    await teamBudgetJourney(
      { url: gateway.url, adminToken: ADMIN_TOKEN, providers: VENDORS.length + 1, upstreamKey: UPSTREAM_KEY },
      browser,
      page,
    );
  });
});
