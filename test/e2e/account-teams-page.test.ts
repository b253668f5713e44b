import { expect } from 'chai';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Locator, Page } from 'playwright-core';
import { launchBrowser, screenshot, type HeadlessBrowser } from '../helpers/headless-browser.ts';
import { startTestGateway, type TestGateway } from '../helpers/test-gateway.ts';
import { accessibilityViolations, openView, rowCells } from './account-journey.ts';

const ADMIN_TOKEN = 'account-teams-page-admin-token-0123456789abcdef';
const GUARDRAILS = `guardrails:
  - { name: no-emails, use: pii, on: request, action: redact, entities: [email] }
  - { name: no-codes, use: regex, on: response, action: block, patterns: ['PROJECT-[0-9]{4}'] }
`;

/** Whether a control is marked invalid, and the texts of what describes it (aria-describedby). */
async function fieldState(control: Locator): Promise<{ invalid: boolean; described: string[] }> {
  return control.evaluate((node) => ({
    invalid: node.getAttribute('aria-invalid') === 'true',
    described: (node.getAttribute('aria-describedby') ?? '')
      .split(/\s+/)
      .filter(Boolean)
      .map((id) => document.getElementById(id)?.textContent ?? `missing #${id}`),
  }));
}

describe('account page teams view and key limits in headless Chromium', function () {
  this.timeout(120_000);
  let dir: string;
  let configFile: string;
  let test: TestGateway;
  let browser: HeadlessBrowser;
  let page: Page;

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

  async function adminKey(name: string): Promise<Record<string, unknown>> {
    const { body } = await admin<{ data: { name: string }[] }>('/keys');
    return body.data.find((key) => key.name === name)!;
  }

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gateway-account-teams-page-'));
    configFile = join(dir, 'gateway.yaml');
    await writeFile(configFile, `logLevel: silent\n${GUARDRAILS}`);
    test = await startTestGateway({ configFile, env: { GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN } });
    browser = await launchBrowser();
    page = await browser.newPage();
    page.setDefaultTimeout(10_000);
    await page.goto(`${test.url}/account#teams`);
    await page.getByLabel('Admin token').fill(ADMIN_TOKEN);
    await page.getByLabel('Admin token').press('Enter');
    await page.getByRole('heading', { name: 'Teams', level: 1 }).waitFor();
  });
  after(async () => {
    await browser?.close();
    await test?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('creates a team with a daily budget, and a key in it with a tokens-per-minute limit and a guardrail, as the admin API reports', async () => {
    expect(await page.getByRole('link', { name: 'Teams' }).getAttribute('aria-current')).to.equal('page');
    const teamForm = page.locator('#create-team-form');
    await teamForm.getByLabel('Name').fill('research');
    await teamForm.getByLabel('Daily budget (USD)').fill('2.5');
    await teamForm.getByRole('button', { name: 'Create team' }).click();
    const teamRow = page.locator('#teams-table tbody tr', { hasText: 'research' });
    await teamRow.waitFor();
    expect(await rowCells(teamRow, 'rendered')).to.deep.include({
      Name: 'research',
      Limits: 'Budget: $2.50 / day',
      Keys: 'none',
      Guardrails: 'default',
      Cache: 'default',
    });
    const team = await admin<Record<string, unknown>>('/teams/research');
    expect(team.body).to.deep.include({ name: 'research', budget: { daily_usd: 2.5 }, rpm: null, guardrails: null });
    expect(await teamForm.getByLabel('Name').inputValue(), 'the form is reset').to.equal('');

    await openView(page, 'Keys', 'API keys');
    const keyForm = page.locator('#create-key-form');
    const guardrails = keyForm.getByLabel('Guardrails');
    expect(await keyForm.locator('label[for="key-guardrails"]').textContent()).to.equal(
      "Guardrails (none selected: the team's guardrails, else every configured one)",
    );
    expect(await guardrails.locator('option').allTextContents()).to.deep.equal([
      'None: no guardrail at all',
      'no-emails (request, redact)',
      'no-codes (response, block)',
    ]);
    expect(await keyForm.getByLabel('Team', { exact: true }).locator('option').allTextContents()).to.deep.equal([
      'No team',
      'research',
    ]);
    await keyForm.getByLabel('Name').fill('research key');
    await keyForm.getByLabel('Tokens per minute').fill('5000');
    await keyForm.getByLabel('Team', { exact: true }).selectOption('research');
    await guardrails.selectOption('no-codes');
    await keyForm.getByRole('button', { name: 'Create key' }).click();
    await page.getByRole('heading', { name: 'New key “research key”' }).waitFor();
    expect(await adminKey('research key')).to.deep.include({
      tpm: 5000,
      team: 'research',
      guardrails: ['no-codes'],
      budget: null,
      rpm: null,
    });
    const keyRow = page.locator('#keys-table tbody tr', { hasText: 'research key' });
    await keyRow.waitFor();
    expect(await rowCells(keyRow, 'rendered')).to.deep.include({
      Limits: 'Requests per minute: default\nTokens per minute: 5,000',
      Team: 'research',
      Guardrails: 'no-codes',
      Status: 'active',
    });
    expect(
      await guardrails.evaluate((select) => (select as HTMLSelectElement).selectedOptions.length),
      'the form is reset',
    ).to.equal(0);

    // None selected: not sent, so the team's (or every configured) guardrail applies.
    await keyForm.getByLabel('Name').fill('plain key');
    await keyForm.getByLabel('Monthly budget (USD)').fill('12.345678');
    await keyForm.getByRole('button', { name: 'Create key' }).click();
    await page.getByRole('heading', { name: 'New key “plain key”' }).waitFor();
    expect(await adminKey('plain key')).to.deep.include({
      guardrails: null,
      team: null,
      budget: { monthly_usd: 12.345678 },
    });
    await page.getByRole('button', { name: 'Done' }).click();

    // "None" sends an empty list (no guardrail runs); with a guardrail beside it, the page says to choose one or the
    // other.
    await keyForm.getByLabel('Name').fill('unguarded key');
    await guardrails.selectOption([':none', 'no-codes']);
    await keyForm.getByRole('button', { name: 'Create key' }).click();
    await keyForm.locator('.field-error').filter({ hasText: 'Guardrails:' }).waitFor();
    expect(await keyForm.locator('.field-error').allTextContents()).to.deep.equal([
      'Guardrails: choose "None" alone, or the guardrails to run',
    ]);
    expect(await adminKey('unguarded key')).to.equal(undefined);
    await guardrails.selectOption(':none');
    await keyForm.getByRole('button', { name: 'Create key' }).click();
    await page.getByRole('heading', { name: 'New key “unguarded key”' }).waitFor();
    expect(await adminKey('unguarded key')).to.deep.include({ guardrails: [] });
    expect(
      await rowCells(page.locator('#keys-table tbody tr', { hasText: 'unguarded key' }), 'rendered'),
    ).to.deep.include({ Guardrails: 'none' });
    await page.getByRole('button', { name: 'Done' }).click();
  });

  it("shows the API's messages next to their fields under the page's labels, and clears them on the next submit", async () => {
    const keyForm = page.locator('#create-key-form');
    await keyForm.getByLabel('Name').fill('bad key');
    await keyForm.getByLabel(/Requests per minute/).fill('0');
    await keyForm.getByLabel('Daily budget (USD)').fill('0.0000001');
    await keyForm.getByRole('button', { name: 'Create key' }).click();
    const summary = page.locator('#create-key-error');
    await summary.filter({ hasText: 'Daily budget (USD)' }).waitFor();
    // The same body on the admin API: the page shows its messages, with its own labels in place of the paths.
    const { status, body } = await admin<{ errors: string[] }>('/keys', {
      method: 'POST',
      body: { name: 'bad key', rpm: 0, budget: { daily_usd: 0.0000001 } },
    });
    expect(status).to.equal(400);
    expect(body.errors).to.deep.equal([
      "Field 'rpm': must be a positive integer",
      "Field 'budget.daily_usd': must have at most 6 decimals",
    ]);
    expect(await fieldState(keyForm.getByLabel(/Requests per minute/))).to.deep.equal({
      invalid: true,
      described: ['Requests per minute: must be a positive integer'],
    });
    expect(await fieldState(keyForm.getByLabel('Daily budget (USD)'))).to.deep.equal({
      invalid: true,
      described: ['Daily budget (USD): must have at most 6 decimals'],
    });
    expect(await fieldState(keyForm.getByLabel('Tokens per minute'))).to.deep.equal({ invalid: false, described: [] });
    expect(await summary.getAttribute('role')).to.equal('alert');
    expect(await summary.textContent())
      .to.include('Requests per minute: must be a positive integer')
      .and.include('Daily budget (USD): must have at most 6 decimals');
    expect(await page.evaluate(() => document.activeElement?.id), 'the first field in error is focused').to.equal(
      'key-rpm',
    );
    expect(await adminKey('bad key')).to.equal(undefined);
    await screenshot(page, 'account-key-errors');

    // Fixed rpm, same budget: only the budget's error is left.
    await keyForm.getByLabel(/Requests per minute/).fill('10');
    await keyForm.getByRole('button', { name: 'Create key' }).click();
    await page.waitForFunction(
      () =>
        document.getElementById('key-rpm')?.getAttribute('aria-invalid') === null &&
        document.getElementById('key-daily-usd')?.getAttribute('aria-invalid') === 'true',
    );
    expect(await fieldState(keyForm.getByLabel(/Requests per minute/))).to.deep.equal({
      invalid: false,
      described: [],
    });
    expect(await keyForm.locator('.field-error').allTextContents()).to.deep.equal([
      'Daily budget (USD): must have at most 6 decimals',
    ]);
    await keyForm.getByLabel('Daily budget (USD)').fill('');
    await keyForm.getByRole('button', { name: 'Create key' }).click();
    await page.getByRole('heading', { name: 'New key “bad key”' }).waitFor();
    expect(await keyForm.locator('.field-error, [aria-invalid]').count()).to.equal(0);
    expect(await summary.textContent()).to.equal('');
    await page.getByRole('button', { name: 'Done' }).click();

    // A team's name: the API's rule, under the page's label.
    await openView(page, 'Teams', 'Teams');
    const teamForm = page.locator('#create-team-form');
    await teamForm.getByLabel('Name').fill('no spaces allowed');
    await teamForm.getByLabel('Concurrency').fill('0');
    await teamForm.getByRole('button', { name: 'Create team' }).click();
    await page.locator('#create-team-error').filter({ hasText: 'Name:' }).waitFor();
    expect(await fieldState(teamForm.getByLabel('Name'))).to.deep.equal({
      invalid: true,
      described: ['Name: must be 1 to 64 characters of letters, digits, ., _ and -'],
    });
    expect(await fieldState(teamForm.getByLabel('Concurrency'))).to.deep.equal({
      invalid: true,
      described: ['Concurrency: must be a positive integer'],
    });
    await teamForm.getByLabel('Name').fill('');
    await teamForm.getByLabel('Concurrency').fill('');
  });

  it("edits a key's and a team's limits in a dialog, sending only what changed, and the admin API agrees at once", async () => {
    await openView(page, 'Keys', 'API keys');
    const edit = page.getByRole('button', { name: 'Edit key research key' });
    await edit.click();
    const dialog = page.getByRole('dialog', { name: 'Edit key research key' });
    await dialog.waitFor();
    expect(await dialog.getByLabel('Tokens per minute').inputValue()).to.equal('5000');
    expect(await dialog.getByLabel('Name').inputValue()).to.equal('research key');
    expect(await dialog.getByLabel('Team', { exact: true }).inputValue()).to.equal('research');
    expect(
      await dialog
        .getByLabel('Guardrails')
        .evaluate((select) => [...(select as HTMLSelectElement).selectedOptions].map((option) => option.value)),
    ).to.deep.equal(['no-codes']);
    expect(await accessibilityViolations(page)).to.deep.equal([]);

    // Escape closes it, nothing sent, focus back on Edit.
    await dialog.getByLabel('Tokens per minute').fill('1');
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'hidden' });
    expect(await page.evaluate(() => document.activeElement?.getAttribute('aria-label'))).to.equal(
      'Edit key research key',
    );
    expect(await adminKey('research key')).to.deep.include({ tpm: 5000 });

    // A bad value: the API's message by the field, in the dialog, which stays open.
    await edit.click();
    await dialog.getByLabel('Tokens per minute').fill('0');
    await dialog.getByRole('button', { name: 'Save' }).click();
    await dialog.locator('.field-error').waitFor();
    expect(await fieldState(dialog.getByLabel('Tokens per minute'))).to.deep.equal({
      invalid: true,
      described: ['Tokens per minute: must be a positive integer'],
    });
    expect(await dialog.getByRole('alert').textContent()).to.include('Tokens per minute: must be a positive integer');

    // The tpm changed and the guardrails emptied: only those two are sent, the emptied one as null.
    await dialog.getByLabel('Tokens per minute').fill('8000');
    await dialog.getByLabel('Guardrails').selectOption([]);
    const patch = page.waitForRequest((request) => request.method() === 'PATCH');
    await dialog.getByRole('button', { name: 'Save' }).click();
    expect((await patch).postDataJSON()).to.deep.equal({ tpm: 8000, guardrails: null });
    await dialog.waitFor({ state: 'hidden' });
    await page.waitForFunction(() => document.activeElement?.getAttribute('aria-label') === 'Edit key research key');
    expect(await adminKey('research key')).to.deep.include({
      tpm: 8000,
      guardrails: null,
      team: 'research',
      name: 'research key',
    });
    expect(
      await rowCells(page.locator('#keys-table tbody tr', { hasText: 'research key' }), 'rendered'),
    ).to.deep.include({ Limits: 'Requests per minute: default\nTokens per minute: 8,000', Guardrails: 'default' });
    expect(await page.getByRole('button', { name: 'Edit key bad key' }).count()).to.equal(1);

    // A revoked key has no Edit.
    await page.getByRole('button', { name: 'Revoke key bad key' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Revoke bad key' }).click();
    await page.getByRole('button', { name: 'Edit key bad key' }).waitFor({ state: 'detached' });

    // The team's daily budget, through its dialog: GET /admin/teams/research agrees at once.
    await openView(page, 'Teams', 'Teams');
    const teamRow = page.locator('#teams-table tbody tr', { hasText: 'research' });
    expect(await rowCells(teamRow, 'rendered')).to.deep.include({ Keys: 'research key' });
    await page.getByRole('button', { name: 'Edit team research' }).click();
    const teamDialog = page.getByRole('dialog', { name: 'Edit team research' });
    await teamDialog.waitFor();
    expect(await teamDialog.getByLabel('Name').count(), "a team's name is not editable").to.equal(0);
    expect(await teamDialog.getByLabel('Daily budget (USD)').inputValue()).to.equal('2.5');
    await teamDialog.getByLabel('Daily budget (USD)').fill('4.75');
    const teamPatch = page.waitForRequest((request) => request.method() === 'PATCH');
    await teamDialog.getByRole('button', { name: 'Save' }).click();
    expect((await teamPatch).postDataJSON()).to.deep.equal({ budget: { daily_usd: 4.75 } });
    await teamDialog.waitFor({ state: 'hidden' });
    expect((await admin<Record<string, unknown>>('/teams/research')).body).to.deep.include({
      budget: { daily_usd: 4.75 },
    });
    expect(await rowCells(teamRow, 'rendered')).to.deep.include({ Limits: 'Budget: $4.75 / day' });
    expect(await page.evaluate(() => document.activeElement?.getAttribute('aria-label'))).to.equal(
      'Edit team research',
    );
  });

  it('refuses to delete a team that a key names, showing why and changing nothing; deletes one no key names', async () => {
    await page.getByRole('button', { name: 'Delete team research' }).click();
    const confirm = page.getByRole('dialog', { name: 'Delete team?' });
    await confirm.waitFor();
    await confirm.getByRole('button', { name: 'Delete research' }).click();
    const alert = page.locator('#teams-error');
    await alert.filter({ hasText: 'revoke it first' }).waitFor();
    expect(await alert.getAttribute('role')).to.equal('alert');
    expect(await alert.textContent()).to.equal(
      "Could not delete team research: Team 'research' is named by 1 key that is not revoked; revoke it first",
    );
    expect(await page.evaluate(() => document.activeElement?.getAttribute('aria-label'))).to.equal(
      'Delete team research',
    );
    expect((await admin('/teams/research')).status).to.equal(200);
    expect(await page.locator('#teams-table tbody tr', { hasText: 'research' }).count()).to.equal(1);

    expect((await admin('/teams', { method: 'POST', body: { name: 'spare', rpm: 30 } })).status).to.equal(201);
    await openView(page, 'Keys', 'API keys');
    await openView(page, 'Teams', 'Teams');
    await page.getByRole('button', { name: 'Delete team spare' }).click();
    // Escape: nothing deleted.
    await confirm.waitFor();
    await page.keyboard.press('Escape');
    await confirm.waitFor({ state: 'hidden' });
    expect((await admin('/teams/spare')).status).to.equal(200);
    await page.getByRole('button', { name: 'Delete team spare' }).click();
    await confirm.getByRole('button', { name: 'Delete spare' }).click();
    await page.getByRole('button', { name: 'Delete team spare' }).waitFor({ state: 'detached' });
    expect((await admin('/teams/spare')).status).to.equal(404);
    expect(await alert.textContent()).to.equal('');
  });

  it('has no accessibility violation on the Keys and Teams views, also 390 px wide without sideways scrolling', async () => {
    for (const width of [1280, 390]) {
      await page.setViewportSize({ width, height: 844 });
      for (const [view, heading] of [
        ['Keys', 'API keys'],
        ['Teams', 'Teams'],
      ] as const) {
        await openView(page, view, heading);
        expect(await page.locator(`#${view.toLowerCase()}-table tbody tr`).count()).to.be.greaterThan(0);
        expect(await accessibilityViolations(page), `${view} at ${width} px`).to.deep.equal([]);
        expect(await page.evaluate(() => document.documentElement.scrollWidth), `${view} at ${width} px`).to.be.at.most(
          width,
        );
        // At desktop width the table shows every column without scrolling sideways (its region would otherwise hide
        // some).
        if (width === 1280) {
          const region = page.locator(`#${view.toLowerCase()}-table`).locator('xpath=..');
          expect(
            await region.evaluate((node) => node.scrollWidth - node.clientWidth),
            `${view} table at ${width} px`,
          ).to.be.at.most(0);
        }
        await screenshot(page, `account-${view.toLowerCase()}-limits${width === 390 ? '-narrow' : ''}`);
      }
    }
    // The edit dialog fits too.
    await page.getByRole('button', { name: 'Edit team research' }).click();
    const dialog = page.getByRole('dialog', { name: 'Edit team research' });
    await dialog.waitFor();
    expect(await dialog.evaluate((node) => node.getBoundingClientRect().right)).to.be.at.most(390);
    expect(await accessibilityViolations(page)).to.deep.equal([]);
    await screenshot(page, 'account-team-edit-narrow');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await dialog.waitFor({ state: 'hidden' });
    expect(await page.evaluate(() => document.activeElement?.getAttribute('aria-label'))).to.equal(
      'Edit team research',
    );
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  it('hides the Guardrails field, label and all, when none are configured', async () => {
    await writeFile(configFile, 'logLevel: silent\n');
    const reload = test.gateway.reloadConfig('test');
    expect(reload.applied, reload.error).to.equal(true);
    await openView(page, 'Keys', 'API keys');
    expect(await page.locator('#create-key-form label[for="key-guardrails"]').isVisible()).to.equal(false);
    expect(await page.locator('#key-guardrails').isVisible()).to.equal(false);
    await openView(page, 'Teams', 'Teams');
    expect(await page.locator('#create-team-form label[for="team-guardrails"]').isVisible()).to.equal(false);
    // The refused writes above (400, 409) are the only errors the browser saw.
    expect(browser.problems.filter((problem) => !/status of (400|409)/.test(problem))).to.deep.equal([]);
  });
});
