import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

/** Debian's `chromium` package (`.ci/run` installs it when missing). */
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Where browser tests leave their screenshots (gitignored). */
export const ARTIFACTS_DIR = join(process.cwd(), 'test-artifacts');

export interface HeadlessBrowser {
  readonly context: BrowserContext;
  /** Console errors, failed page scripts and CSP violations seen so far, on every page. */
  readonly problems: string[];
  newPage(): Promise<Page>;
  close(): Promise<void>;
}

/** Headless Chromium with a fresh user-data directory, collecting every console error of its pages. */
export async function launchBrowser(
  options: { viewport?: { width: number; height: number }; permissions?: string[] } = {},
): Promise<HeadlessBrowser> {
  if (!existsSync(CHROMIUM_PATH))
    throw new Error(
      `${CHROMIUM_PATH} is missing: install Debian's chromium package (apt-get install -y chromium), as .ci/run does`,
    );
  const userDataDir = await mkdtemp(join(tmpdir(), 'gateway-chromium-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: ARGS,
    viewport: options.viewport ?? { width: 1280, height: 900 },
    permissions: options.permissions,
    timeout: 30_000,
  });
  const problems: string[] = [];
  const watch = (page: Page) => {
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(`console: ${message.text()}`);
    });
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  };
  context.pages().forEach(watch);
  context.on('page', watch);
  return {
    context,
    problems,
    async newPage() {
      const [blank] = context.pages();
      return blank && blank.url() === 'about:blank' ? blank : context.newPage();
    },
    async close() {
      await context.close();
      await rm(userDataDir, { recursive: true, force: true });
    },
  };
}

/** Saves a full-page screenshot as `test-artifacts/<name>.png`; returns its path. */
export async function screenshot(page: Page, name: string): Promise<string> {
  const path = join(ARTIFACTS_DIR, `${name}.png`);
  await mkdir(ARTIFACTS_DIR, { recursive: true });
  await page.screenshot({ path, fullPage: true });
  return path;
}
