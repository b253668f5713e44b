// How the keys and teams tables show a limit: a figure, or a dash when there is none.
import { formatNumber, formatUsd } from './dom.js';

const DASH = '—';

export const countText = (value) => (value === null || value === undefined ? DASH : formatNumber(value));

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
