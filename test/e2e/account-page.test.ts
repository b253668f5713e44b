import { expect } from 'chai';
import type { Page } from 'playwright-core';
import { launchBrowser, screenshot, type HeadlessBrowser } from '../helpers/headless-browser.ts';
import { startTestGateway, UPSTREAM_KEY, VENDORS, type TestGateway } from '../helpers/test-gateway.ts';
import { accessibilityViolations, accountJourney } from './account-journey.ts';

const ADMIN_TOKEN = 'account-page-admin-token-0001-0123456789abcdef';

describe('account page in headless Chromium', function () {
  this.timeout(90_000);
  let test: TestGateway;
  let browser: HeadlessBrowser;
  let page: Page;

  before(async () => {
    test = await startTestGateway({ env: { GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN } });
    browser = await launchBrowser({ permissions: ['clipboard-read', 'clipboard-write'] });
    page = await browser.newPage();
    page.setDefaultTimeout(10_000);
  });
  after(async () => {
    await browser?.close();
    await test?.close();
  });

  it('signs in, creates a key that works, shows its usage, revokes it (next call 403) and signs out', async () => {
    await accountJourney(
      { url: test.url, adminToken: ADMIN_TOKEN, providers: VENDORS.length, upstreamKey: UPSTREAM_KEY },
      browser,
      page,
    );
  });
});

describe('account page without GATEWAY_ADMIN_TOKEN in headless Chromium', function () {
  this.timeout(60_000);
  let test: TestGateway;
  let browser: HeadlessBrowser;

  before(async () => {
    test = await startTestGateway();
    browser = await launchBrowser({ viewport: { width: 390, height: 700 } });
  });
  after(async () => {
    await browser?.close();
    await test?.close();
  });

  it('says how to enable it and offers no sign-in', async () => {
    const page = await browser.newPage();
    await page.goto(`${test.url}/account`);
    await page.getByRole('heading', { name: 'The account page is off' }).waitFor();
    expect(await page.locator('#disabled-text').textContent()).to.include('GATEWAY_ADMIN_TOKEN');
    expect(await page.getByLabel('Admin token').isVisible()).to.equal(false);
    expect(await page.getByRole('navigation').isVisible()).to.equal(false);
    expect(await accessibilityViolations(page)).to.deep.equal([]);
    await screenshot(page, 'account-disabled-narrow');
    expect(browser.problems).to.deep.equal([]);
  });
});
