import { expect } from 'chai';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { launchBrowser, screenshot, type HeadlessBrowser } from '../helpers/headless-browser.ts';
import { startTestGateway, type TestGateway } from '../helpers/test-gateway.ts';
import { accessibilityViolations, rowCells } from './account-journey.ts';

const ADMIN_TOKEN = 'account-usage-page-admin-token-0123456789abcdef';
const GUARDRAILS = `guardrails:
  - { name: no-project-codes, use: regex, on: request, action: block, patterns: ['PROJECT-[0-9]{4}'] }
`;
/** The text the guardrail blocks: the page must never show any of it. */
const BLOCKED_TEXT = 'Plan for PROJECT-4711 launch';

interface UsageRow {
  readonly key_id?: string;
  readonly team?: string | null;
  readonly model?: string;
  readonly requests: number;
  readonly total_tokens: number;
  readonly cost_usd: number;
  readonly cache_hits: number;
  readonly saved_usd: number;
}

const dollars = new Intl.NumberFormat('en-US', {
  style: 'currency',
  currency: 'USD',
  minimumFractionDigits: 2,
  maximumFractionDigits: 2,
});
const cents = new Intl.NumberFormat('en-US', {
  style: 'currency',
  currency: 'USD',
  minimumFractionDigits: 2,
  maximumFractionDigits: 6,
});
/** Money as the page shows it: cents from a dollar up, up to six decimals below. */
const usd = (value: number) => (value >= 1 ? dollars : cents).format(value);
const count = (value: number) => value.toLocaleString('en-US');

/** The columns a per-key or per-team row shows for a usage row, as the page formats them. */
function groupCells(row: UsageRow): Record<string, string> {
  return {
    Requests: count(row.requests),
    'Total tokens': count(row.total_tokens),
    'Cost (USD)': usd(row.cost_usd),
    'Cache hits': count(row.cache_hits),
    'Cache hit rate': row.requests ? `${Math.round((row.cache_hits / row.requests) * 1000) / 10}%` : '—',
    'Saved (USD)': usd(row.saved_usd),
  };
}

async function admin<T>(test: TestGateway, path: string, body?: unknown): Promise<T> {
  const response = await fetch(`${test.url}/admin${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: {
      authorization: `Bearer ${ADMIN_TOKEN}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  expect(response.ok, `${path}: ${response.status}`).to.equal(true);
  return (await response.json()) as T;
}

async function chat(test: TestGateway, key: string, text: string): Promise<Response> {
  const response = await fetch(`${test.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'alpha-latest', messages: [{ role: 'user', content: text }] }),
  });
  await response.arrayBuffer();
  return response;
}

async function signIn(page: Page, url: string): Promise<void> {
  await page.goto(`${url}/account#usage`);
  await page.getByLabel('Admin token').fill(ADMIN_TOKEN);
  await page.getByLabel('Admin token').press('Enter');
  await page.getByRole('heading', { name: 'Usage', level: 1 }).waitFor();
}

describe('account page usage view in headless Chromium', function () {
  this.timeout(90_000);
  let dir: string;
  let test: TestGateway;
  let browser: HeadlessBrowser;
  let page: Page;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gateway-account-usage-page-'));
    const configFile = join(dir, 'gateway.yaml');
    await writeFile(configFile, GUARDRAILS);
    test = await startTestGateway({
      configFile,
      env: { GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN, GATEWAY_CACHE_TTL_S: '60', LOG_LEVEL: 'silent' },
    });
    browser = await launchBrowser();
    page = await browser.newPage();
    page.setDefaultTimeout(10_000);
  });
  after(async () => {
    await browser?.close();
    await test?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('shows cost, cache hits and savings per model, key and team, and the guardrail actions without their text', async () => {
    await admin(test, '/teams', { name: 'research' });
    const teamKey = await admin<{ id: string; key: string }>(test, '/keys', { name: 'team key', team: 'research' });
    const soloKey = await admin<{ id: string; key: string }>(test, '/keys', { name: 'solo key' });
    expect((await chat(test, teamKey.key, 'Say something worth keeping.')).headers.get('x-gateway-cache')).to.equal(
      'miss',
    );
    expect((await chat(test, teamKey.key, 'Say something worth keeping.')).headers.get('x-gateway-cache')).to.equal(
      'hit',
    );
    expect((await chat(test, soloKey.key, 'Something else.')).status).to.equal(200);
    expect((await chat(test, soloKey.key, BLOCKED_TEXT)).status).to.equal(400);
    await test.gateway.flushUsage();

    const day = new Date().toISOString().slice(0, 10);
    const range = `from=${new Date(Date.now() - 13 * 86_400_000).toISOString().slice(0, 10)}&to=${day}`;
    const byKey = (await admin<{ data: UsageRow[] }>(test, `/usage?group_by=key&${range}`)).data;
    const byTeam = (await admin<{ data: UsageRow[] }>(test, `/usage?group_by=team&${range}`)).data;
    const byModel = (await admin<{ data: UsageRow[] }>(test, `/usage?group_by=model&${range}`)).data;
    const teamUsage = byKey.find((row) => row.key_id === teamKey.id)!;
    expect(teamUsage).to.deep.include({ requests: 2, cache_hits: 1 });
    expect(teamUsage.cost_usd).to.be.greaterThan(0);
    expect(teamUsage.saved_usd).to.equal(teamUsage.cost_usd);

    await signIn(page, test.url);
    const teamKeyRow = page.locator('#key-usage-table tbody tr', { hasText: 'team key' });
    await teamKeyRow.waitFor();

    // Totals per model: cost, cache hits and savings, summed in the footer.
    const totals = await rowCells(page.locator('#totals-table tfoot tr'));
    const sum = (field: 'cost_usd' | 'saved_usd' | 'cache_hits') =>
      byModel.reduce((total, row) => total + row[field], 0);
    expect(totals).to.deep.include({
      Model: 'All models',
      'Cost (USD)': usd(sum('cost_usd')),
      'Cache hits': '1',
      'Saved (USD)': usd(sum('saved_usd')),
    });
    expect(totals['Cost (USD)']).to.match(/^\$0\.\d{2,6}$/);

    // Per key: each key by name and id, with the figures GET /admin/usage?group_by=key gives.
    expect(await page.locator('#key-usage-table tbody tr').count()).to.equal(byKey.length);
    expect(await rowCells(teamKeyRow)).to.deep.equal({ Key: `team key${teamKey.id}`, ...groupCells(teamUsage) });
    expect((await rowCells(teamKeyRow))['Cache hit rate']).to.equal('50%');
    const soloUsage = byKey.find((row) => row.key_id === soloKey.id)!;
    expect(await rowCells(page.locator('#key-usage-table tbody tr', { hasText: 'solo key' }))).to.deep.equal({
      Key: `solo key${soloKey.id}`,
      ...groupCells(soloUsage),
    });

    // Per team: the team's row, and the keys in no team.
    expect(await page.locator('#team-usage-table tbody tr').count()).to.equal(byTeam.length);
    expect(await rowCells(page.locator('#team-usage-table tbody tr', { hasText: 'research' }))).to.deep.equal({
      Team: 'research',
      ...groupCells(byTeam.find((row) => row.team === 'research')!),
    });
    expect(await rowCells(page.locator('#team-usage-table tbody tr', { hasText: 'No team' }))).to.deep.equal({
      Team: 'No team',
      ...groupCells(byTeam.find((row) => row.team === null)!),
    });

    // The CSV links per key and per team.
    for (const [link, header] of [
      ['#csv-key', 'key_id,'],
      ['#csv-team', 'team,'],
    ] as const) {
      const href = (await page.locator(link).getAttribute('href'))!;
      expect(href).to.include(`from=`).and.include(`to=${day}`);
      const csv = await page.evaluate(async (url) => (await fetch(url)).text(), href);
      expect(csv.startsWith(header), csv).to.equal(true);
    }

    // Guardrail actions: the block, by guardrail and in the recent list, and none of the blocked text anywhere.
    expect(await rowCells(page.locator('#guardrail-summary-table tbody tr'))).to.deep.include({
      Guardrail: 'no-project-codes',
      Phase: 'request',
      Action: 'block',
      Count: '1',
    });
    const action = await rowCells(page.locator('#guardrail-recent-table tbody tr'));
    expect(action).to.deep.include({
      Guardrail: 'no-project-codes',
      Phase: 'request',
      Action: 'block',
      Cause: 'finding',
      Key: `solo key${soloKey.id}`,
      Team: '—',
    });
    expect(action.Time).to.match(/^\d{4}-\d\d-\d\d \d\d:\d\d UTC$/);
    expect(action['Request id']).to.not.equal('');
    expect(await page.locator('#guardrail-actions-empty').isVisible()).to.equal(false);
    for (const text of ['PROJECT-4711', 'Plan for', 'launch']) expect(await page.content()).not.to.include(text);
    expect(await accessibilityViolations(page)).to.deep.equal([]);
    await screenshot(page, 'account-usage-groups');

    // One key chosen: the totals and the per-key table are that key's, the per-team table stays every key's.
    await page.getByLabel('Key', { exact: true }).selectOption(soloKey.id);
    await page.getByRole('button', { name: 'Show usage' }).click();
    await teamKeyRow.waitFor({ state: 'detached' });
    expect(await page.locator('#key-usage-table tbody tr').count()).to.equal(1);
    expect(await page.locator('#totals-table tfoot [data-label="Cache hits"]').textContent()).to.equal('0');
    expect(await page.locator('#team-usage-table tbody tr').count()).to.equal(byTeam.length);
    expect(await page.locator('#csv-key').getAttribute('href')).to.include(`key_id=${soloKey.id}`);
    expect(await page.locator('#csv-team').getAttribute('href')).not.to.include('key_id');

    // Narrow screen: one card per row, nothing scrolls sideways.
    await page.setViewportSize({ width: 390, height: 844 });
    await page.waitForLoadState('networkidle');
    expect(
      await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth),
    ).to.be.at.most(0);
    expect(await accessibilityViolations(page)).to.deep.equal([]);
    await screenshot(page, 'account-usage-groups-narrow');

    // Signing out drops every figure from the page.
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    for (const table of [
      'totals-table',
      'key-usage-table',
      'team-usage-table',
      'guardrail-summary-table',
      'guardrail-recent-table',
    ]) {
      expect(await page.locator(`#${table} tbody tr`).count(), table).to.equal(0);
    }
    expect(browser.problems).to.deep.equal([]);
    await page.setViewportSize({ width: 1280, height: 900 });
  });
});

describe('account page usage view of a gateway with no guardrail actions', function () {
  this.timeout(60_000);
  let test: TestGateway;
  let browser: HeadlessBrowser;

  before(async () => {
    test = await startTestGateway({ env: { GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN } });
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await test?.close();
  });

  it('says there are none, and that there is no usage', async () => {
    const page = await browser.newPage();
    await signIn(page, test.url);
    await page.getByText('No guardrail actions.').waitFor();
    expect(await page.locator('#guardrail-actions-tables').isVisible()).to.equal(false);
    expect(await page.locator('#key-usage-empty').isVisible()).to.equal(true);
    expect(await page.locator('#team-usage-empty').isVisible()).to.equal(true);
    expect(await accessibilityViolations(page)).to.deep.equal([]);
    expect(browser.problems).to.deep.equal([]);
  });
});
