import type { ServerResponse } from 'node:http';
import { awaitClientRead } from '../http/client-write-timeout.ts';
import type { SseEvent, StreamFixup } from '../../plugins/plugin-contract.ts';
import { isByteReadable, readableBatches } from './readable-batches.ts';
import { replaceBlockData, SseSplitter, type SseBlock } from './sse-splitter.ts';

export interface RelayOptions {
  /** Applied in order to each event; an event no fixup changes goes out as its original bytes. */
  readonly fixups: readonly StreamFixup[];
  /** Sees every event as it passes (the usage tap); must not throw. */
  readonly onEvent: (event: SseEvent) => void;
  /** Largest single event relayed; a larger one stops the relay (`eventTooLarge`). Default: no cap. */
  readonly maxEventBytes?: number;
  /** Applied to the bytes of whole events before they are written (credential redaction). */
  readonly rewrite?: (bytes: Buffer) => Buffer;
  /**
   * Longest the client may leave the response's buffer full (a write refused, no `drain`) before the
   * relay gives up on it (`clientStalled`). Default: no limit.
   */
  readonly clientWriteTimeoutMs?: number;
}

export interface RelayOutcome {
  /** The upstream stream ended normally and every byte reached the client's socket buffer. */
  readonly completed: boolean;
  /** The client went away before the end. */
  readonly clientClosed: boolean;
  /**
   * The upstream sent an event larger than `maxEventBytes`: nothing of it was written, the upstream
   * body was dropped, and the response is left open for the caller to end with an in-band error.
   */
  readonly eventTooLarge: boolean;
  /**
   * The client read nothing for `clientWriteTimeoutMs`: its response was destroyed (the connection
   * closed) and the upstream body dropped.
   */
  readonly clientStalled: boolean;
}

/**
 * Relays an upstream SSE body to the client. The relay stays dumb: bytes go out as they came, and the
 * splitter parses them only for the usage tap and the fixups. Whole events are written the moment
 * they are complete (a client cannot use part of one), so an event can still be refused or rewritten
 * before any of its bytes left, and work stays linear in bytes whatever the chunking.
 */
export async function relaySse(upstream: AsyncIterable<Uint8Array>, res: ServerResponse, options: RelayOptions): Promise<RelayOutcome> {
  const splitter = new SseSplitter(options.maxEventBytes);
  const fixing = options.fixups.length > 0;
  const rewrite = options.rewrite ?? ((bytes: Buffer) => bytes);
  let clientClosed = false;
  let clientStalled = false;
  const markClosed = () => {
    if (!res.writableFinished) clientClosed = true;
  };
  res.once('close', markClosed);
  const write = async (bytes: Buffer) => {
    if (bytes.length === 0 || clientClosed || clientStalled) return;
    if (!res.write(rewrite(bytes)) && (await awaitClientRead(res, 'drain', options.clientWriteTimeoutMs)) === 'stalled') clientStalled = true;
  };
  try {
    for await (const chunk of isByteReadable(upstream) ? readableBatches(upstream) : upstream) {
      const blocks = splitter.push(chunk);
      for (const block of blocks) if (block.event) options.onEvent(block.event);
      if (blocks.length > 0) await write(fixing ? Buffer.concat(blocks.map((block) => applyFixups(block, options.fixups))) : contiguous(blocks));
      if (splitter.oversized) return { completed: false, clientClosed, eventTooLarge: true, clientStalled };
      if (clientClosed || clientStalled) break;
    }
    // An event cut off by the end of the stream goes out as it came (the client discards it too).
    await write(splitter.rest());
    return { completed: !clientClosed && !clientStalled, clientClosed: clientClosed && !clientStalled, eventTooLarge: false, clientStalled };
  } catch (error) {
    if (clientClosed || clientStalled) return { completed: false, clientClosed: clientClosed && !clientStalled, eventTooLarge: false, clientStalled };
    throw error;
  } finally {
    res.off('close', markClosed);
  }
}

/** The bytes of consecutive blocks of one push, which lie next to each other in the splitter's buffer. */
function contiguous(blocks: readonly SseBlock[]): Buffer {
  if (blocks.length === 1) return blocks[0]!.raw;
  const first = blocks[0]!.raw;
  const last = blocks[blocks.length - 1]!.raw;
  return Buffer.from(first.buffer, first.byteOffset, last.byteOffset + last.length - first.byteOffset);
}

function applyFixups(block: SseBlock, fixups: readonly StreamFixup[]): Buffer {
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
