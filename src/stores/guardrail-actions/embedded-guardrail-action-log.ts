import {
  actionEntryOf,
  GUARDRAIL_ACTIONS_KEPT,
  type GuardrailActionEntry,
  type GuardrailActionLog,
} from './guardrail-action-log.ts';

/** The newest guardrail actions of this process, in a ring (gone when the process ends). */
export class EmbeddedGuardrailActionLog implements GuardrailActionLog {
  private readonly ring: (GuardrailActionEntry | undefined)[];
  /** Where the next entry goes. */
  private next = 0;
  private size = 0;

  constructor(private readonly capacity = GUARDRAIL_ACTIONS_KEPT) {
    this.ring = new Array<GuardrailActionEntry | undefined>(capacity);
  }

  record(entry: GuardrailActionEntry): void {
    this.ring[this.next] = actionEntryOf(entry);
    this.next = (this.next + 1) % this.capacity;
    this.size = Math.min(this.size + 1, this.capacity);
  }

  async recent(limit: number): Promise<GuardrailActionEntry[]> {
    const count = Math.max(0, Math.min(limit, this.size));
    const entries: GuardrailActionEntry[] = [];
    for (let back = 1; back <= count; back += 1)
      entries.push(this.ring[(this.next - back + this.capacity) % this.capacity]!);
    return entries;
  }

  async close(): Promise<void> {}
}
