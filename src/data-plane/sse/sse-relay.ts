import { awaitClientRead } from '../http/client-write-timeout.ts';
import type { ClientResponse } from '../http/client-response.ts';
import type { SseEvent } from '../../plugins/plugin-contract.ts';
import type { BlockRewrite } from './fixup-chain.ts';
import { iterableBody, type UpstreamBody } from './upstream-body.ts';
import { SseSplitter, type SseBlock } from './sse-splitter.ts';

/** The headers every relayed stream goes out with, beside its content type: no caching, no proxy buffering. */
export const STREAM_HEADERS = { 'cache-control': 'no-cache', 'x-accel-buffering': 'no' } as const;

export interface RelayOptions {
  /** This stream's fixups (or an adapter's mapping); an event no fixup changes goes out as its original bytes. */
  readonly fixups?: BlockRewrite;
  /**
   * Sees every event as it passes (the usage tap). A throw (a plugin's usage extractor) ends the relay
   * like a fixup's: what was fixed before it is written, the rest of the body is dropped, and the relay
   * fails with that error (with nothing written when it came before the head, see `head`).
   */
  readonly onEvent: (event: SseEvent) => void;
  /** Largest single event relayed; a larger one stops the relay (`eventTooLarge`). Default: no cap. */
  readonly maxEventBytes?: number;
  /**
   * Applied to the bytes of whole events before they are written (credential redaction); may hand back
   * less (events it holds back) or more (held events it releases).
   */
  readonly rewrite?: (bytes: Buffer) => Buffer;
  /**
   * What `rewrite` still holds back, written once when the relay stops with the response still open
   * (the upstream ended, broke off or sent an event over the cap, or a hook threw): before the end of
   * the response or the caller's in-band error.
   */
  readonly flush?: () => Buffer;
  /**
   * Longest the client may leave the response's buffer full (a write refused, no `drain`) before the
   * relay gives up on it (`clientStalled`). Default: no limit.
   */
  readonly clientWriteTimeoutMs?: number;
  /**
   * Ends the response when the upstream stream ended cleanly, in the same tick as the last write, so
   * that the last bytes and the end of the response leave in one socket write. The caller then only
   * waits for the client to take them. Default: the response is left open.
   */
  readonly endOnComplete?: boolean;
  /**
   * Writes the response's status and headers: called once, just before the first bytes are written,
   * and at the latest once the chunks the body hands on as the relay attaches (a look-ahead's held
   * opening events) are taken, or before the relay ends the response or stops for the caller's
   * in-band error. A hook that throws before it was called fails the relay with nothing written, not
   * even what `rewrite` holds back, so that the caller can still answer with a status of its own.
   * Default: none (the caller wrote the head before relaying).
   */
  readonly head?: () => void;
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
 *
 * The body pushes its chunks (an {@link UpstreamBody}: on undici's dispatch, straight from the socket
 * read); a write the client's buffer refuses pauses it until `drain`. The client leaving, stalling or
 * an event over the cap drops the rest of the body.
 */
export function relaySse(
  upstream: AsyncIterable<Uint8Array> | UpstreamBody,
  res: ClientResponse,
  options: RelayOptions,
): Promise<RelayOutcome> {
  const body = isUpstreamBody(upstream) ? upstream : iterableBody(upstream);
  const splitter = new SseSplitter(options.maxEventBytes);
  const { onEvent, clientWriteTimeoutMs } = options;
  const fixups = options.fixups?.empty === false ? options.fixups : undefined;
  const rewrite = options.rewrite;
  const writeHead = options.head;
  return new Promise<RelayOutcome>((resolve, reject) => {
    let headed = writeHead === undefined;
    const head = () => {
      if (headed) return;
      headed = true;
      writeHead!();
    };
    let clientClosed = false;
    let clientStalled = false;
    let settled = false;
    /** Waiting for the client to drain; what to conclude once it has, if the body is done meanwhile. */
    let draining = false;
    let deferred: (() => void) | undefined;
    /** The outcome is decided (and may wait on the client's drain): nothing the body says counts any more. */
    let concluded = false;
    const settle = (outcome: RelayOutcome | { error: unknown }) => {
      if (settled) return;
      settled = true;
      res.off('close', onClose);
      if ('error' in outcome) reject(outcome.error);
      else resolve(outcome);
    };
    const stopped = () =>
      settle({ completed: false, clientClosed: clientClosed && !clientStalled, eventTooLarge: false, clientStalled });
    const onClose = () => {
      if (res.writableFinished || settled) return;
      clientClosed = true;
      stopped();
      body.abort();
    };
    res.once('close', onClose);
    /** Writes `bytes` (rewritten), and what the rewrite held back when `last`. */
    const write = (bytes: Buffer, last = false) => {
      if (settled) return;
      let out = rewrite && bytes.length > 0 ? rewrite(bytes) : bytes;
      const held = last && options.flush ? options.flush() : undefined;
      if (held && held.length > 0) out = out.length === 0 ? held : Buffer.concat([out, held]);
      if (out.length === 0) return;
      if (!headed) head();
      if (res.write(out)) return;
      draining = true;
      body.pause();
      void awaitClientRead(res, 'drain', clientWriteTimeoutMs).then((read) => {
        draining = false;
        if (settled) return;
        if (read === 'taken') {
          const then = deferred;
          deferred = undefined;
          if (then) then();
          else body.resume();
          return;
        }
        if (read === 'stalled') clientStalled = true;
        else clientClosed = true;
        stopped();
        body.abort();
      });
    };
    /** Runs `conclude` now, or once the client took what was written. */
    const whenDrained = (conclude: () => void) => {
      if (concluded) return;
      concluded = true;
      if (draining) deferred = conclude;
      else conclude();
    };
    /** A plugin's hook failed: the rest of the body is not wanted. */
    const faulted = (fault: { error: unknown }) => {
      // Nothing reached the client yet: the caller answers with a status of its own, and what `rewrite`
      // holds is dropped.
      if (!headed) {
        settle(fault);
        body.abort();
        return;
      }
      // The events before it are out.
      write(EMPTY, true);
      whenDrained(() => settle(fault));
      body.abort();
    };
    body.attach({
      data(chunk) {
        if (concluded || settled) return;
        const blocks = splitter.push(chunk);
        if (blocks.length > 0) {
          const fault = relayBlocks(blocks, onEvent, fixups, write);
          if (fault) return faulted(fault);
        }
        if (splitter.oversized && !settled) {
          head();
          write(EMPTY, true);
          whenDrained(() => settle({ completed: false, clientClosed, eventTooLarge: true, clientStalled }));
          body.abort();
        }
      },
      end() {
        if (concluded || settled) return;
        // An event cut off by the end of the stream goes out as it came (the client discards it too).
        head();
        write(splitter.rest(), true);
        whenDrained(() => {
          if (options.endOnComplete && !clientClosed && !clientStalled) res.end();
          settle({
            completed: !clientClosed && !clientStalled,
            clientClosed: clientClosed && !clientStalled,
            eventTooLarge: false,
            clientStalled,
          });
        });
      },
      error(error) {
        if (concluded || settled) return;
        head();
        write(EMPTY, true);
        whenDrained(() => (clientClosed || clientStalled ? stopped() : settle({ error })));
      },
      fault(error) {
        if (concluded || settled) return;
        faulted({ error });
      },
    });
    // The chunks the body held (a look-ahead's opening events) were handed on within `attach`: the
    // head goes out now however the fixups treated them, so that it never waits on the upstream.
    if (!settled) head();
  });
}

const EMPTY = Buffer.alloc(0);

function isUpstreamBody(upstream: AsyncIterable<Uint8Array> | UpstreamBody): upstream is UpstreamBody {
  return typeof (upstream as Partial<UpstreamBody>).attach === 'function';
}

/** The bytes of consecutive blocks of one push, which lie next to each other in the splitter's buffer. */
function contiguous(blocks: readonly SseBlock[]): Buffer {
  if (blocks.length === 1) return blocks[0]!.raw;
  const first = blocks[0]!.raw;
  const last = blocks[blocks.length - 1]!.raw;
  return Buffer.from(first.buffer, first.byteOffset, last.byteOffset + last.length - first.byteOffset);
}

/**
 * Taps and writes one push's blocks: the tap sees each event as the upstream sent it (its usage is what
 * the upstream billed, whatever a fixup makes of the event), then the fixups make what the client gets.
 * A hook that throws (a fixup, the tap) stops them: the blocks before it are still written, so the client
 * has every event that was whole before the fault, and the error comes back to end the relay with.
 */
function relayBlocks(
  blocks: readonly SseBlock[],
  onEvent: (event: SseEvent) => void,
  fixups: BlockRewrite | undefined,
  write: (bytes: Buffer) => void,
): { error: unknown } | undefined {
  const out: Buffer[] = [];
  let done = 0;
  try {
    for (const block of blocks) {
      if (block.event) onEvent(block.event);
      if (fixups) for (const fixed of fixups.blocks(block)) out.push(fixed.raw);
      done += 1;
    }
  } catch (error) {
    if (done > 0) write(fixups ? Buffer.concat(out) : contiguous(blocks.slice(0, done)));
    return { error };
  }
  write(fixups ? Buffer.concat(out) : contiguous(blocks));
  return undefined;
}
