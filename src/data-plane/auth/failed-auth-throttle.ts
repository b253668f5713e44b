import { rateLimited, type GatewayError } from '../../core/gateway-errors.ts';

// Addresses tracked at most; past it, windows already over are dropped first, then everything.
const MAX_ADDRESSES = 100_000;

export interface FailedAuthThrottleOptions {
  /** What the 429 says was refused too often: `authentication attempts` by default. */
  readonly subject?: string;
  readonly windowMs?: number;
  readonly now?: () => number;
}

/**
 * Counts failed credentials of one kind (the gateway keeps one throttle for API keys and another for
 * the admin token) per client address in fixed one-minute windows, in this process's memory. Past
 * `perMinute` failures an address is answered 429 with `Retry-After` until its window ends, before
 * its credential is looked at; requests that authenticate are never counted.
 */
export class FailedAuthThrottle {
  private readonly windows = new Map<string, { failures: number; resetAt: number }>();
  private readonly subject: string;
  private readonly windowMs: number;
  private readonly now: () => number;
  // When the last window counted so far ends: past it, nothing is refused and the windows are dropped.
  private lastResetAt = 0;

  constructor(
    readonly perMinute: number,
    options: FailedAuthThrottleOptions = {},
  ) {
    this.subject = options.subject ?? 'authentication attempts';
    this.windowMs = options.windowMs ?? 60_000;
    this.now = options.now ?? Date.now;
  }

  /** True while no address has failures counted in a current window: callers may skip working out the address. */
  get idle(): boolean {
    if (this.windows.size === 0) return true;
    if (this.now() < this.lastResetAt) return false;
    this.windows.clear();
    return true;
  }

  /** The 429 for an address that used up its failures in this window, else undefined. */
  refusal(address: string): GatewayError | undefined {
    const window = this.windows.get(address);
    const now = this.now();
    if (!window || window.resetAt <= now || window.failures < this.perMinute) return undefined;
    const retryAfter = Math.max(1, Math.ceil((window.resetAt - now) / 1000));
    return rateLimited(`Too many failed ${this.subject} from this address: at most ${this.perMinute} per minute`, {
      'Retry-After': String(retryAfter),
    });
  }

  /** Counts one failure; gives back the 429 to answer instead when the address is over its limit. */
  failed(address: string): GatewayError | undefined {
    const now = this.now();
    let window = this.windows.get(address);
    if (!window || window.resetAt <= now) {
      if (this.windows.size >= MAX_ADDRESSES) this.prune(now);
      window = { failures: 0, resetAt: now + this.windowMs };
      this.windows.set(address, window);
      this.lastResetAt = window.resetAt;
    }
    window.failures += 1;
    return window.failures > this.perMinute ? this.refusal(address) : undefined;
  }

  private prune(now: number): void {
    for (const [address, window] of this.windows) if (window.resetAt <= now) this.windows.delete(address);
    if (this.windows.size >= MAX_ADDRESSES) this.windows.clear();
  }
}
