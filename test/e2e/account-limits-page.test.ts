import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Page } from 'playwright-core';
import { accountRouter } from '../../src/control-plane/account/account-router.ts';
import type { Limits, LimitScope } from '../../src/core/limits.ts';
import { createLogger } from '../../src/core/logger.ts';
import { ModelRegistry } from '../../src/core/model-registry.ts';
import { endpointsOf } from '../../src/data-plane/upstream/endpoint-pool.ts';
import { loadPlugins } from '../../src/plugins/load-plugins.ts';
import { FileGroupStore } from '../../src/stores/groups/file-group-store.ts';
import { FileKeyStore } from '../../src/stores/keys/file-key-store.ts';
import { MemoryLedger } from '../../src/stores/limits/embedded-ledger.ts';
import { EmbeddedAlertLog } from '../../src/stores/alerts/embedded-alert-log.ts';
import { MemorySessionStore } from '../../src/stores/session-store.ts';
import { EmbeddedUsageStore } from '../../src/stores/usage/embedded-usage-store.ts';
import { metersOfLimits, requestMeter } from '../../src/usage/limit-meters.ts';
import { startGuardedApp, type GuardedApp } from '../data-plane/pipeline/guarded-app.ts';
import { sleep } from '../helpers/eventually.ts';
import { launchBrowser, screenshot, type HeadlessBrowser } from '../helpers/headless-browser.ts';
import { MemoryTeamStore } from '../helpers/memory-team-store.ts';
import { accessibilityViolations, rowCells } from './account-journey.ts';

const ADMIN_TOKEN = 'account-limits-page-admin-token-0123456789abcdef';
const CAPPED: Limits = {
  rpm: 60,
  tpm: 10_000,
  quota: { daily: 100_000, monthly: 2_000_000 },
  budget: { daily_usd: 5, monthly_usd: 50 },
};
const RESEARCH: Limits = { rpm: 600, tpm: 50_000, budget: { monthly_usd: 100 } };

describe('account page limits view in headless Chromium', function () {
  this.timeout(90_000);
  let dataDir: string;
  let keys: FileKeyStore;
  let usage: EmbeddedUsageStore;
  let ledger: MemoryLedger;
  let alerts: EmbeddedAlertLog;
  let app: GuardedApp;
  let browser: HeadlessBrowser;
  let page: Page;

  /** Adds `amounts` to an owner's counters open now, in the order of its meters (tpm, quota d/m, budget d/m). */
  function use(scope: LimitScope, owner: string, limits: Limits, amounts: number[]): void {
    metersOfLimits(scope, owner, limits, Date.now()).forEach((meter, index) => {
      if (amounts[index]) ledger.add(meter.counter, amounts[index]!, meter.resetAt);
    });
  }

  /** Counts `count` requests on an owner's request counter open now, as the rate limiter does. */
  function requests(scope: LimitScope, owner: string, limit: number, count: number): void {
    const meter = requestMeter(scope, owner, limit, 60_000, Date.now());
    for (let i = 0; i < count; i++)
      ledger.reserve([{ counter: meter.counter, limit, want: 1, need: 1, resetAt: meter.resetAt }]);
  }

  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'gateway-account-limits-page-'));
    keys = new FileKeyStore(dataDir);
    usage = await EmbeddedUsageStore.open(dataDir, createLogger('silent'));
    ledger = new MemoryLedger();
    alerts = new EmbeddedAlertLog();
    const teams = new MemoryTeamStore([
      { name: 'research', ...RESEARCH, cache: false },
      { name: 'idle', quota: { daily: 1000 } },
    ]);
    const registry = new ModelRegistry(await loadPlugins(resolve('providers/manifest.json')));
    app = await startGuardedApp({
      routers: {
        '/account': accountRouter({
          token: ADMIN_TOKEN,
          keys,
          usage,
          registry: () => registry,
          endpoints: endpointsOf(new Map()),
          readiness: async () => ({ status: 'ok' }),
          sessions: new MemorySessionStore(),
          teams,
          // As a gateway's: its key form offers the budget groups (none here).
          groups: new FileGroupStore(dataDir),
          limits: ledger,
          alerts,
        }),
      },
    });
    browser = await launchBrowser();
    page = await browser.newPage();
    page.setDefaultTimeout(10_000);
  });
  after(async () => {
    await browser?.close();
    await app?.close();
    await usage?.close();
    await keys?.close();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it("shows each key's and team's use against its rpm, tpm, quotas and budgets, and refreshes", async () => {
    const { record: capped } = await keys.create({ name: 'capped key', ...CAPPED, team: 'research' });
    await keys.create({ name: 'open key' });
    const { record: gone } = await keys.create({ name: 'gone key', tpm: 5 });
    await keys.revoke(gone.id);
    // The tokens-per-minute figure lives one UTC minute: start early in one, so it stays to the end.
    const left = 60_000 - (Date.now() % 60_000);
    if (left < 25_000) await sleep(left + 100);
    use('key', capped.id, CAPPED, [2500, 42_000, 1_234_567, 1_250_000_000, 48_500_000_000]);
    use('team', 'research', RESEARCH, [0, 4_200_000]);
    requests('key', capped.id, 60, 3);
    requests('team', 'research', 600, 3);
    const windowEnd = new Date(Date.now() + 3_600_000).toISOString();
    const firing = {
      team: 'research',
      unit: 'usd',
      window_end: windowEnd,
      fired_at: '2026-11-23T14:05:00.000Z',
    } as const;
    alerts.fired({
      ...firing,
      id: 'alrt_1',
      scope: 'key',
      owner: capped.id,
      kind: 'budget',
      period: 'day',
      threshold: 80,
      used: 4.1,
      limit: 5,
    });
    alerts.fired({
      ...firing,
      id: 'alrt_2',
      scope: 'team',
      owner: 'research',
      kind: 'quota',
      period: 'month',
      threshold: 50,
      used: 60_000,
      limit: 100_000,
      unit: 'tokens',
      fired_at: '2026-11-22T09:30:00.000Z',
    });

    await page.goto(`${app.url}/account#limits`);
    await page.getByLabel('Admin token').fill(ADMIN_TOKEN);
    await page.getByLabel('Admin token').press('Enter');
    await page.getByRole('heading', { name: 'Limits', level: 1 }).waitFor();
    expect(await page.getByRole('link', { name: 'Limits' }).getAttribute('aria-current')).to.equal('page');
    const keyRow = page.locator('#limit-keys-table tbody tr', { hasText: 'capped key' });
    await keyRow.waitFor();

    const shown = await rowCells(keyRow);
    expect(shown.Key).to.equal(`capped key${capped.id}`);
    expect(shown).to.deep.include({ Team: 'research' });
    expect(shown['Requests per minute']).to.match(/^3 \/ 605% · resets \d\d:\d\d UTC$/);
    expect(
      await page.getByRole('meter', { name: 'Requests per minute of key capped key: 5% used, 57 left' }).count(),
    ).to.equal(1);
    expect(shown['Tokens per minute']).to.match(/^2,500 \/ 10,00025% · resets \d\d:\d\d UTC$/);
    expect(shown['Daily quota']).to.match(/^42,000 \/ 100,00042% · resets [A-Z][a-z]{2} \d\d?, 00:00 UTC$/);
    expect(shown['Monthly quota']).to.match(/^1,234,567 \/ 2,000,00062% · resets [A-Z][a-z]{2} 1, 00:00 UTC$/);
    expect(shown['Daily budget']).to.match(/^\$1\.25 \/ \$5\.0025% · resets/);
    expect(shown['Monthly budget']).to.match(/^\$48\.50 \/ \$50\.0097% · resets/);
    const bar = page.getByRole('meter', { name: 'Monthly budget of key capped key: 97% used, $1.50 left' });
    expect(
      await bar.evaluate((meter) => [(meter as HTMLMeterElement).value, (meter as HTMLMeterElement).max]),
    ).to.deep.equal([48.5, 50]);
    expect(await page.getByRole('meter', { name: /^Tokens per minute of key capped key: 25% used/ }).count()).to.equal(
      1,
    );

    const open = await rowCells(page.locator('#limit-keys-table tbody tr', { hasText: 'open key' }));
    expect(open).to.deep.include({ Team: '—', 'Tokens per minute': '—', 'Daily quota': '—', 'Monthly budget': '—' });
    // No rpm of its own: the gateway's default request limit (100 per minute).
    expect(open['Requests per minute']).to.match(/^0 \/ 1000% · resets \d\d:\d\d UTCgateway default$/);
    expect(await page.locator('#limit-keys-table').textContent()).not.to.include('gone key');
    expect(await page.locator('#limit-keys-table tbody tr').count()).to.equal(2);

    const team = await rowCells(page.locator('#limit-teams-table tbody tr', { hasText: 'research' }));
    expect(team).to.deep.include({ Team: 'research', Keys: 'capped key', Cache: 'off', 'Daily quota': '—' });
    expect(team['Requests per minute']).to.match(/^3 \/ 6001% · resets/);
    expect(team['Tokens per minute']).to.match(/^0 \/ 50,0000% · resets/);
    expect(team['Monthly budget']).to.match(/^\$0\.0042 \/ \$100\.000% · resets/);
    const idle = await rowCells(page.locator('#limit-teams-table tbody tr', { hasText: 'idle' }));
    expect(idle['Daily quota']).to.match(/^0 \/ 1,0000% /);
    expect(idle.Cache).to.equal('default');
    expect(idle['Requests per minute']).to.equal('—');
    expect(await page.locator('#limits-unmetered').isVisible()).to.equal(false);

    // Each alert's last firing, newest first.
    await page.getByRole('heading', { name: 'Alerts', level: 2 }).waitFor();
    const fired = page.locator('#limit-alerts-table tbody tr');
    expect(await fired.count()).to.equal(2);
    expect(await rowCells(fired.nth(0))).to.deep.equal({
      Owner: `capped key${capped.id}`,
      Limit: 'Daily budget',
      Threshold: '80%',
      'Used when fired': '$4.10 / $5.00',
      'Last fired': '2026-11-23 14:05 UTC',
    });
    expect(await rowCells(fired.nth(1))).to.deep.equal({
      Owner: 'team research',
      Limit: 'Monthly quota',
      Threshold: '50%',
      'Used when fired': '60,000 / 100,000',
      'Last fired': '2026-11-22 09:30 UTC',
    });
    expect(await page.locator('#limit-alerts-empty').isVisible()).to.equal(false);
    expect(await accessibilityViolations(page)).to.deep.equal([]);
    await screenshot(page, 'account-limits');

    // More use, then Refresh: the figures follow.
    use('key', capped.id, CAPPED, [2500]);
    await page.getByRole('button', { name: 'Refresh' }).click();
    await page.getByRole('meter', { name: /^Tokens per minute of key capped key: 50% used, 5,000 left$/ }).waitFor();
    // Leaving the view and coming back reads again, as the other views do.
    use('key', capped.id, CAPPED, [1000]);
    await page.getByRole('link', { name: 'Keys' }).click();
    await page.getByRole('heading', { name: 'API keys', level: 1 }).waitFor();
    await page.getByRole('link', { name: 'Limits' }).click();
    await page.getByRole('meter', { name: /^Tokens per minute of key capped key: 60% used/ }).waitFor();

    // Narrow screen: one card per row, nothing scrolls sideways.
    await page.setViewportSize({ width: 390, height: 844 });
    await page.waitForLoadState('networkidle');
    expect(
      await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth),
    ).to.be.at.most(0);
    expect(await accessibilityViolations(page)).to.deep.equal([]);
    await screenshot(page, 'account-limits-narrow');

    // Signing out drops the figures from the page.
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    expect(await page.locator('#limit-keys-table tbody tr').count()).to.equal(0);
    expect(await page.locator('#limit-alerts-table tbody tr').count()).to.equal(0);
    expect(browser.problems).to.deep.equal([]);
  });
});
