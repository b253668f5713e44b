import { expect } from 'chai';
import type { Page } from 'playwright-core';
import { eventually } from '../helpers/eventually.ts';
import type { HeadlessBrowser } from '../helpers/headless-browser.ts';
import { withinOneWindow } from '../helpers/limit-window.ts';
import { accessibilityViolations, openView, rowCells, type AccountTarget } from './account-journey.ts';

/** How long the gateway trusts a team it has read before asking the store again (authenticate.ts). */
const TEAM_TRUST_MS = 5_000;

/** The dollars a cell shows first (`$0.000123 / $5.00` → 0.000123). */
function dollars(text: string): number {
  const match = /\$([\d,]+(?:\.\d+)?)/.exec(text);
  expect(match, `a USD amount in '${text}'`).to.not.equal(null);
  return Number(match![1]!.replace(/,/g, ''));
}

async function admin<T>(target: AccountTarget, path: string): Promise<T> {
  const response = await fetch(`${target.url}/admin${path}`, {
    headers: { authorization: `Bearer ${target.adminToken}` },
  });
  expect(response.status, path).to.equal(200);
  return (await response.json()) as T;
}

/**
 * A chat call with the key; `max_tokens` keeps its reservation (input + output cap) inside the key's tokens per minute.
 */
async function chat(
  target: AccountTarget,
  key: string,
  content: string,
): Promise<{ status: number; body: { error?: { message: string } } }> {
  const response = await fetch(`${target.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'alpha/gen-5.5', max_tokens: 200, messages: [{ role: 'user', content }] }),
  });
  return { status: response.status, body: (await response.json()) as { error?: { message: string } } };
}

/**
 * An operator runs a team on the account page: signs in, creates a team with a daily budget, creates a
 * key in it with a tokens-per-minute limit through the form, sends requests with the key, and reads the
 * key's and the team's use and cost on the Limits and Usage views, as the admin API reports them. Then
 * lowers the team's budget on the page (the API sees it at once, admission within the team trust time),
 * tries to delete the team its key names (the 409's message, nothing changed), and checks every view
 * with axe, keys and teams present.
 */
export async function teamBudgetJourney(target: AccountTarget, browser: HeadlessBrowser, page: Page): Promise<void> {
  browser.problems.length = 0;
  await page.goto(`${target.url}/account#teams`);
  await page.getByLabel('Admin token').fill(target.adminToken);
  await page.getByLabel('Admin token').press('Enter');
  await page.getByRole('heading', { name: 'Teams', level: 1 }).waitFor();

  // A team with a daily budget.
  const teamForm = page.getByRole('form', { name: 'Create a team' });
  await teamForm.getByLabel('Name').fill('platform');
  await teamForm.getByLabel('Daily budget (USD)').fill('5');
  await teamForm.getByRole('button', { name: 'Create team' }).click();
  await page.locator('#teams-table tbody tr', { hasText: 'platform' }).waitFor();

  // A key in the team with a tokens-per-minute limit, through the form; its value is shown once.
  await openView(page, 'Keys', 'API keys');
  const keyForm = page.getByRole('form', { name: 'Create a key' });
  await keyForm.getByLabel('Name').fill('platform service');
  await keyForm.getByLabel('Tokens per minute').fill('20000');
  await keyForm.getByLabel('Team', { exact: true }).selectOption('platform');
  await keyForm.getByRole('button', { name: 'Create key' }).click();
  await page.getByRole('heading', { name: 'New key “platform service”' }).waitFor();
  const key = (await page.locator('#new-key-value').textContent())!;
  expect(key).to.match(/^sk-/);
  await page.getByRole('button', { name: 'Done' }).click();

  // The admin API reports the same limits and team for that key.
  const { data: keys } = await admin<{
    data: { id: string; name: string; tpm: number | null; team: string | null; rpm: number | null; budget: unknown }[];
  }>(target, '/keys');
  const record = keys.find((entry) => entry.name === 'platform service')!;
  expect(record).to.deep.include({ tpm: 20000, team: 'platform', rpm: null, budget: null });

  // The calls and the reading of their tokens per minute fall in one UTC minute.
  await withinOneWindow(25_000);
  for (let call = 0; call < 3; call += 1) {
    const answer = await chat(target, key, `Hello from the platform team, call ${call}`);
    expect(answer.status, answer.body.error?.message).to.equal(200);
  }
  type UsageRow = { key_id?: string; team?: string | null; requests: number; total_tokens: number; cost_usd: number };
  let keyUsage: UsageRow | undefined;
  await eventually(async () => {
    const { data } = await admin<{ data: UsageRow[] }>(target, '/usage?group_by=key');
    keyUsage = data.find((row) => row.key_id === record.id && row.requests === 3);
    return keyUsage !== undefined;
  }, 'the three calls in the usage read-back');
  if (!keyUsage) throw new Error('unreachable');
  expect(keyUsage.cost_usd).to.be.greaterThan(0.000001);
  const teamUsage = (await admin<{ data: UsageRow[] }>(target, '/usage?group_by=team')).data.find(
    (row) => row.team === 'platform',
  )!;
  expect(teamUsage).to.deep.include({ requests: 3, cost_usd: keyUsage.cost_usd });

  // Limits: the key's tokens per minute and the team's daily budget, each used against its limit, as the API counts
  // them.
  type Use = { kind: string; period: string; used: number | null; limit: number };
  const limits = await admin<{ keys: { id: string; use: Use[] }[]; teams: { name: string; use: Use[] }[] }>(
    target,
    '/limits',
  );
  const keyTpm = limits.keys.find((entry) => entry.id === record.id)!.use.find((use) => use.kind === 'tpm')!;
  const teamBudget = limits.teams
    .find((entry) => entry.name === 'platform')!
    .use.find((use) => use.kind === 'budget' && use.period === 'day')!;
  expect(keyTpm.used).to.equal(keyUsage.total_tokens);
  expect(teamBudget.used).to.be.closeTo(keyUsage.cost_usd, 1e-9);
  await openView(page, 'Limits', 'Limits');
  const keyLimits = await rowCells(page.locator('#limit-keys-table tbody tr', { hasText: 'platform service' }));
  expect(keyLimits['Team']).to.equal('platform');
  expect(keyLimits['Tokens per minute']).to.match(
    new RegExp(`^${keyUsage.total_tokens.toLocaleString('en-US')} / 20,000`),
  );
  const teamLimits = await rowCells(page.locator('#limit-teams-table tbody tr', { hasText: 'platform' }));
  expect(teamLimits['Keys']).to.equal('platform service');
  expect(teamLimits['Daily budget']).to.include('/ $5.00');
  expect(dollars(teamLimits['Daily budget']!)).to.be.closeTo(keyUsage.cost_usd, 1e-6);

  // Usage: the key's and the team's requests and cost.
  await openView(page, 'Usage', 'Usage');
  const keyRow = await rowCells(page.locator('#key-usage-table tbody tr', { hasText: 'platform service' }));
  expect(keyRow['Requests']).to.equal('3');
  expect(dollars(keyRow['Cost (USD)']!)).to.be.closeTo(keyUsage.cost_usd, 1e-6);
  const teamRow = await rowCells(page.locator('#team-usage-table tbody tr', { hasText: 'platform' }));
  expect(teamRow['Requests']).to.equal('3');
  expect(dollars(teamRow['Cost (USD)']!)).to.be.closeTo(keyUsage.cost_usd, 1e-6);

  // The team's budget lowered below what it spent today: the API has it at once, admission within the trust time.
  await openView(page, 'Teams', 'Teams');
  await page.getByRole('button', { name: 'Edit team platform' }).click();
  const dialog = page.getByRole('dialog', { name: 'Edit team platform' });
  await dialog.getByLabel('Daily budget (USD)').fill('0.000001');
  await dialog.getByRole('button', { name: 'Save' }).click();
  await dialog.waitFor({ state: 'hidden' });
  const saved = Date.now();
  expect((await admin<{ budget: unknown }>(target, '/teams/platform')).budget).to.deep.equal({ daily_usd: 0.000001 });
  for (;;) {
    const answer = await chat(target, key, 'Still within budget?');
    if (answer.status === 429) {
      expect(answer.body.error?.message).to.match(/budget/i);
      break;
    }
    expect(answer.status, answer.body.error?.message).to.equal(200);
    expect(Date.now() - saved, 'a request refused within the team trust time').to.be.below(TEAM_TRUST_MS + 2_000);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }

  // Deleting the team its key names: the 409's message, and nothing changes.
  await page.getByRole('button', { name: 'Delete team platform' }).click();
  await page.getByRole('dialog', { name: 'Delete team?' }).getByRole('button', { name: 'Delete platform' }).click();
  const alert = page.locator('#teams-error');
  await alert.filter({ hasText: 'revoke it first' }).waitFor();
  expect(await alert.textContent()).to.equal(
    "Could not delete team platform: Team 'platform' is named by 1 key that is not revoked; revoke it first",
  );
  expect(await admin<{ name: string; budget: unknown }>(target, '/teams/platform')).to.deep.include({
    name: 'platform',
    budget: { daily_usd: 0.000001 },
  });
  expect(
    (await admin<{ data: { id: string; team: string | null }[] }>(target, '/keys')).data.find(
      (entry) => entry.id === record.id,
    )!.team,
  ).to.equal('platform');
  expect(await page.locator('#teams-table tbody tr', { hasText: 'platform' }).count()).to.equal(1);

  // No accessibility violation on any view, keys and teams present.
  for (const [link, heading] of [
    ['Keys', 'API keys'],
    ['Teams', 'Teams'],
    ['Usage', 'Usage'],
    ['Limits', 'Limits'],
    ['Health', 'Health'],
  ] as const) {
    await openView(page, link, heading);
    expect(await accessibilityViolations(page), link).to.deep.equal([]);
  }
  // The refused delete (409) is the only error the browser saw.
  expect(browser.problems.filter((problem) => !problem.includes('status of 409'))).to.deep.equal([]);
}
