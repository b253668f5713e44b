import { expect } from 'chai';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import type { Page } from 'playwright-core';
import { runCli } from '../../src/cli/main.ts';
import { eventually } from '../helpers/eventually.ts';
import { launchBrowser, screenshot, type HeadlessBrowser } from '../helpers/headless-browser.ts';
import { startOidcIssuer, type OidcIssuer } from '../helpers/oidc-issuer.ts';
import { startTestGateway, type TestGateway } from '../helpers/test-gateway.ts';
import { accessibilityViolations, rowCells } from './account-journey.ts';

const ADMIN_TOKEN = 'sign-on-break-glass-token-0123456789abcdef';
const CLIENT_SECRET = 'sign-on-client-secret-0123456789abcdef';
const USERS = {
  alice: { email: 'alice@example.com', name: 'Alice', groups: ['platform-admins'] },
  bob: { email: 'bob@example.com', name: 'Bob', groups: ['blue-leads', 'staff'] },
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

interface AuditRecord {
  seq: number;
  actor: { kind: string; name?: string; roles: string[] } | null;
  action: string;
  outcome: string;
  target: { type: string; id?: string; team?: string | null };
  before: Record<string, unknown> | null;
  after: Record<string, unknown> | null;
  reason: string | null;
}

describe('single sign-on through a real OpenID provider: three people, three roles, every change audited', function () {
  this.timeout(180_000);
  let issuer: OidcIssuer;
  let test: TestGateway;
  let configDir: string;
  const admin = { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' };

  before(async () => {
    issuer = await startOidcIssuer(USERS);
    configDir = await mkdtemp(join(tmpdir(), 'gateway-sign-on-'));
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
    for (const team of [{ name: 'blue', rpm: 100, budget: { daily_usd: 5 } }, { name: 'green' }]) {
      const created = await fetch(`${test.url}/admin/teams`, {
        method: 'POST',
        headers: admin,
        body: JSON.stringify(team),
      });
      expect(created.status).to.equal(201);
    }
  });
  after(async () => {
    await test?.close();
    await issuer?.close();
    await rm(configDir, { recursive: true, force: true });
  });

  /** Signs a person in through the page's single sign-on button and the provider's login and consent pages. */
  async function signOn(browser: HeadlessBrowser, login: keyof typeof USERS): Promise<Page> {
    const page = await browser.newPage();
    page.setDefaultTimeout(15_000);
    await page.goto(`${test.url}/account`);
    await page.getByRole('link', { name: 'Sign in with single sign-on' }).click();
    await page.locator('input[name="login"]').fill(login);
    await page.locator('input[name="password"]').fill('any password');
    await page.getByRole('button', { name: 'Sign-in' }).click();
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.waitForURL(`${test.url}/account**`);
    // The provider's development pages load fonts from the internet, which cannot be reached here: not the gateway's
    // problems.
    browser.problems.length = 0;
    await page.locator('#who').filter({ hasText: USERS[login].email }).waitFor();
    await page.waitForLoadState('networkidle');
    return page;
  }

  /**
   * A call of the account API from the signed-in page, as its own scripts make them (cookie, CSRF token, this origin).
   */
  async function pageCall(
    page: Page,
    method: string,
    path: string,
    body?: unknown,
  ): Promise<{ status: number; json: Record<string, any> }> {
    return page.evaluate(
      async ({ method, path, body }) => {
        const { csrf_token: csrf } = await (await fetch('/account/api/session')).json();
        const response = await fetch(`/account/api${path}`, {
          method,
          headers: { 'content-type': 'application/json', 'x-csrf-token': csrf },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        return { status: response.status, json: await response.json().catch(() => ({})) };
      },
      { method, path, body },
    );
  }

  async function auditRecords(): Promise<AuditRecord[]> {
    const response = await fetch(`${test.url}/admin/audit?limit=1000`, { headers: admin });
    expect(response.status).to.equal(200);
    return ((await response.json()) as { data: AuditRecord[] }).data.reverse();
  }

  let greenKey: string;
  let blueKey: string;

  it('signs the admin in: she sees every view and changes everything (a key in green, made and changed through the page)', async () => {
    const browser = await launchBrowser();
    try {
      const page = await signOn(browser, 'alice');
      expect(await page.locator('#who').textContent()).to.equal('Signed in as alice@example.com · admin');
      for (const view of ['Keys', 'Teams', 'Usage', 'Limits', 'Health', 'Audit'])
        expect(await page.getByRole('link', { name: view, exact: true }).isVisible(), view).to.equal(true);
      const form = page.locator('#create-key-form');
      await form.getByLabel('Name').fill('green service');
      await form.getByLabel('Team', { exact: true }).selectOption('green');
      await page.getByRole('button', { name: 'Create key' }).click();
      await page.getByRole('heading', { name: 'New key “green service”' }).waitFor();
      const keys = await pageCall(page, 'GET', '/keys');
      greenKey = keys.json.data.find((key: { name: string }) => key.name === 'green service').id;
      expect((await pageCall(page, 'PATCH', `/keys/${greenKey}`, { rpm: 20 })).status).to.equal(200);
      await page.getByRole('link', { name: 'Audit', exact: true }).click();
      await page.getByRole('heading', { name: 'Audit', level: 1 }).waitFor();
      await eventually(async () => (await page.locator('#audit-table tbody tr').count()) > 0, 'audit rows');
      expect(await accessibilityViolations(page)).to.deep.equal([]);
      await screenshot(page, 'account-audit');
      expect(browser.problems).to.deep.equal([]);
    } finally {
      await browser.close();
    }
  });

  it("lets the team admin of blue make a key in blue through the page, and refuses green's keys, a limit above blue's and a token with admin (403)", async () => {
    const browser = await launchBrowser();
    try {
      const page = await signOn(browser, 'bob');
      expect(await page.locator('#who').textContent()).to.equal('Signed in as bob@example.com · team-admin:blue');
      expect(await page.locator('#create-team-form').isVisible()).to.equal(false);
      expect(await page.getByRole('row', { name: /green service/ }).count()).to.equal(0);
      const form = page.locator('#create-key-form');
      expect(await form.getByLabel('Team', { exact: true }).locator('option').allTextContents())
        .to.include('blue')
        .and.not.include('green');
      await form.getByLabel('Name').fill('blue worker');
      await form.getByLabel('Team', { exact: true }).selectOption('blue');
      await form.getByLabel(/Requests per minute/).fill('50');
      await page.getByRole('button', { name: 'Create key' }).click();
      await page.getByRole('heading', { name: 'New key “blue worker”' }).waitFor();
      const row = await rowCells(page.getByRole('row', { name: /blue worker/ }));
      expect(row.Team).to.equal('blue');
      // Only an admin puts a key into a budget group: no Group field for a team admin, in the form or the dialog;
      // alerts and end users' limits are there.
      expect(await form.getByLabel('Group', { exact: true }).isVisible()).to.equal(false);
      expect(await form.getByLabel('Alerts').isVisible()).to.equal(true);
      await page.getByRole('button', { name: 'Done' }).click();
      await page.getByRole('button', { name: 'Edit key blue worker' }).click();
      const dialog = page.getByRole('dialog', { name: 'Edit key blue worker' });
      await dialog.waitFor();
      expect(await dialog.getByLabel('Group', { exact: true }).isVisible()).to.equal(false);
      expect(await dialog.getByLabel('End-user requests a minute').isVisible()).to.equal(true);
      await dialog.getByRole('button', { name: 'Cancel' }).click();
      await dialog.waitFor({ state: 'hidden' });
      blueKey = (await pageCall(page, 'GET', '/keys')).json.data.find(
        (key: { name: string }) => key.name === 'blue worker',
      ).id;

      const onGreen = await pageCall(page, 'PATCH', `/keys/${greenKey}`, { rpm: 1 });
      expect(onGreen.status).to.equal(403);
      expect(onGreen.json.detail).to.equal(
        "Your role may not create, change and revoke keys of team 'green' (keys.write)",
      );
      expect((await pageCall(page, 'POST', `/keys/${greenKey}/revoke`)).status).to.equal(403);
      const above = await pageCall(page, 'POST', '/keys', { name: 'too fast', team: 'blue', rpm: 500 });
      expect(above.status).to.equal(403);
      expect(above.json.detail).to.equal(
        "A key's limits may not exceed its team's: rpm 500 is above team 'blue''s 100",
      );
      const intoGreen = await pageCall(page, 'POST', '/keys', { name: 'sneaky', team: 'green' });
      expect(intoGreen.status).to.equal(403);
      const token = await pageCall(page, 'POST', '/tokens', { name: 'root please', role: 'admin' });
      expect(token.status).to.equal(403);
      expect(token.json.detail).to.match(/^A token may not hold more than its maker/);
      const ownToken = await pageCall(page, 'POST', '/tokens', { name: 'blue ci', role: 'viewer', teams: ['blue'] });
      expect(ownToken.status).to.equal(201);
      expect(ownToken.json.token).to.match(/^gwt_/);
      const scoped = await fetch(`${test.url}/admin/keys`, {
        headers: { authorization: `Bearer ${ownToken.json.token}` },
      });
      expect(((await scoped.json()) as { data: { team: string }[] }).data.map((key) => key.team)).to.deep.equal([
        'blue',
      ]);
      expect(browser.problems.every((problem) => problem.includes('403'))).to.equal(true, browser.problems.join('\n'));
    } finally {
      await browser.close();
    }
  });

  it('shows the viewer everything and lets her change nothing', async () => {
    const browser = await launchBrowser();
    try {
      const page = await signOn(browser, 'carol');
      expect(await page.locator('#who').textContent()).to.equal('Signed in as carol@example.com · viewer');
      expect(await page.locator('#create-key-form').isVisible()).to.equal(false);
      await page.getByRole('row', { name: /green service/ }).waitFor();
      expect(await page.getByRole('button', { name: /^(Edit|Revoke) key/ }).count()).to.equal(0);
      expect((await pageCall(page, 'POST', '/keys', { name: 'viewer key', team: 'blue' })).status).to.equal(403);
      expect((await pageCall(page, 'PATCH', `/keys/${blueKey}`, { rpm: 1 })).status).to.equal(403);
      expect((await pageCall(page, 'DELETE', '/teams/green')).status).to.equal(403);
      expect((await pageCall(page, 'DELETE', '/cache')).status).to.equal(403);
      await page.getByRole('link', { name: 'Teams', exact: true }).click();
      await page.getByRole('heading', { name: 'Teams', level: 1 }).waitFor();
      expect(await page.getByRole('button', { name: /Delete/ }).count()).to.equal(0);
      expect(await accessibilityViolations(page)).to.deep.equal([]);
    } finally {
      await browser.close();
    }
  });

  it('keeps each change once in GET /admin/audit with before and after, each refusal and sign-in; audit verify finds a broken chain', async () => {
    let records: AuditRecord[] = [];
    await eventually(async () => {
      records = await auditRecords();
      return records.filter((record) => record.action === 'session.sign-in').length === 3;
    }, 'three sign-ins');
    const changes = records.filter((record) => record.outcome === 'ok' && !record.action.startsWith('session.'));
    const named = (action: string, id: string | undefined) =>
      changes.filter((record) => record.action === action && record.target.id === id);
    expect(named('team.create', 'blue')).to.have.length(1);
    expect(named('team.create', 'green')).to.have.length(1);
    const made = named('key.create', greenKey);
    expect(made).to.have.length(1);
    expect(made[0]!.actor).to.deep.include({ kind: 'user', name: 'alice@example.com', roles: ['admin'] });
    expect(made[0]).to.deep.include({ before: null });
    expect(made[0]!.after).to.deep.include({ name: 'green service', team: 'green' });
    const changed = named('key.update', greenKey);
    expect(changed).to.have.length(1);
    expect(changed[0]!.before).to.deep.include({ rpm: null });
    expect(changed[0]!.after).to.deep.include({ rpm: 20 });
    const blue = named('key.create', blueKey);
    expect(blue).to.have.length(1);
    expect(blue[0]!.actor).to.deep.include({ name: 'bob@example.com', roles: ['team-admin:blue'] });
    expect(blue[0]!.after).to.deep.include({ team: 'blue', rpm: 50 });
    expect(changes.filter((record) => record.action === 'token.create')).to.have.length(1);
    for (const record of changes) expect(record.after ?? record.before, record.action).to.not.equal(null);
    expect(JSON.stringify(records))
      .not.to.include('gwt_')
      .and.not.include('sk-')
      .and.not.include(CLIENT_SECRET)
      .and.not.include(ADMIN_TOKEN);

    const refused = records.filter((record) => record.outcome === 'refused');
    const bobs = refused.filter((record) => record.actor?.name === 'bob@example.com');
    expect(bobs.map((record) => [record.action, record.target.team])).to.deep.equal([
      ['keys.write', 'green'],
      ['keys.write', 'green'],
      ['key.create', 'blue'],
      ['key.create', 'green'],
      ['token.create', null],
    ]);
    expect(refused.filter((record) => record.actor?.name === 'carol@example.com')).to.have.length(4);

    const env = { GATEWAY_DATA_DIR: test.dataDir, GATEWAY_CONFIG: join(configDir, 'gateway.yaml') };
    const out: string[] = [];
    const io = { out: (text: string) => void out.push(text), err: (text: string) => void out.push(text) };
    expect(await runCli(['audit', 'verify'], io, env)).to.equal(0);
    expect(out.join('')).to.match(/^Audit log intact: \d+ records, every hash in the chain checked\.\n$/);
    const path = join(test.dataDir, 'audit.jsonl');
    const lines = (await readFile(path, 'utf8')).split('\n');
    const at = lines.findIndex((line) => line.includes('"action":"key.update"'));
    lines[at] = lines[at]!.replace('"rpm":20', '"rpm":2000');
    await writeFile(path, lines.join('\n'));
    out.length = 0;
    expect(await runCli(['audit', 'verify'], io, env)).to.equal(1);
    expect(out.join('')).to.equal(
      `Audit log broken: record ${at + 1} was changed (its content does not give its hash). Records before ${at + 1} are intact.\n`,
    );
  });
});
