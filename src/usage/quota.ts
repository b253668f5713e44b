import type { Logger } from 'pino';
import { quotaExceeded } from '../core/gateway-errors.ts';
import type { UsageStore } from './usage-store.ts';

/** A key's token quotas, in charged tokens (see `charge` in `pricing.ts`) per UTC day and per UTC month. */
export interface TokenQuota {
  readonly daily?: number;
  readonly monthly?: number;
}

/**
 * Checked before dispatch: throws the 429 `quotaExceeded` error (detail
 * `Quota exceeded: <used> of <limit> charged tokens used today (UTC)`, or `this month (UTC)`) when the
 * key has already used its daily or monthly quota. A request is let through while anything is left,
 * so the last one may go over; its tokens count towards the same period.
 *
 * The check reads the stored totals. When the store cannot be read (Redis away), the request is let
 * through and a warning is logged: an outage of the usage store does not stop the gateway, and the
 * usage of such requests is still recorded once the store is back.
 */
export async function checkQuota(store: UsageStore, keyId: string, quota: TokenQuota | undefined, now: Date = new Date(), logger?: Logger): Promise<void> {
  const limits: [number | undefined, 'day' | 'month', string][] = [
    [quota?.daily, 'day', 'today (UTC)'],
    [quota?.monthly, 'month', 'this month (UTC)'],
  ];
  for (const [limit, period, when] of limits) {
    if (limit === undefined) continue;
    let used: number;
    try {
      used = await store.totalsFor(keyId, period, now);
    } catch (error) {
      logger?.warn({ err: error, keyId, period }, 'usage store unreadable: quota not checked for this request');
      continue;
    }
    if (used >= limit) throw quotaExceeded(`${used} of ${limit} charged tokens used ${when}`);
  }
}
