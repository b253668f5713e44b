import { rateLimited, type GatewayError } from '../errors/gateway-errors.ts';

// Addresses tracked at most; past it, windows already over are dropped first, then everything.
const MAX_ADDRESSES = 100_000;

/**
 * Counts failed credentials (unknown or malformed API keys, wrong admin tokens) per client address in
 * fixed one-minute windows, in this process's memory. Past `perMinute` failures an address is
 * answered 429 with `Retry-After` until its window ends; requests that authenticate are never counted
 * nor slowed.
 */
export class FailedAuthThrottle {
  private readonly windows = new Map<string, { failures: number; resetAt: number }>();

  constructor(
    readonly perMinute: number,
    private readonly windowMs = 60_000,
    private readonly now: () => number = Date.now,
  ) {}

  /** The 429 for an address that used up its failures in this window, else undefined. */
  refusal(address: string): GatewayError | undefined {
    const window = this.windows.get(address);
    const now = this.now();
    if (!window || window.resetAt <= now || window.failures < this.perMinute) return undefined;
    const retryAfter = Math.max(1, Math.ceil((window.resetAt - now) / 1000));
    return rateLimited(`Too many failed authentication attempts from this address: at most ${this.perMinute} per minute`, {
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
    }
    window.failures += 1;
    return window.failures > this.perMinute ? this.refusal(address) : undefined;
  }

  private prune(now: number): void {
    for (const [address, window] of this.windows) if (window.resetAt <= now) this.windows.delete(address);
    if (this.windows.size >= MAX_ADDRESSES) this.windows.clear();
  }
}
