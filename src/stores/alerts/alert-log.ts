import type { LimitScope } from '../../core/limits.ts';

/** How many webhook deliveries the log keeps: the newest, older ones dropped as new ones come. */
export const ALERT_DELIVERIES_KEPT = 1000;

/** One firing of a limit alert as kept and shown (`GET /admin/alerts`) and as its webhook's body says it. */
export interface AlertFiringEntry {
  /** The firing's id (`alrt_…`). */
  readonly id: string;
  readonly scope: LimitScope;
  /** The key id, the team name or the group name. */
  readonly owner: string;
  /** The team the owner is or belongs to (null for none): who may read it. */
  readonly team: string | null;
  readonly kind: 'quota' | 'budget';
  readonly period: 'day' | 'month';
  /** The percent reached. */
  readonly threshold: number;
  /** Use and limit when it fired, in `unit` (USD for budgets, charged tokens for quotas). */
  readonly used: number;
  readonly limit: number;
  readonly unit: 'usd' | 'tokens';
  /** ISO date-times: when the window ends, and when the alert fired. */
  readonly window_end: string;
  readonly fired_at: string;
}

/** One attempt to deliver a firing to the webhook: never the URL, the secret or the receiver's answer. */
export interface AlertDeliveryEntry {
  /** The delivery's id (`x-gateway-delivery`, the same on each attempt). */
  readonly delivery: string;
  /** The firing's id. */
  readonly alert: string;
  /** The firing's owner and its team (who may read the entry). */
  readonly owner: string;
  readonly team: string | null;
  /** 1 for the first attempt. */
  readonly attempt: number;
  /** ISO date-time the attempt ended. */
  readonly at: string;
  /** `delivered`: answered 2xx; `retrying`: failed, another attempt follows; `failed`: failed, the last. */
  readonly outcome: 'delivered' | 'retrying' | 'failed';
  /** The receiver's status, when it answered. */
  readonly status: number | null;
  /** Why it failed without a status (`connection refused`, `timed out`). */
  readonly error: string | null;
  /** When the next attempt goes (ISO), while retrying. */
  readonly next_attempt_at: string | null;
}

/**
 * Which thresholds fired, each alert's last firing and the webhook delivery log: in process (one gateway),
 * or in Redis (shared by every instance, so a threshold fires once whichever instance saw it reached).
 */
export interface AlertLog {
  /**
   * Takes the one firing of `claim` (a threshold of a counter's window) until `expiresAt` (epoch ms): true
   * for the first taker across instances, false when taken before; rejects when the store cannot answer.
   */
  claim(claim: string, expiresAt: number): Promise<boolean>;
  /** Keeps a firing as its alert's last (an alert: owner, kind, period and threshold). Never throws or waits. */
  fired(entry: AlertFiringEntry): void;
  /** Each alert's last firing, newest first; rejects when the store cannot be read. */
  lastFirings(): Promise<AlertFiringEntry[]>;
  /** Keeps one delivery attempt. Never throws or waits. */
  delivered(entry: AlertDeliveryEntry): void;
  /** The newest `limit` delivery attempts (at most {@link ALERT_DELIVERIES_KEPT}), newest first. */
  deliveries(limit: number): Promise<AlertDeliveryEntry[]>;
  close(): Promise<void>;
}

/** What names an alert among the last firings: its owner, kind, period and threshold. */
export const alertKeyOf = (
  entry: Pick<AlertFiringEntry, 'scope' | 'owner' | 'kind' | 'period' | 'threshold'>,
): string => `${entry.scope}:${entry.owner}:${entry.kind}:${entry.period}:${entry.threshold}`;

/** Newest first by `fired_at`. */
export const newestFiredFirst = (a: AlertFiringEntry, b: AlertFiringEntry): number =>
  a.fired_at < b.fired_at ? 1 : a.fired_at > b.fired_at ? -1 : 0;
