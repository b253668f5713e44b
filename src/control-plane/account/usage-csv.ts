import { groupField, type UsageRow } from '../../usage/usage-store.ts';
import type { UsageRequest } from '../usage-routes.ts';
import { formatCost } from '../../usage/pricing.ts';
import { dayOf } from '../../usage/usage-record.ts';

const COLUMNS = [
  'requests',
  'input_tokens',
  'output_tokens',
  'cached_tokens',
  'total_tokens',
  'charged_tokens',
  'cost_usd',
  'cache_hits',
  'saved_usd',
] as const;

/** One CSV field (RFC 4180): quoted when it holds a comma, quote or line break; formula starts defused. */
function field(value: string | number): string {
  let text = String(value);
  if (typeof value === 'string' && /^[=+\-@\t\r]/.test(text)) text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/**
 * Usage rows as CSV: a header line (`model`, `day`, `key_id` or `team`, then the counters), CRLF line ends; keys in no
 * team have an empty `team`.
 */
export function usageCsv(rows: readonly UsageRow[], groupBy: UsageRequest['groupBy']): string {
  const first = groupField(groupBy);
  const lines = [[first, ...COLUMNS].join(',')];
  for (const row of rows) {
    lines.push(
      [
        field(row[first] ?? ''),
        ...COLUMNS.map((column) =>
          column === 'cost_usd' || column === 'saved_usd' ? formatCost(row[column]) : field(row[column]),
        ),
      ].join(','),
    );
  }
  return `${lines.join('\r\n')}\r\n`;
}

/** `usage-by-model-2026-11-01-to-2026-11-23.csv`, naming the key when the query is for one. */
export function usageCsvName(query: UsageRequest): string {
  const range = `${query.from ? dayOf(query.from) : 'start'}-to-${query.to ? dayOf(query.to) : 'now'}`;
  const key = query.keyId ? `-${query.keyId.replace(/[^A-Za-z0-9_-]/g, '')}` : '';
  return `usage-by-${query.groupBy}${key}-${range}.csv`;
}
