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
      'Alerts',
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

  it("edits a group's limits in the dialog, sending only what changed, and the admin API agrees at once", async () => {
    await page.getByRole('button', { name: 'Edit group dept' }).click();
    const dialog = page.getByRole('dialog', { name: 'Edit group dept' });
    await dialog.waitFor();
    expect(await dialog.getByLabel('Name').count(), "a group's name is not editable").to.equal(0);
    expect(await dialog.getByLabel('Daily budget (USD)').inputValue()).to.equal('2.5');
    expect(await accessibilityViolations(page)).to.deep.equal([]);

    // A bad value: the API's message by the field, in the dialog, which stays open.
    await dialog.getByLabel('Tokens per minute').fill('0');
    await dialog.getByRole('button', { name: 'Save' }).click();
    await dialog.locator('.field-error').waitFor();
    expect(await dialog.locator('.field-error').allTextContents()).to.deep.equal([
      'Tokens per minute: must be a positive integer',
    ]);
    expect((await admin<Record<string, unknown>>('/groups/dept')).body).to.deep.include({ tpm: null });

    await dialog.getByLabel('Tokens per minute').fill('9000');
    await dialog.getByLabel('Daily budget (USD)').fill('4.75');
    const patch = page.waitForRequest((request) => request.method() === 'PATCH');
    await dialog.getByRole('button', { name: 'Save' }).click();
    expect((await patch).postDataJSON()).to.deep.equal({ tpm: 9000, budget: { daily_usd: 4.75 } });
    await dialog.waitFor({ state: 'hidden' });
    await page.waitForFunction(() => document.activeElement?.getAttribute('aria-label') === 'Edit group dept');
    expect(await page.locator('#status').textContent()).to.equal('Saved group dept.');
    expect((await admin<Record<string, unknown>>('/groups/dept')).body).to.deep.include({
      tpm: 9000,
      budget: { daily_usd: 4.75 },
    });
    const cells = await rowCells(page.locator('#groups-table tbody tr', { hasText: 'dept' }), 'rendered');
    expect(cells['Daily budget']).to.match(/ \/ \$4\.75\n/);
    expect(cells['Tokens per minute']).to.match(/ \/ 9,000\n/);

    // Emptied: sent as null, the budget removed.
    await page.getByRole('button', { name: 'Edit group dept' }).click();
    await dialog.getByLabel('Daily budget (USD)').fill('');
    const emptied = page.waitForRequest((request) => request.method() === 'PATCH');
    await dialog.getByRole('button', { name: 'Save' }).click();
    expect((await emptied).postDataJSON()).to.deep.equal({ budget: null });
    await dialog.waitFor({ state: 'hidden' });
    expect((await admin<Record<string, unknown>>('/groups/dept')).body).to.deep.include({ budget: null, tpm: 9000 });
  });

  it('refuses to delete a group that a team and a key name, showing why and changing nothing; deletes it once none does', async () => {
    const auditor = (await admin<{ data: { id: string; name: string }[] }>('/keys')).body.data.find(
      (key) => key.name === 'auditor',
    )!;
    await page.getByRole('button', { name: 'Delete group dept' }).click();
    const confirm = page.getByRole('dialog', { name: 'Delete group?' });
    await confirm.waitFor();
    expect(await accessibilityViolations(page)).to.deep.equal([]);
    await confirm.getByRole('button', { name: 'Delete dept' }).click();
    const alert = page.locator('#groups-error');
    await alert.filter({ hasText: 'first' }).waitFor();
    expect(await alert.getAttribute('role')).to.equal('alert');
    expect(await alert.textContent()).to.equal(
      `Could not delete group dept: Group 'dept' is named by team 'sales', key '${auditor.id}'; remove the group from them first`,
    );
    expect(await page.evaluate(() => document.activeElement?.getAttribute('aria-label'))).to.equal('Delete group dept');
    expect((await admin('/groups/dept')).status).to.equal(200);
    expect(await page.locator('#groups-table tbody tr', { hasText: 'dept' }).count()).to.equal(1);

    expect((await admin('/teams/sales', { method: 'PATCH', body: { group: null } })).status).to.equal(200);
    expect((await admin(`/keys/${auditor.id}`, { method: 'PATCH', body: { group: null } })).status).to.equal(200);
    // Escape: nothing deleted, focus back on Delete.
    await page.getByRole('button', { name: 'Delete group dept' }).click();
    await confirm.waitFor();
    await page.keyboard.press('Escape');
    await confirm.waitFor({ state: 'hidden' });
    expect(await page.evaluate(() => document.activeElement?.getAttribute('aria-label'))).to.equal('Delete group dept');
    expect((await admin('/groups/dept')).status).to.equal(200);
    await page.getByRole('button', { name: 'Delete group dept' }).click();
    await confirm.getByRole('button', { name: 'Delete dept' }).click();
    await page.getByRole('button', { name: 'Delete group dept' }).waitFor({ state: 'detached' });
    expect((await admin('/groups/dept')).status).to.equal(404);
    expect(await page.locator('#status').textContent()).to.equal('Group dept deleted.');
    expect(await alert.textContent()).to.equal('');
    expect(await page.evaluate(() => document.activeElement?.id)).to.equal('group-list-title');
    expect(await page.locator('#groups-empty').isVisible()).to.equal(true);
    expect(errors).to.deep.equal([]);
  });

  it("creates a group with alert thresholds, and a key and a team in it with alerts and end users' limits through the forms, as the admin API reports", async () => {
    const groupForm = page.locator('#create-group-form');
    await groupForm.getByLabel('Name').fill('ops');
    await groupForm.getByLabel('Monthly budget (USD)').fill('100');
    await groupForm.getByLabel('Alerts').fill('75, 90%');
    await groupForm.getByRole('button', { name: 'Create group' }).click();
    await page.getByRole('button', { name: 'Edit group ops' }).waitFor();
    expect((await admin<Record<string, unknown>>('/groups/ops')).body).to.deep.include({
      alerts: [75, 90],
      budget: { monthly_usd: 100 },
    });
    expect(await rowCells(page.locator('#groups-table tbody tr', { hasText: 'ops' }))).to.deep.include({
      Alerts: '75%, 90%',
    });

    await openView(page, 'Keys', 'API keys');
    const keyForm = page.locator('#create-key-form');
    const group = keyForm.getByLabel('Group', { exact: true });
    expect(await group.locator('option').allTextContents()).to.deep.equal(['No group', 'ops']);
    expect(await keyForm.locator('fieldset legend').textContent()).to.equal(
      'Limits of each end user (optional, each end user of the key)',
    );
    await keyForm.getByLabel('Name').fill('ops key');
    await group.selectOption('ops');
    // Not ascending, and a zero: the API's messages by their fields, nothing created.
    await keyForm.getByLabel('Alerts').fill('80, 50');
    await keyForm.getByLabel('End-user tokens a minute').fill('0');
    await keyForm.getByRole('button', { name: 'Create key' }).click();
    await keyForm.locator('.field-error').filter({ hasText: 'Alerts:' }).waitFor();
    expect(await keyForm.locator('.field-error').allTextContents()).to.have.members([
      'Alerts: must be a list of whole percents from 1 to 100 in ascending order, each once ([] for none)',
      'End-user tokens a minute: must be a positive integer',
    ]);
    expect(await keyForm.getByLabel('End-user tokens a minute').getAttribute('aria-invalid')).to.equal('true');
    expect(await keyForm.getByLabel('Alerts').getAttribute('aria-invalid')).to.equal('true');
    const keyNamed = async (name: string) =>
      (await admin<{ data: Record<string, unknown>[] }>('/keys')).body.data.find((key) => key.name === name);
    expect(await keyNamed('ops key')).to.equal(undefined);
    // Not a number: said before sending.
    await keyForm.getByLabel('Alerts').fill('50, eighty');
    await keyForm.getByRole('button', { name: 'Create key' }).click();
    await page.locator('#create-key-error').filter({ hasText: 'Some fields are not valid' }).waitFor();
    expect(await keyForm.locator('.field-error').allTextContents()).to.deep.equal([
      'Alerts: must be percents such as 50, 80, 100, or none',
    ]);

    await keyForm.getByLabel('Alerts').fill('50, 80, 100');
    await keyForm.getByLabel('End-user tokens a minute').fill('');
    await keyForm.getByLabel('End-user requests a minute').fill('10');
    await keyForm.getByLabel('End-user daily tokens').fill('1000');
    await keyForm.getByLabel('End-user daily USD').fill('0.5');
    await keyForm.getByRole('button', { name: 'Create key' }).click();
    await page.getByRole('heading', { name: 'New key “ops key”' }).waitFor();
    expect(await keyNamed('ops key')).to.deep.include({
      group: 'ops',
      alerts: [50, 80, 100],
      end_user: { rpm: 10, quota: { daily: 1000 }, budget: { daily_usd: 0.5 } },
      tpm: null,
    });
    const keyRow = page.locator('#keys-table tbody tr', { hasText: 'ops key' });
    expect((await rowCells(keyRow, 'rendered')).Limits).to.equal(
      [
        'Requests per minute: default',
        'Group: ops',
        'Alerts: 50%, 80%, 100%',
        'Each end user: 10 requests / minute, 1,000 tokens / day, $0.50 / day',
      ].join('\n'),
    );
    expect(await group.inputValue(), 'the form is reset').to.equal('');
    await page.getByRole('button', { name: 'Done' }).click();

    // Its edit dialog, prefilled: emptied alerts and group are sent as null, end users' limits whole.
    await page.getByRole('button', { name: 'Edit key ops key' }).click();
    const dialog = page.getByRole('dialog', { name: 'Edit key ops key' });
    await dialog.waitFor();
    expect(await dialog.getByLabel('Group', { exact: true }).inputValue()).to.equal('ops');
    expect(await dialog.getByLabel('Alerts').inputValue()).to.equal('50, 80, 100');
    expect(await dialog.getByLabel('End-user requests a minute').inputValue()).to.equal('10');
    expect(await dialog.getByLabel('End-user daily USD').inputValue()).to.equal('0.5');
    expect(await accessibilityViolations(page)).to.deep.equal([]);
    await dialog.getByLabel('Alerts').fill('');
    await dialog.getByLabel('Group', { exact: true }).selectOption('');
    await dialog.getByLabel('End-user daily USD').fill('');
    const patch = page.waitForRequest((request) => request.method() === 'PATCH');
    await dialog.getByRole('button', { name: 'Save' }).click();
    expect((await patch).postDataJSON()).to.deep.equal({
      alerts: null,
      group: null,
      end_user: { rpm: 10, quota: { daily: 1000 } },
    });
    await dialog.waitFor({ state: 'hidden' });
    expect(await keyNamed('ops key')).to.deep.include({
      group: null,
      alerts: null,
      end_user: { rpm: 10, quota: { daily: 1000 } },
    });

    // A team in the group with no alerts at all (none: []) and a monthly budget for each end user.
    await openView(page, 'Teams', 'Teams');
    const teamForm = page.locator('#create-team-form');
    expect(await teamForm.getByLabel('Group', { exact: true }).locator('option').allTextContents()).to.deep.equal([
      'No group',
      'ops',
    ]);
    await teamForm.getByLabel('Name').fill('ops-team');
    await teamForm.getByLabel('Group', { exact: true }).selectOption('ops');
    await teamForm.getByLabel('Alerts').fill('none');
    await teamForm.getByLabel('End-user monthly USD').fill('2');
    await teamForm.getByRole('button', { name: 'Create team' }).click();
    await page.getByRole('button', { name: 'Edit team ops-team' }).waitFor();
    expect((await admin<Record<string, unknown>>('/teams/ops-team')).body).to.deep.include({
      group: 'ops',
      alerts: [],
      end_user: { budget: { monthly_usd: 2 } },
    });
    expect(
      (await rowCells(page.locator('#teams-table tbody tr', { hasText: 'ops-team' }), 'rendered')).Limits,
    ).to.equal('Group: ops\nAlerts: none\nEach end user: $2.00 / month');
    await page.getByRole('button', { name: 'Edit team ops-team' }).click();
    const teamDialog = page.getByRole('dialog', { name: 'Edit team ops-team' });
    await teamDialog.waitFor();
    expect(await teamDialog.getByLabel('Alerts').inputValue()).to.equal('none');
    expect(await teamDialog.getByLabel('Group', { exact: true }).inputValue()).to.equal('ops');
    await teamDialog.getByLabel('End-user requests a minute').fill('5');
    const teamPatch = page.waitForRequest((request) => request.method() === 'PATCH');
    await teamDialog.getByRole('button', { name: 'Save' }).click();
    expect((await teamPatch).postDataJSON()).to.deep.equal({ end_user: { rpm: 5, budget: { monthly_usd: 2 } } });
    await teamDialog.waitFor({ state: 'hidden' });
    expect((await admin<Record<string, unknown>>('/teams/ops-team')).body).to.deep.include({
      group: 'ops',
      alerts: [],
      end_user: { rpm: 5, budget: { monthly_usd: 2 } },
    });

    await openView(page, 'Groups', 'Groups');
    expect(await rowCells(page.locator('#groups-table tbody tr', { hasText: 'ops' }))).to.deep.include({
      Teams: 'ops-team',
      Keys: 'none',
    });
    expect(errors).to.deep.equal([]);
  });

  it('has no accessibility violation on the Groups, Keys and Teams views and their dialogs, also 390 px wide', async () => {
    for (const width of [1280, 390]) {
      await page.setViewportSize({ width, height: 844 });
      for (const [view, heading] of [
        ['Groups', 'Groups'],
        ['Keys', 'API keys'],
        ['Teams', 'Teams'],
      ] as const) {
        await openView(page, view, heading);
        expect(await accessibilityViolations(page), `${view} at ${width} px`).to.deep.equal([]);
        expect(await page.evaluate(() => document.documentElement.scrollWidth), `${view} at ${width} px`).to.be.at.most(
          width,
        );
      }
      await openView(page, 'Groups', 'Groups');
      await screenshot(page, `account-groups-edit${width === 390 ? '-narrow' : ''}`);
      await page.getByRole('button', { name: 'Edit group ops' }).click();
      const dialog = page.getByRole('dialog', { name: 'Edit group ops' });
      await dialog.waitFor();
      expect(await dialog.getByLabel('Alerts').inputValue()).to.equal('75, 90');
      expect(await dialog.evaluate((node) => node.getBoundingClientRect().right)).to.be.at.most(width);
      expect(await accessibilityViolations(page), `edit dialog at ${width} px`).to.deep.equal([]);
      await dialog.getByRole('button', { name: 'Cancel' }).click();
      await dialog.waitFor({ state: 'hidden' });
      await page.getByRole('button', { name: 'Delete group ops' }).click();
      const confirm = page.getByRole('dialog', { name: 'Delete group?' });
      await confirm.waitFor();
      expect(await accessibilityViolations(page), `delete dialog at ${width} px`).to.deep.equal([]);
      await confirm.getByRole('button', { name: 'Cancel' }).click();
      await confirm.waitFor({ state: 'hidden' });
    }
    await page.setViewportSize({ width: 1280, height: 900 });
    expect((await admin('/groups/ops')).status).to.equal(200);
    expect(errors).to.deep.equal([]);
  });
});
