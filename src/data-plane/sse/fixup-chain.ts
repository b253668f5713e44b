import type { SseEvent, StreamFixupDeclaration } from '../../plugins/plugin-contract.ts';
import { replaceBlockData, type SseBlock } from './sse-splitter.ts';

/**
 * What stands between an upstream's events and the client's: each whole block in, the blocks to send
 * out (the block itself to send its bytes unchanged). A plugin's stream fixups, or a route adapter's
 * mapping of a vendor's stream.
 */
export interface BlockRewrite {
  /** Nothing to rewrite: the relay skips it. */
  readonly empty: boolean;
  blocks(block: SseBlock): readonly SseBlock[];
}

/**
 * The stream fixups of one stream, each with its own state (made by its `createState` as the stream
 * starts). Applies them in declaration order; each event a fixup puts out goes through the next ones.
 */
export class FixupChain implements BlockRewrite {
  private readonly links: readonly { readonly fixup: StreamFixupDeclaration['fixup']; readonly state: unknown }[];

  constructor(declarations: readonly StreamFixupDeclaration[]) {
    this.links = declarations.map((declaration) => ({ fixup: declaration.fixup, state: declaration.createState?.() }));
  }

  get empty(): boolean {
    return this.links.length === 0;
  }

  /** The events to send for one upstream event, or `undefined` when it goes out unchanged. */
  apply(event: SseEvent): readonly SseEvent[] | undefined {
    let events: readonly SseEvent[] = [event];
    let changed = false;
    for (const { fixup, state } of this.links) {
      const next: SseEvent[] = [];
      for (const current of events) {
        const result = fixup(current, state);
        if (result === undefined || result === current) next.push(current);
        else {
          changed = true;
          if (result === null) continue;
          if (Array.isArray(result)) next.push(...(result as readonly SseEvent[]));
          else next.push(result as SseEvent);
        }
      }
      events = next;
    }
    return changed ? events : undefined;
  }

  /**
   * One block as its fixups leave it: itself when none changed its event (its bytes as they came), else
   * a block per event put out. The first keeps the block's other lines and line endings; any further
   * ones are written out whole, with the stream's line ending.
   */
  blocks(block: SseBlock): readonly SseBlock[] {
    if (!block.event) return [block];
    const events = this.apply(block.event);
    if (events === undefined) return [block];
    if (events.length === 0) return [];
    const [first, ...rest] = events;
    const newline = /\r\n|\r|\n/.exec(block.raw.toString('latin1'))?.[0] ?? '\n';
    return [
      { raw: replaceBlockData(block.raw, first!.data), event: first },
      ...rest.map((event) => ({ raw: Buffer.from(encodeEvent(event, newline), 'utf8'), event })),
    ];
  }
}

/** One event as SSE text, with the stream's line ending. */
function encodeEvent(event: SseEvent, newline: string): string {
  const lines = [
    ...(event.event === undefined ? [] : [`event: ${event.event}`]),
    ...(event.id === undefined ? [] : [`id: ${event.id}`]),
    ...event.data.split('\n').map((part) => `data: ${part}`),
  ];
  return lines.join(newline) + newline + newline;
}
