import type { AdapterContext, SseEvent, StreamMapping } from '../../plugins/plugin-contract.ts';
import type { BlockRewrite, FixupChain, SseBlock } from '../sse/sse-relay.ts';
import { matches } from './adapted-call.ts';

/** One event as SSE bytes, written whole. */
function encode(event: SseEvent): Buffer {
  let text = event.event === undefined ? '' : `event: ${event.event}\n`;
  if (event.id !== undefined) text += `id: ${event.id}\n`;
  for (const line of event.data.split('\n')) text += `data: ${line}\n`;
  return Buffer.from(`${text}\n`, 'utf8');
}

/** What the route writes itself once the vendor's terminal event came, given the first mapped event's data. */
export type Closing = (opening: string | undefined) => readonly SseEvent[];

/**
 * A vendor's stream mapped to the route's, where the relay applies stream fixups (so that the usage tap
 * still reads each vendor event as it came, before this, and response guardrails read what this makes):
 * each vendor event through the adapter's `map` (with this stream's state), the route's closing events
 * after the terminal one, then the plugin's own fixups of the route. Events are written whole, in the
 * route's shape; comments pass as they came; nothing after the terminal event goes out.
 */
export class MappedStream implements BlockRewrite {
  readonly empty = false;
  /** The vendor's terminal event came: the stream is complete. */
  complete = false;
  private readonly state: unknown;
  private opening: string | undefined;

  constructor(
    private readonly mapping: StreamMapping,
    private readonly context: AdapterContext,
    private readonly closing: Closing,
    private readonly fixups: FixupChain,
    /** Sees each event the client is sent, in the route's shape (before any guardrail's redaction). */
    private readonly seen: (event: SseEvent) => void,
  ) {
    this.state = mapping.createState?.(context);
  }

  blocks(block: SseBlock): readonly SseBlock[] {
    const event = block.event;
    if (event === undefined) return this.complete ? [] : [block];
    if (this.complete) return [];
    const terminal = matches(this.mapping.terminal, event);
    const result = this.mapping.map(event, this.state, this.context);
    const mapped: SseEvent[] = [];
    if (Array.isArray(result)) mapped.push(...(result as readonly SseEvent[]));
    else if (result !== undefined && result !== null) mapped.push(result as SseEvent);
    if (this.opening === undefined && mapped.length > 0) this.opening = mapped[0]!.data;
    if (terminal) {
      this.complete = true;
      mapped.push(...this.closing(this.opening));
    }
    const out: SseBlock[] = [];
    for (const each of mapped) {
      for (const fixed of this.fixups.empty ? [each] : (this.fixups.apply(each) ?? [each])) {
        this.seen(fixed);
        out.push({ raw: encode(fixed), event: fixed });
      }
    }
    return out;
  }
}
