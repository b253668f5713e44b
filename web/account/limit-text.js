// How the keys and teams tables show their limits: one list per key or team, each limit set on a line of its own.
import { element, formatNumber, formatUsd } from './dom.js';

const DASH = '—';

/** `100,000 / day, 2,000,000 / month` */
export function quotaText(quota) {
  const parts = [];
  if (quota?.daily) parts.push(`${formatNumber(quota.daily)} / day`);
  if (quota?.monthly) parts.push(`${formatNumber(quota.monthly)} / month`);
  return parts.join(', ') || DASH;
}

/** `$5.00 / day, $50.00 / month` */
export function budgetText(budget) {
  const parts = [];
  if (budget?.daily_usd) parts.push(`${formatUsd(budget.daily_usd)} / day`);
  if (budget?.monthly_usd) parts.push(`${formatUsd(budget.monthly_usd)} / month`);
  return parts.join(', ') || DASH;
}

/** The guardrails named, `none` for an empty list, `default` when unset (the team's or every configured one). */
export function guardrailsText(guardrails) {
  if (!guardrails) return 'default';
  return guardrails.length ? guardrails.join(', ') : 'none';
}

/** The percents at which alerts fire (`50%, 80%, 100%`), `none` for an empty list, `default` when unset. */
export function alertsText(alerts) {
  if (!alerts) return 'default';
  return alerts.length ? alerts.map((percent) => `${percent}%`).join(', ') : 'none';
}

/** The limits each end user gets: `10 requests / minute, 100,000 tokens / day, $1.00 / day`. */
export function endUserText(endUser) {
  const parts = [];
  if (endUser?.rpm) parts.push(`${formatNumber(endUser.rpm)} requests / minute`);
  if (endUser?.tpm) parts.push(`${formatNumber(endUser.tpm)} tokens / minute`);
  if (endUser?.quota?.daily) parts.push(`${formatNumber(endUser.quota.daily)} tokens / day`);
  if (endUser?.quota?.monthly) parts.push(`${formatNumber(endUser.quota.monthly)} tokens / month`);
  if (endUser?.budget) parts.push(budgetText(endUser.budget));
  return parts.join(', ') || DASH;
}

/**
 * Every limit of a key or team (as GET /keys or /teams shows it) as a list, one line per limit set:
 * `Requests per minute: 60`, `Tokens per minute: 20,000`, `Token quota: 100,000 / day`, `Budget: $5.00 / day`,
 * `Concurrency: 4`, then its budget group, alert thresholds and end users' limits when set. A key without an rpm
 * of its own has the gateway's default, said on its line; a team without any limit shows `none`.
 */
export function limitsList(view, { kind }) {
  const lines = [];
  if (view.rpm !== null && view.rpm !== undefined) lines.push(`Requests per minute: ${formatNumber(view.rpm)}`);
  else if (kind === 'key') lines.push('Requests per minute: default');
  if (view.tpm) lines.push(`Tokens per minute: ${formatNumber(view.tpm)}`);
  if (view.quota) lines.push(`Token quota: ${quotaText(view.quota)}`);
  if (view.budget) lines.push(`Budget: ${budgetText(view.budget)}`);
  if (view.concurrency) lines.push(`Concurrency: ${formatNumber(view.concurrency)}`);
  if (view.group) lines.push(`Group: ${view.group}`);
  if (view.alerts) lines.push(`Alerts: ${alertsText(view.alerts)}`);
  if (view.end_user) lines.push(`Each end user: ${endUserText(view.end_user)}`);
  if (lines.length === 0) return 'none';
  const list = element('ul', { className: 'limit-list' });
  list.append(...lines.map((line) => element('li', { text: line })));
  return list;
}
