import { once } from 'node:events';
import type { ServerResponse } from 'node:http';
import type { SseEvent, StreamFixup } from '../plugins/plugin-contract.ts';
import { replaceBlockData, SseSplitter, type SseBlock } from './sse-splitter.ts';

export interface RelayOptions {
  /** Applied in order to each event; with none, upstream chunks are written the moment they arrive. */
  readonly fixups: readonly StreamFixup[];
  /** Sees every event as it passes (the usage tap); must not throw. */
  readonly onEvent: (event: SseEvent) => void;
}

export interface RelayOutcome {
  /** The upstream stream ended normally and every byte reached the client's socket buffer. */
  readonly completed: boolean;
  /** The client went away before the end. */
  readonly clientClosed: boolean;
}

/**
 * Relays an upstream SSE body to the client. The relay stays dumb: bytes go out as they came, and the
 * splitter parses a copy only for the usage tap and the fixups. Where a fixup applies, whole events
 * are held until complete, and each event is forwarded as its original bytes unless a fixup changed it.
 */
export async function relaySse(upstream: AsyncIterable<Uint8Array>, res: ServerResponse, options: RelayOptions): Promise<RelayOutcome> {
  const splitter = new SseSplitter();
  const fixing = options.fixups.length > 0;
  let clientClosed = false;
  const markClosed = () => {
    if (!res.writableFinished) clientClosed = true;
  };
  res.once('close', markClosed);
  const write = async (bytes: Uint8Array) => {
    if (bytes.length === 0 || clientClosed) return;
    if (!res.write(bytes)) {
      await Promise.race([once(res, 'drain'), once(res, 'close')]);
    }
  };
  try {
    for await (const chunk of upstream) {
      if (!fixing) await write(chunk);
      const blocks = splitter.push(chunk);
      for (const block of blocks) {
        if (block.event) options.onEvent(block.event);
        if (fixing) await write(applyFixups(block, options.fixups));
      }
      if (clientClosed) break;
    }
    if (fixing) await write(splitter.rest());
    return { completed: !clientClosed, clientClosed };
  } catch (error) {
    if (clientClosed) return { completed: false, clientClosed };
    throw error;
  } finally {
    res.off('close', markClosed);
  }
}

function applyFixups(block: SseBlock, fixups: readonly StreamFixup[]): Uint8Array {
  if (!block.event) return block.raw;
  let event: SseEvent = block.event;
  let changed = false;
  for (const fixup of fixups) {
    const result = fixup(event);
    if (result === null) return Buffer.alloc(0);
    if (result !== undefined && result !== event) {
      event = result;
      changed = true;
    }
  }
  return changed ? replaceBlockData(block.raw, event.data) : block.raw;
}
