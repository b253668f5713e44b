import {
  ALERT_DELIVERIES_KEPT,
  alertKeyOf,
  newestFiredFirst,
  type AlertDeliveryEntry,
  type AlertFiringEntry,
  type AlertLog,
} from './alert-log.ts';

// Claims are dropped once this many are held (the oldest windows' first): far more than owners times thresholds.
const CLAIMS_KEPT = 100_000;

/** The alerts of one gateway process (embedded store): claims, last firings and deliveries in memory. */
export class EmbeddedAlertLog implements AlertLog {
  private readonly claims = new Map<string, number>();
  private readonly last = new Map<string, AlertFiringEntry>();
  private readonly ring: AlertDeliveryEntry[] = [];

  constructor(
    private readonly capacity = ALERT_DELIVERIES_KEPT,
    private readonly now: () => number = Date.now,
  ) {}

  async claim(claim: string, expiresAt: number): Promise<boolean> {
    const held = this.claims.get(claim);
    if (held !== undefined && held > this.now()) return false;
    if (this.claims.size >= CLAIMS_KEPT) this.dropExpired();
    this.claims.set(claim, expiresAt);
    return true;
  }

  fired(entry: AlertFiringEntry): void {
    this.last.set(alertKeyOf(entry), entry);
  }

  async lastFirings(): Promise<AlertFiringEntry[]> {
    return [...this.last.values()].sort(newestFiredFirst);
  }

  delivered(entry: AlertDeliveryEntry): void {
    this.ring.unshift(entry);
    if (this.ring.length > this.capacity) this.ring.length = this.capacity;
  }

  async deliveries(limit: number): Promise<AlertDeliveryEntry[]> {
    return this.ring.slice(0, Math.max(0, limit));
  }

  async close(): Promise<void> {}

  private dropExpired(): void {
    const now = this.now();
    for (const [claim, until] of this.claims) if (until <= now) this.claims.delete(claim);
    // Still full: the first taken go (a map keeps insertion order).
    for (const claim of this.claims.keys()) {
      if (this.claims.size < CLAIMS_KEPT) break;
      this.claims.delete(claim);
    }
  }
}
