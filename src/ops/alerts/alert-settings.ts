/** The gateway's limit alerts: the default thresholds, and where their webhooks go. */
export interface AlertSettings {
  /** Percents of a money budget or token quota at which an owner without its own `alerts` is alerted. */
  readonly thresholds: readonly number[];
  /** The signed webhook each firing is sent to; none when `GATEWAY_ALERT_WEBHOOK_URL` is unset. */
  readonly webhook?: WebhookSettings;
}

export interface WebhookSettings {
  readonly url: string;
  /** The HMAC-SHA256 key of `x-gateway-signature` (never logged or shown). */
  readonly secret: string;
  /** Attempts per delivery, the first included. */
  readonly attempts: number;
  /** The wait before the first retry; each next one waits twice as long, up to {@link maxBackoffMs}. */
  readonly backoffMs: number;
  readonly maxBackoffMs: number;
  /** How long one attempt may take to be answered before it counts as failed. */
  readonly timeoutMs: number;
}

export const DEFAULT_ALERT_THRESHOLDS: readonly number[] = [50, 80, 100];

export const DEFAULT_WEBHOOK = { attempts: 5, backoffMs: 1000, maxBackoffMs: 60_000, timeoutMs: 5000 } as const;
