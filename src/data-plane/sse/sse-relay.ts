import type { ServerResponse } from 'node:http';
import { awaitClientRead } from '../http/client-write-timeout.ts';
import type { SseEvent } from '../../plugins/plugin-contract.ts';
import type { FixupChain } from './fixup-chain.ts';
import { isByteReadable, readableBatches } from './readable-batches.ts';
import { replaceBlockData, SseSplitter, type SseBlock } from './sse-splitter.ts';

export interface RelayOptions {
  /** This stream's fixups; an event no fixup changes goes out as its original bytes. */
  readonly fixups?: FixupChain;
  /**
   * Sees every event as it passes (the usage tap). A throw (a plugin's usage extractor) ends the relay
   * like a fixup's: what was fixed before it is written, then the error propagates.
   */
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
  const fixups = options.fixups?.empty === false ? options.fixups : undefined;
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
      if (blocks.length > 0) await relayBlocks(blocks, options.onEvent, fixups, write);
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

/**
 * Taps and writes one push's blocks. A hook that throws (a fixup, the usage tap) stops them: the blocks
 * before it are still written, so the client has every event that was whole before the fault.
 */
async function relayBlocks(blocks: readonly SseBlock[], onEvent: (event: SseEvent) => void, fixups: FixupChain | undefined, write: (bytes: Buffer) => Promise<void>): Promise<void> {
  const out: Buffer[] = [];
  let done = 0;
  try {
    for (const block of blocks) {
      if (block.event) onEvent(block.event);
      if (fixups) out.push(applyFixups(block, fixups));
      done += 1;
    }
  } catch (error) {
    if (done > 0) await write(fixups ? Buffer.concat(out) : contiguous(blocks.slice(0, done)));
    throw error;
  }
  await write(fixups ? Buffer.concat(out) : contiguous(blocks));
}

function applyFixups(block: SseBlock, fixups: FixupChain): Buffer {
  if (!block.event) return block.raw;
  const events = fixups.apply(block.event);
  if (events === undefined) return block.raw;
  if (events.length === 0) return Buffer.alloc(0);
  // The first event keeps the block's other lines and line endings; any further ones are written out whole.
  const [first, ...rest] = events;
  const newline = /\r\n|\r|\n/.exec(block.raw.toString('latin1'))?.[0] ?? '\n';
  return Buffer.concat([replaceBlockData(block.raw, first!.data), ...rest.map((event) => Buffer.from(encodeEvent(event, newline), 'utf8'))]);
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
