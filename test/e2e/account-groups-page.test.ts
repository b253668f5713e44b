import { expect } from 'chai';
import type { Page } from 'playwright-core';
import { launchBrowser, screenshot, type HeadlessBrowser } from '../helpers/headless-browser.ts';
import { startTestGateway, type TestGateway } from '../helpers/test-gateway.ts';
import { accessibilityViolations, callModel, openView, rowCells } from './account-journey.ts';

const ADMIN_TOKEN = 'account-groups-page-admin-token-0123456789abcdef';

describe('account page groups view in headless Chromium', function () {
  this.timeout(120_000);
  let test: TestGateway;
  let browser: HeadlessBrowser;
  let page: Page;
  // Script errors of the page (the refused creates' 400 and 409 are expected answers, not errors).
  const errors: string[] = [];

  async function admin<T>(
    path: string,
    init: { method?: string; body?: unknown } = {},
  ): Promise<{ status: number; body: T }> {
    const response = await fetch(`${test.url}/admin${path}`, {
      method: init.method ?? 'GET',
      headers: {
        authorization: `Bearer ${ADMIN_TOKEN}`,
        ...(init.body !== undefined && { 'content-type': 'application/json' }),
      },
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
    });
    return { status: response.status, body: (await response.json()) as T };
  }

  before(async () => {
    test = await startTestGateway({ env: { GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN, LOG_LEVEL: 'silent' } });
    browser = await launchBrowser();
    page = await browser.newPage();
    page.setDefaultTimeout(10_000);
    page.on('pageerror', (error) => errors.push(error.message));
    await page.goto(`${test.url}/account#groups`);
    await page.getByLabel('Admin token').fill(ADMIN_TOKEN);
    await page.getByLabel('Admin token').press('Enter');
    await page.getByRole('heading', { name: 'Groups', level: 1 }).waitFor();
  });
  after(async () => {
    await browser?.close();
    await test?.close();
  });

  it('creates a group with a daily budget, as the admin API reports, offering the limits a group has', async () => {
    expect(await page.getByRole('link', { name: 'Groups' }).getAttribute('aria-current')).to.equal('page');
    expect(await page.locator('#groups-empty').isVisible()).to.equal(true);
    const form = page.locator('#create-group-form');
    const labels = await form.locator('label').allTextContents();
    expect(labels.map((label) => label.replace(/ \(optional.*\)$/, ''))).to.deep.equal([
      'Name',
      'Tokens per minute',
      'Daily token quota',
      'Monthly token quota',
      'Daily budget (USD)',
      'Monthly budget (USD)',
    ]);
    await form.getByLabel('Name').fill('dept');
    await form.getByLabel('Daily budget (USD)').fill('2.5');
    await form.getByRole('button', { name: 'Create group' }).click();
    const groupRow = page.locator('#groups-table tbody tr', { hasText: 'dept' });
    await groupRow.waitFor();
    expect(await rowCells(groupRow, 'rendered')).to.deep.include({
      Group: 'dept',
      Teams: 'none',
      Keys: 'none',
      'Tokens per minute': '—',
      'Daily quota': '—',
    });
    expect((await rowCells(groupRow, 'rendered'))['Daily budget']).to.match(/^\$0\.00 \/ \$2\.50\n0% · resets /);
    expect((await admin<Record<string, unknown>>('/groups/dept')).body).to.deep.include({
      name: 'dept',
      budget: { daily_usd: 2.5 },
      tpm: null,
    });
    expect(await form.getByLabel('Name').inputValue(), 'the form is reset').to.equal('');
    expect(await page.locator('#groups-empty').isVisible()).to.equal(false);
  });

  it("shows the API's message next to its field, and nothing created", async () => {
    const form = page.locator('#create-group-form');
    await form.getByLabel('Name').fill('dept');
    await form.getByLabel('Tokens per minute').fill('0');
    await form.getByRole('button', { name: 'Create group' }).click();
    await form.locator('.field-error').filter({ hasText: 'Tokens per minute' }).waitFor();
    expect(await form.locator('.field-error').allTextContents()).to.deep.equal([
      'Tokens per minute: must be a positive integer',
    ]);
    await form.getByLabel('Tokens per minute').fill('');
    await form.getByRole('button', { name: 'Create group' }).click();
    await page.locator('#create-group-error').filter({ hasText: 'exists already' }).waitFor();
    expect((await admin<{ data: unknown[] }>('/groups')).body.data).to.have.length(1);
  });

  it("shows the teams and keys that name a group and what its members' requests spent of it", async () => {
    expect((await admin('/teams', { method: 'POST', body: { name: 'sales', group: 'dept' } })).status).to.equal(201);
    const made = await admin<{ id: string; key: string }>('/keys', {
      method: 'POST',
      body: { name: 'analyst', team: 'sales' },
    });
    const own = await admin<{ id: string }>('/keys', { method: 'POST', body: { name: 'auditor', group: 'dept' } });
    expect(await callModel(test.url, made.body.key, 'zeta/zeta-k3')).to.equal(200);
    await test.gateway.flushUsage();
    await openView(page, 'Teams', 'Teams');
    await openView(page, 'Groups', 'Groups');
    const groupRow = page.locator('#groups-table tbody tr', { hasText: 'dept' });
    const cells = await rowCells(groupRow, 'rendered');
    expect(cells).to.deep.include({ Teams: 'sales', Keys: `auditor (${own.body.id})` });
    const { body } = await admin<{ use: { kind: string; period: string; used: number }[] }>('/groups/dept');
    const spent = body.use.find((entry) => entry.kind === 'budget' && entry.period === 'day')!.used;
    expect(spent).to.be.greaterThan(0);
    expect(cells['Daily budget']).to.match(/^\$0\.\d+ \/ \$2\.50\n/);
    expect(await groupRow.locator('meter').first().getAttribute('value')).to.equal(String(spent));
    expect(await accessibilityViolations(page)).to.deep.equal([]);
    await screenshot(page, 'account-groups');
    expect(errors).to.deep.equal([]);
  });
});
