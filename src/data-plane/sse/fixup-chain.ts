import type { SseEvent, StreamFixupDeclaration } from '../../plugins/plugin-contract.ts';

/**
 * The stream fixups of one stream, each with its own state (made by its `createState` as the stream
 * starts). Applies them in declaration order; each event a fixup puts out goes through the next ones.
 */
export class FixupChain {
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
}
