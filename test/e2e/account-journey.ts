import { expect } from 'chai';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import type { Locator, Page } from 'playwright-core';
import { eventually } from '../helpers/eventually.ts';
import { screenshot, type HeadlessBrowser } from '../helpers/headless-browser.ts';

const AXE_SOURCE = readFile(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/** A running gateway with the account page on, its mock upstreams behind it, seen only over HTTP. */
export interface AccountTarget {
  readonly url: string;
  readonly adminToken: string;
  /** How many providers the health view lists. */
  readonly providers: number;
  /** The key the gateway sends upstream: the page must never show it. */
  readonly upstreamKey: string;
}

/** One model call with a key, as a client would make it. */
export async function callModel(url: string, key: string, model = 'alpha/gen-5.5'): Promise<number> {
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'Hello from the account page test' }] }),
  });
  await response.arrayBuffer();
  return response.status;
}

/** The requests the usage read-back holds for a key, asked with that key. */
async function requestsRecorded(url: string, key: string): Promise<number> {
  const body = (await (await fetch(`${url}/v1/usage`, { headers: { authorization: `Bearer ${key}` } })).json()) as {
    data: { requests: number }[];
  };
  return body.data.reduce((sum, row) => sum + row.requests, 0);
}

/** The managed keys by name, through the admin API. */
async function adminKeys(target: AccountTarget): Promise<Record<string, { id: string; revoked: boolean }>> {
  const response = await fetch(`${target.url}/admin/keys`, {
    headers: { authorization: `Bearer ${target.adminToken}` },
  });
  const body = (await response.json()) as { data: { id: string; name: string; revoked: boolean }[] };
  return Object.fromEntries(body.data.map((key) => [key.name, key]));
}

/**
 * The text of each cell of a table row by its column name (a stacked table's `data-label`): as in the
 * document (`text`), or as rendered, a list's items on lines of their own (`rendered`, trimmed).
 */
export async function rowCells(row: Locator, as: 'text' | 'rendered' = 'text'): Promise<Record<string, string>> {
  return row.evaluate(
    (tr, rendered) =>
      Object.fromEntries(
        [...(tr as HTMLTableRowElement).cells].map((cell) => [
          cell.dataset.label ?? '',
          rendered ? cell.innerText.trim() : cell.textContent!,
        ]),
      ),
    as === 'rendered',
  );
}

/** Opens a view of the signed-in page by its link and waits for its heading and its reads. */
export async function openView(page: Page, link: string, heading: string): Promise<void> {
  await page.getByRole('link', { name: link, exact: true }).click();
  await page.getByRole('heading', { name: heading, level: 1 }).waitFor();
  // The view is busy until its reads are done (the page loaded long ago: networkidle alone would not wait).
  await page.locator('.view[aria-busy="true"]').waitFor({ state: 'detached' });
  await page.waitForLoadState('networkidle');
}

/**
 * axe-core's WCAG 2 A/AA violations on the page as it is now (run through the debugger, so the page's CSP does not
 * apply).
 */
export async function accessibilityViolations(page: Page): Promise<string[]> {
  await page.evaluate(await AXE_SOURCE);
  const violations = await page.evaluate(async () => {
    const axe = (
      globalThis as unknown as {
        axe: {
          run(
            context: unknown,
            options: unknown,
          ): Promise<{ violations: { id: string; help: string; nodes: { target: string[] }[] }[] }>;
        };
      }
    ).axe;
    const result = await axe.run(document, {
      runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] },
    });
    return result.violations.map(
      (violation) =>
        `${violation.id}: ${violation.help} (${violation.nodes.map((node) => node.target.join(' ')).join(', ')})`,
    );
  });
  return violations;
}

async function sessionCookie(browser: HeadlessBrowser, url: string) {
  return (await browser.context.cookies(`${url}/account/`)).find((cookie) => cookie.name === 'gw_account_session');
}

/**
 * The account page as a person uses it, start to end: a refused sign-in, sign-in by keyboard, two
 * keys created (one copied), calls with the key and their usage and charts, limits, health, a narrow screen,
 * revocation with confirmation (the revoked key answers 403) and sign-out. Checks accessibility on
 * every view and that the browser saw no error.
 */
export async function accountJourney(target: AccountTarget, browser: HeadlessBrowser, page: Page): Promise<void> {
  const response = await page.goto(`${target.url}/account`);
  expect(response?.headers()['content-security-policy']).to.include("script-src 'self'");
  await page.getByLabel('Admin token').waitFor();
  await screenshot(page, 'account-sign-in');

  // A wrong token is refused and leaves no session.
  await page.getByLabel('Admin token').fill('not-the-admin-token');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(await page.getByRole('alert').filter({ hasText: 'Invalid admin token' }).textContent()).to.include(
    'Invalid admin token',
  );
  expect(await sessionCookie(browser, target.url)).to.equal(undefined);
  expect(browser.problems.every((problem) => problem.includes('status of 401'))).to.equal(
    true,
    browser.problems.join('\n'),
  );
  browser.problems.length = 0;

  // Sign in with the keyboard: type the token, press Enter.
  await page.getByLabel('Admin token').fill(target.adminToken);
  await page.getByLabel('Admin token').press('Enter');
  await page.getByRole('heading', { name: 'API keys', level: 1 }).waitFor();
  // Signing in ends by moving focus to the main content once the keys are loaded.
  await page.waitForFunction(() => document.activeElement?.id === 'main');
  // Keyboard focus is visible: Tab from the Keys link lands on Teams, outlined.
  await page.getByRole('link', { name: 'Keys' }).focus();
  await page.keyboard.press('Tab');
  const focused = await page.evaluate(() => {
    const active = document.activeElement as HTMLElement;
    const style = getComputedStyle(active);
    return { text: active.textContent, outline: `${style.outlineStyle} ${style.outlineWidth}` };
  });
  expect(focused).to.deep.equal({ text: 'Teams', outline: 'solid 3px' });
  const cookie = await sessionCookie(browser, target.url);
  expect(cookie).to.deep.include({ httpOnly: true, sameSite: 'Strict', secure: false, path: '/account' });

  // A second key, kept to the end: cancelling its revocation must leave it active.
  // (The Teams view's form has fields of the same names: the key form's are the ones meant.)
  const keyForm = page.locator('#create-key-form');
  await keyForm.getByLabel('Name').fill('kept browser key');
  await page.getByRole('button', { name: 'Create key' }).click();
  await page.getByRole('row', { name: /kept browser key/ }).waitFor();
  await page.getByRole('button', { name: 'Done' }).click();
  expect(await page.locator('#new-key').isVisible()).to.equal(false);
  expect(await page.locator('#new-key-value').textContent()).to.equal('');

  // Create a key: shown once, with a working copy button.
  await keyForm.getByLabel('Name').fill('e2e browser key');
  await keyForm.getByLabel(/Requests per minute/).fill('50');
  await keyForm.getByLabel('Response cache').selectOption({ label: 'Off for this key' });
  await page.getByRole('button', { name: 'Create key' }).click();
  await page.getByRole('heading', { name: 'New key “e2e browser key”' }).waitFor();
  const shown = page.locator('#new-key-value');
  const key = (await shown.textContent())!;
  expect(key).to.match(/^sk-[A-Za-z0-9_-]{43}$/);
  await page.getByRole('button', { name: 'Copy key' }).click();
  await page.getByText('Copied to the clipboard.').waitFor();
  expect(await page.evaluate(() => navigator.clipboard.readText())).to.equal(key);
  const keyRow = page.getByRole('row', { name: /e2e browser key/ });
  expect(await keyRow.textContent())
    .to.include('active')
    .and.include('50');
  expect(await keyRow.locator('[data-label="Cache"]').textContent()).to.equal('off');
  expect(
    await page
      .getByRole('row', { name: /kept browser key/ })
      .locator('[data-label="Cache"]')
      .textContent(),
  ).to.equal('default');
  expect(
    await keyForm.getByLabel('Response cache').inputValue(),
    "the form is reset to the gateway's setting",
  ).to.equal('');
  expect(await accessibilityViolations(page)).to.deep.equal([]);
  await screenshot(page, 'account-keys');

  // The key works against a model route on the mock upstream, and the call shows in the usage view.
  expect(await callModel(target.url, key)).to.equal(200);
  for (let call = 0; call < 2; call += 1) expect(await callModel(target.url, key, 'delta/delta-4.6')).to.equal(200);
  await eventually(async () => (await requestsRecorded(target.url, key)) === 3, 'the usage records of the three calls');
  const keyId = (await adminKeys(target))['e2e browser key']!.id;
  await page.getByRole('link', { name: 'Usage' }).click();
  await page.getByRole('heading', { name: 'Usage', level: 1 }).waitFor();
  await page.getByLabel('Key', { exact: true }).selectOption(keyId);
  await page.getByRole('button', { name: 'Show usage' }).click();
  await eventually(
    async () => ((await page.locator('#totals-table tbody').textContent()) ?? '').includes('alpha/gen-5.5'),
    'the usage row of the call',
  );
  const usageRow = page.locator('#totals-table tbody tr').first();
  expect(await usageRow.locator('td').first().textContent()).to.equal('1');
  expect(await page.locator('#day-chart').evaluate((canvas) => (canvas as HTMLCanvasElement).width)).to.be.greaterThan(
    0,
  );
  expect(await page.evaluate(() => Boolean((globalThis as unknown as { Chart?: unknown }).Chart))).to.equal(true);
  expect(await page.locator('#model-chart-summary').textContent())
    .to.include('alpha/gen-5.5')
    .and.include('delta/delta-4.6');
  expect(await page.locator('#totals-table tfoot').textContent()).to.match(/^All models3/);
  const csvHref = await page.locator('#csv-model').getAttribute('href');
  const csv = await page.evaluate(async (href) => (await fetch(href!)).text(), csvHref);
  expect(csv.split('\r\n')[1]).to.match(/^alpha\/gen-5\.5,1,/);
  expect(await accessibilityViolations(page)).to.deep.equal([]);
  await screenshot(page, 'account-usage');

  // Limits: every active key with its limits (whether use figures show depends on the gateway's ledger).
  await page.getByRole('link', { name: 'Limits' }).click();
  await page.getByRole('heading', { name: 'Limits', level: 1 }).waitFor();
  const limitsRow = page.locator('#limit-keys-table tbody tr', { hasText: 'e2e browser key' });
  await limitsRow.waitFor();
  // Its requests per minute: the use counted in the window open now (whatever minute the journey's requests fell in) of
  // its 50.
  expect(await limitsRow.locator('td').nth(1).textContent()).to.match(/^\d+ \/ 50\d+% · resets \d\d:\d\d UTC$/);
  expect(await page.locator('#limit-keys-table tbody tr', { hasText: 'kept browser key' }).count()).to.equal(1);
  expect(await accessibilityViolations(page)).to.deep.equal([]);

  // Health: readiness, every provider's endpoint, the alias table.
  await page.getByRole('link', { name: 'Health' }).click();
  await page.getByRole('heading', { name: 'Health', level: 1 }).waitFor();
  await eventually(
    async () => (await page.locator('#providers-table tbody tr').count()) === target.providers,
    `${target.providers} provider rows`,
  );
  expect(await page.locator('#aliases-table').textContent()).to.include('alpha-latest');
  expect(await page.locator('#readiness').textContent()).to.include('not configured');
  expect(await page.content()).not.to.include(target.upstreamKey);
  expect(await accessibilityViolations(page)).to.deep.equal([]);
  await screenshot(page, 'account-health');

  // Narrow screen: every view still fits and works.
  await page.setViewportSize({ width: 390, height: 844 });
  for (const view of ['keys', 'usage', 'limits', 'health']) {
    await page.getByRole('link', { name: view[0]!.toUpperCase() + view.slice(1) }).click();
    await page.locator(`#${view}-view`).waitFor();
    await page.waitForLoadState('networkidle');
    const overflow = await page.evaluate(
      () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
    );
    expect(overflow, `${view} scrolls sideways`).to.be.at.most(0);
    await screenshot(page, `account-${view}-narrow`);
  }
  await page.setViewportSize({ width: 1280, height: 900 });

  // Revoke with confirmation (keyboard: the dialog opens on Cancel; Escape cancels).
  await page.getByRole('link', { name: 'Keys' }).click();
  await page.getByRole('button', { name: 'Revoke key e2e browser key' }).click();
  await page.getByRole('dialog').waitFor();
  await page.keyboard.press('Escape');
  expect(await page.getByRole('row', { name: /e2e browser key/ }).textContent()).to.include('active');
  await page.getByRole('button', { name: 'Revoke key e2e browser key' }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Revoke e2e browser key' }).click();
  await eventually(
    async () => ((await page.getByRole('row', { name: /e2e browser key/ }).textContent()) ?? '').includes('revoked'),
    'the key shown revoked',
  );
  expect(await callModel(target.url, key)).to.equal(403);
  // After a confirmed revocation, Escape on the next dialog still cancels.
  await page.getByRole('button', { name: 'Revoke key kept browser key' }).click();
  await page.getByRole('dialog').waitFor();
  await page.keyboard.press('Escape');
  await page.getByRole('dialog').waitFor({ state: 'hidden' });
  await page.waitForLoadState('networkidle');
  expect((await adminKeys(target))['kept browser key']!.revoked).to.equal(false);
  expect(await page.getByRole('row', { name: /kept browser key/ }).textContent()).to.include('active');

  // Sign out: the form is back and the old cookie opens nothing any more.
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByRole('heading', { name: 'Sign in' }).waitFor();
  expect(await sessionCookie(browser, target.url)).to.equal(undefined);
  expect(await page.locator('#keys-table tbody tr').count()).to.equal(0);
  const replay = await fetch(`${target.url}/account/api/keys`, {
    headers: { cookie: `gw_account_session=${cookie!.value}` },
  });
  expect(replay.status).to.equal(401);
  expect(browser.problems).to.deep.equal([]);
}
