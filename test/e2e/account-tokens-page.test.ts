import { expect } from 'chai';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { launchBrowser, screenshot, type HeadlessBrowser } from '../helpers/headless-browser.ts';
import { startOidcIssuer, type OidcIssuer } from '../helpers/oidc-issuer.ts';
import { startTestGateway, type TestGateway } from '../helpers/test-gateway.ts';
import { accessibilityViolations, openView, rowCells } from './account-journey.ts';

const ADMIN_TOKEN = 'tokens-page-break-glass-token-0123456789abcdef';
const CLIENT_SECRET = 'tokens-page-client-secret-0123456789abcdef';
const USERS = {
  alice: { email: 'alice@example.com', name: 'Alice', groups: ['platform-admins'] },
  bob: { email: 'bob@example.com', name: 'Bob', groups: ['blue-leads'] },
  carol: { email: 'carol@example.com', name: 'Carol', groups: ['auditors'] },
};
const CONFIG = `logLevel: silent
access:
  oidc: { scopes: [profile, email, groups] }
  roles:
    - { group: platform-admins, role: admin }
    - { group: blue-leads, role: team-admin, teams: [blue] }
    - { group: auditors, role: viewer }
`;

describe('account page tokens view in headless Chromium: each role sees and does only what it may', function () {
  this.timeout(180_000);
  let issuer: OidcIssuer;
  let test: TestGateway;
  let configDir: string;
  const admin = { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' };

  before(async () => {
    issuer = await startOidcIssuer(USERS);
    configDir = await mkdtemp(join(tmpdir(), 'gateway-tokens-page-'));
    await writeFile(join(configDir, 'gateway.yaml'), CONFIG);
    test = await startTestGateway({
      configFile: join(configDir, 'gateway.yaml'),
      env: {
        GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN,
        GATEWAY_OIDC_ISSUER: issuer.url,
        GATEWAY_OIDC_CLIENT_ID: 'model-gateway',
        GATEWAY_OIDC_CLIENT_SECRET: CLIENT_SECRET,
      },
    });
    issuer.register({
      clientId: 'model-gateway',
      clientSecret: CLIENT_SECRET,
      redirectUri: `${test.url}/account/api/sso/callback`,
    });
    for (const name of ['blue', 'green'])
      expect(
        (await fetch(`${test.url}/admin/teams`, { method: 'POST', headers: admin, body: JSON.stringify({ name }) }))
          .status,
      ).to.equal(201);
  });
  after(async () => {
    await test?.close();
    await issuer?.close();
    await rm(configDir, { recursive: true, force: true });
  });

  /** Signs a person in through single sign-on and opens the Tokens view. */
  async function tokensViewAs(browser: HeadlessBrowser, login: keyof typeof USERS): Promise<Page> {
    const page = await browser.newPage();
    page.setDefaultTimeout(15_000);
    await page.goto(`${test.url}/account`);
    await page.getByRole('link', { name: 'Sign in with single sign-on' }).click();
    await page.locator('input[name="login"]').fill(login);
    await page.locator('input[name="password"]').fill('any password');
    await page.getByRole('button', { name: 'Sign-in' }).click();
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.waitForURL(`${test.url}/account**`);
    // The provider's development pages load fonts from the internet, which cannot be reached here:
    // not the gateway's problems.
    browser.problems.length = 0;
    await page.locator('#who').filter({ hasText: USERS[login].email }).waitFor();
    await openView(page, 'Tokens', 'Service tokens');
    return page;
  }

  /** Who a bearer credential acts as on the admin API, or its status when refused. */
  async function whoami(token: string): Promise<{ roles: string[] } | number> {
    const response = await fetch(`${test.url}/admin/whoami`, { headers: { authorization: `Bearer ${token}` } });
    return response.status === 200 ? ((await response.json()) as { roles: string[] }) : response.status;
  }

  const field = (page: Page, label: string | RegExp) => page.locator('#create-token-form').getByLabel(label);
  const roleChoices = (page: Page) => field(page, 'Role').locator('option').allTextContents();
  const teamChoices = (page: Page) =>
    field(page, /^Teams/)
      .locator('option')
      .allTextContents();
  /** A time in a month, as a datetime-local field takes it (this machine's time zone, the browser's too). */
  const inAMonth = () => {
    const date = new Date(Date.now() + 30 * 86_400_000);
    const two = (value: number) => String(value).padStart(2, '0');
    return `${date.getFullYear()}-${two(date.getMonth() + 1)}-${two(date.getDate())}T${two(date.getHours())}:${two(date.getMinutes())}`;
  };
  const shownTime = (iso: string) => `${iso.slice(0, 16).replace('T', ' ')} UTC`;

  it('lets the admin make a token of any role (shown once, copied, working at once), refuses a team admin without teams by the field, and revokes it', async () => {
    const browser = await launchBrowser({ permissions: ['clipboard-read', 'clipboard-write'] });
    try {
      const page = await tokensViewAs(browser, 'alice');
      expect(await page.getByRole('link', { name: 'Tokens', exact: true }).getAttribute('aria-current')).to.equal(
        'page',
      );
      expect(await roleChoices(page)).to.deep.equal([
        'admin: everything',
        "team-admin: the chosen teams' keys, budgets, cache and tokens",
        'viewer: read only',
      ]);
      expect(await teamChoices(page)).to.deep.equal(['blue', 'green']);
      // The least power is offered first.
      expect(await field(page, 'Role').inputValue()).to.equal('viewer');
      expect(await page.locator('#tokens-empty').isVisible()).to.equal(true);

      // An admin holds every team: the teams field goes away for that role.
      await field(page, 'Role').selectOption('admin');
      expect(await field(page, /^Teams/).isVisible()).to.equal(false);

      // A team admin needs its teams: the gateway's refusal is shown next to the field.
      await field(page, 'Name').fill('green deploys');
      await field(page, 'Role').selectOption('team-admin');
      await page.getByRole('button', { name: 'Create token' }).click();
      const teams = field(page, /^Teams/);
      await page.locator('#token-teams-error').waitFor();
      expect(await teams.getAttribute('aria-invalid')).to.equal('true');
      expect(await page.locator('#token-teams-error').textContent()).to.equal(
        'Teams: is required for team-admin: the teams it manages',
      );
      expect(await page.locator('#create-token-error').textContent()).to.contain('Invalid input parameters');
      // The browser notes the refused request, and nothing else.
      expect(browser.problems).to.deep.equal([
        'console: Failed to load resource: the server responded with a status of 400 (Bad Request)',
      ]);
      browser.problems.length = 0;

      await teams.selectOption(['green']);
      await page.getByRole('button', { name: 'Create token' }).click();
      await page.getByRole('heading', { name: 'New token “green deploys”' }).waitFor();
      const token = (await page.locator('#new-token-value').textContent())!;
      expect(token).to.match(/^gwt_[A-Za-z0-9_-]{43}$/);
      await page.getByRole('button', { name: 'Copy token' }).click();
      await page.getByText('Copied to the clipboard.').waitFor();
      expect(await page.evaluate(() => navigator.clipboard.readText())).to.equal(token);
      expect(await whoami(token)).to.deep.include({ roles: ['team-admin:green'] });
      expect(await page.locator('#create-token-error').textContent()).to.equal('');
      expect(await teams.getAttribute('aria-invalid')).to.equal(null);
      expect(await field(page, 'Role').inputValue()).to.equal('viewer');

      const row = page.getByRole('row', { name: /green deploys/ });
      const cells = await rowCells(row);
      expect(cells).to.deep.include({ Role: 'team-admin', Teams: 'green', Status: 'active' });
      expect(cells.Token).to.match(/^green deploystok_[0-9a-f]{16}$/);
      expect(cells.Created).to.match(/^\d{4}-\d\d-\d\d \d\d:\d\d UTCby user:alice@example\.com$/);
      // Ninety days from now unless told otherwise.
      const created = Date.parse(`${cells.Created!.slice(0, 16).replace(' ', 'T')}Z`);
      expect(cells.Expires).to.equal(shownTime(new Date(created + 90 * 86_400_000).toISOString()));
      expect(await page.locator('#tokens-table').textContent()).not.to.include(token);

      // A viewer of every team, expiring when asked.
      const expires = inAMonth();
      await field(page, 'Name').fill('finance reader');
      await field(page, 'Role').selectOption('viewer');
      await field(page, /^Expires/).fill(expires);
      await page.getByRole('button', { name: 'Create token' }).click();
      await page.getByRole('heading', { name: 'New token “finance reader”' }).waitFor();
      expect(await whoami((await page.locator('#new-token-value').textContent())!)).to.deep.include({
        roles: ['viewer'],
      });
      const reader = await rowCells(page.getByRole('row', { name: /finance reader/ }));
      expect(reader).to.deep.include({ Teams: 'every team', Expires: shownTime(new Date(expires).toISOString()) });
      expect(await accessibilityViolations(page)).to.deep.equal([]);
      await screenshot(page, 'account-tokens');

      // Revoking asks first; cancelling changes nothing.
      await page.getByRole('button', { name: 'Revoke token green deploys' }).click();
      await page.getByRole('dialog', { name: 'Revoke token?' }).waitFor();
      expect(await accessibilityViolations(page)).to.deep.equal([]);
      await page.getByRole('button', { name: 'Cancel' }).click();
      expect(await whoami(token)).to.deep.include({ roles: ['team-admin:green'] });
      await page.getByRole('button', { name: 'Revoke token green deploys' }).click();
      await page.getByRole('button', { name: 'Revoke green deploys' }).click();
      await page.getByText('Token green deploys revoked.').waitFor();
      expect((await rowCells(page.getByRole('row', { name: /green deploys/ }))).Status).to.equal('revoked');
      expect(await page.getByRole('button', { name: 'Revoke token green deploys' }).count()).to.equal(0);
      expect(await whoami(token)).to.equal(401);

      // The token shown once is gone when the view is left.
      await openView(page, 'Keys', 'API keys');
      await openView(page, 'Tokens', 'Service tokens');
      expect(await page.locator('#new-token').isVisible()).to.equal(false);
      expect(await page.content()).not.to.include(token);
      expect(browser.problems).to.deep.equal([]);
    } finally {
      await browser.close();
    }
  });

  it('offers the team admin only its own teams and roles, lists only the tokens within them, and lets it make and revoke those', async () => {
    const browser = await launchBrowser();
    try {
      const page = await tokensViewAs(browser, 'bob');
      expect(await roleChoices(page)).to.deep.equal([
        "team-admin: the chosen teams' keys, budgets, cache and tokens",
        'viewer: read only',
      ]);
      expect(await teamChoices(page)).to.deep.equal(['blue']);
      // Neither the admin's team admin of green nor its viewer of every team is within blue.
      expect(await page.locator('#tokens-table tbody tr').count()).to.equal(0);
      expect(await page.locator('#tokens-empty').isVisible()).to.equal(true);

      await field(page, 'Name').fill('blue dashboards');
      await field(page, 'Role').selectOption('viewer');
      expect(await page.locator('#token-teams-hint').textContent()).to.equal('(required: your teams it may read)');
      await field(page, /^Teams/).selectOption(['blue']);
      await page.getByRole('button', { name: 'Create token' }).click();
      await page.getByRole('heading', { name: 'New token “blue dashboards”' }).waitFor();
      expect(await whoami((await page.locator('#new-token-value').textContent())!)).to.deep.include({
        roles: ['viewer:blue'],
      });
      expect(await rowCells(page.getByRole('row', { name: /blue dashboards/ }))).to.deep.include({
        Role: 'viewer',
        Teams: 'blue',
        Status: 'active',
      });
      expect(await page.getByRole('button', { name: 'Revoke token blue dashboards' }).isVisible()).to.equal(true);
      expect(await accessibilityViolations(page)).to.deep.equal([]);
      expect(browser.problems).to.deep.equal([]);
    } finally {
      await browser.close();
    }
  });

  it('shows the viewer the tokens within its role and nothing to make or revoke them with', async () => {
    const browser = await launchBrowser({ viewport: { width: 390, height: 844 } });
    try {
      const page = await tokensViewAs(browser, 'carol');
      expect(await page.locator('#create-token-form').isVisible()).to.equal(false);
      // A viewer of every team covers the viewers: the finance reader and blue's dashboards, not a team admin.
      await page.getByRole('row', { name: /blue dashboards/ }).waitFor();
      const names = await page.locator('#tokens-table tbody th').allTextContents();
      expect(names.map((name) => name.replace(/tok_[0-9a-f]{16}$/, '')).sort()).to.deep.equal([
        'blue dashboards',
        'finance reader',
      ]);
      expect(await page.getByRole('button', { name: /^Revoke token/ }).count()).to.equal(0);
      // Narrow screen: one card per token, nothing scrolls sideways.
      const sideways = await page.evaluate(() => {
        const { scrollWidth, clientWidth } = document.documentElement;
        return scrollWidth - clientWidth;
      });
      expect(sideways).to.be.at.most(0);
      expect(await accessibilityViolations(page)).to.deep.equal([]);
      await screenshot(page, 'account-tokens-viewer-narrow');
      expect(browser.problems).to.deep.equal([]);
    } finally {
      await browser.close();
    }
  });
});
