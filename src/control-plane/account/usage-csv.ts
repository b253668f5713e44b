import { groupFields, USAGE_COUNT_FIELDS, type UsageRow, formatCost, dayOf } from '../../usage/usage-accounting.ts';
import type { UsageRequest } from '../usage-routes.ts';

/** One CSV field (RFC 4180): quoted when it holds a comma, quote or line break; formula starts defused. */
function field(value: string | number): string {
  let text = String(value);
  if (typeof value === 'string' && /^[=+\-@\t\r]/.test(text)) text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/**
 * Usage rows as CSV: a header line (`model`, `day`, `key_id`, `team`, or `key_id,end_user`, then the
 * counters), CRLF line ends; keys in no team have an empty `team`, requests naming no end user an empty `end_user`.
 */
export function usageCsv(rows: readonly UsageRow[], groupBy: UsageRequest['groupBy']): string {
  const first = groupFields(groupBy);
  const lines = [[...first, ...USAGE_COUNT_FIELDS].join(',')];
  for (const row of rows) {
    const counts = USAGE_COUNT_FIELDS.map((column) =>
      column === 'cost_usd' || column === 'saved_usd' ? formatCost(row[column]) : field(row[column]),
    );
    lines.push([...first.map((name) => field(row[name] ?? '')), ...counts].join(','));
  }
  return `${lines.join('\r\n')}\r\n`;
}

/** `usage-by-model-2026-11-01-to-2026-11-23.csv`, naming the key when the query is for one. */
export function usageCsvName(query: UsageRequest): string {
  const range = `${query.from ? dayOf(query.from) : 'start'}-to-${query.to ? dayOf(query.to) : 'now'}`;
  const key = query.keyId ? `-${query.keyId.replace(/[^A-Za-z0-9_-]/g, '')}` : '';
  return `usage-by-${query.groupBy}${key}-${range}.csv`;
}
