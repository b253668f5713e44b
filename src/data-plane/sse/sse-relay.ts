import { awaitClientRead, type ClientRead, type ClientResponse } from '../http/client-connection.ts';
import type { SseEvent, StreamFixupDeclaration } from '../../plugins/plugin-contract.ts';
import { iterableBody, type BodySink, type UpstreamBody } from './upstream-body.ts';
import type { TextSample } from '../../core/exchange.ts';

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
  return new Promise<RelayOutcome>((resolve, reject) =>
    new SseRelay(body, splitter, res, options, resolve, reject).start(),
  );
}

const EMPTY = Buffer.alloc(0);

function isUpstreamBody(upstream: AsyncIterable<Uint8Array> | UpstreamBody): upstream is UpstreamBody {
  return typeof (upstream as Partial<UpstreamBody>).attach === 'function';
}

/**
 * How a relay that stopped taking the body ends, once the client took what was written: the upstream
 * ended, sent an event over the cap, or broke off, or a plugin's hook failed.
 */
type Conclusion = 'complete' | 'eventTooLarge' | 'upstreamError' | 'fault';

/**
 * One stream being relayed: the body's sink, and the state of the client's side (head written, waiting
 * for a drain, gone) and of the end. Its methods are the relay's steps, so that nothing is allocated per
 * event or per write beyond the bytes.
 */
class SseRelay implements BodySink {
  private readonly onEvent: (event: SseEvent) => void;
  private readonly fixups: BlockRewrite | undefined;
  private readonly rewrite: ((bytes: Buffer) => Buffer) | undefined;
  private readonly writeHead: (() => void) | undefined;
  private readonly clientWriteTimeoutMs: number | undefined;
  private headed: boolean;
  private clientClosed = false;
  private clientStalled = false;
  private settled = false;
  /** Waiting for the client to drain a write it refused. */
  private draining = false;
  /** The outcome is decided (and may wait on the client's drain): nothing the body says counts any more. */
  private conclusion: Conclusion | undefined;
  /** The conclusion waits for the drain. */
  private deferred = false;
  /** What a `fault` or `upstreamError` conclusion fails the relay with. */
  private failure: { error: unknown } | undefined;

  constructor(
    private readonly body: UpstreamBody,
    private readonly splitter: SseSplitter,
    private readonly res: ClientResponse,
    private readonly options: RelayOptions,
    private readonly resolve: (outcome: RelayOutcome) => void,
    private readonly reject: (error: unknown) => void,
  ) {
    this.onEvent = options.onEvent;
    this.fixups = options.fixups?.empty === false ? options.fixups : undefined;
    this.rewrite = options.rewrite;
    this.writeHead = options.head;
    this.clientWriteTimeoutMs = options.clientWriteTimeoutMs;
    this.headed = options.head === undefined;
  }

  start(): void {
    this.res.once('close', this.onClose);
    this.body.attach(this);
    // The chunks the body held (a look-ahead's opening events) were handed on within `attach`: the
    // head goes out now however the fixups treated them, so that it never waits on the upstream.
    if (!this.settled) this.head();
  }

  data(chunk: Uint8Array): void {
    if (this.conclusion !== undefined || this.settled) return;
    const blocks = this.splitter.push(chunk);
    if (blocks.length > 0) {
      const fault = this.relayBlocks(blocks);
      if (fault) return this.faulted(fault);
    }
    if (this.splitter.oversized && !this.settled) {
      this.finish(EMPTY, 'eventTooLarge');
      this.body.abort();
    }
  }

  end(): void {
    if (this.conclusion !== undefined || this.settled) return;
    // An event cut off by the end of the stream goes out as it came (the client discards it too).
    this.finish(this.splitter.rest(), 'complete');
  }

  error(error: unknown): void {
    if (this.conclusion !== undefined || this.settled) return;
    this.finish(EMPTY, 'upstreamError', { error });
  }

  fault(error: unknown): void {
    if (this.conclusion !== undefined || this.settled) return;
    this.faulted({ error });
  }

  private head(): void {
    if (this.headed) return;
    this.headed = true;
    const writeHead = this.writeHead!;
    writeHead();
  }

  /**
   * Taps and writes one push's blocks: the tap sees each event as the upstream sent it (its usage is what
   * the upstream billed, whatever a fixup makes of the event), then the fixups make what the client gets.
   * A hook that throws (a fixup, the tap) stops them: the blocks before it are still written, so the client
   * has every event that was whole before the fault, and the error comes back to end the relay with.
   */
  private relayBlocks(blocks: readonly SseBlock[]): { error: unknown } | undefined {
    const { onEvent, fixups } = this;
    const out: Buffer[] = [];
    let done = 0;
    try {
      for (const block of blocks) {
        if (block.event) onEvent(block.event);
        if (fixups) for (const fixed of fixups.blocks(block)) out.push(fixed.raw);
        done += 1;
      }
    } catch (error) {
      if (done > 0) this.write(fixups ? Buffer.concat(out) : contiguous(blocks.slice(0, done)));
      return { error };
    }
    this.write(fixups ? Buffer.concat(out) : contiguous(blocks));
    return undefined;
  }

  /** Writes `bytes` (rewritten), and what the rewrite held back when `last`. */
  private write(bytes: Buffer, last = false): void {
    if (this.settled) return;
    const rewrite = this.rewrite;
    let out = rewrite && bytes.length > 0 ? rewrite(bytes) : bytes;
    const held = last && this.options.flush ? this.options.flush() : undefined;
    if (held && held.length > 0) out = out.length === 0 ? held : Buffer.concat([out, held]);
    if (out.length === 0) return;
    if (!this.headed) this.head();
    if (this.res.write(out)) return;
    this.draining = true;
    this.body.pause();
    void awaitClientRead(this.res, 'drain', this.clientWriteTimeoutMs).then(this.onDrained);
  }

  /** The client took a refused write (the body flows again, or the relay concludes), or left or stalled. */
  private readonly onDrained = (read: ClientRead): void => {
    this.draining = false;
    if (this.settled) return;
    if (read === 'taken') {
      if (!this.deferred) return this.body.resume();
      this.deferred = false;
      return this.conclude();
    }
    if (read === 'stalled') this.clientStalled = true;
    else this.clientClosed = true;
    this.stopped();
    this.body.abort();
  };

  private readonly onClose = (): void => {
    if (this.res.writableFinished || this.settled) return;
    this.clientClosed = true;
    this.stopped();
    this.body.abort();
  };

  /** A plugin's hook failed: the rest of the body is not wanted. */
  private faulted(fault: { error: unknown }): void {
    // Nothing reached the client yet: the caller answers with a status of its own, and what `rewrite`
    // holds is dropped.
    if (!this.headed) {
      this.settle(fault);
      this.body.abort();
      return;
    }
    // The events before it are out.
    this.finish(EMPTY, 'fault', fault);
    this.body.abort();
  }

  /** Writes the last bytes and what the rewrite holds back, then concludes once the client took them. */
  private finish(last: Buffer, conclusion: Conclusion, failure?: { error: unknown }): void {
    this.head();
    this.write(last, true);
    if (this.conclusion !== undefined) return;
    this.conclusion = conclusion;
    this.failure = failure;
    if (this.draining) this.deferred = true;
    else this.conclude();
  }

  private conclude(): void {
    const { clientClosed, clientStalled } = this;
    switch (this.conclusion) {
      case 'complete':
        if (this.options.endOnComplete && !clientClosed && !clientStalled) this.res.end();
        return this.settle({
          completed: !clientClosed && !clientStalled,
          clientClosed: clientClosed && !clientStalled,
          eventTooLarge: false,
          clientStalled,
        });
      case 'eventTooLarge':
        return this.settle({ completed: false, clientClosed, eventTooLarge: true, clientStalled });
      case 'upstreamError':
        return clientClosed || clientStalled ? this.stopped() : this.settle(this.failure!);
      case 'fault':
        return this.settle(this.failure!);
    }
  }

  /** The client left or stalled before the end. */
  private stopped(): void {
    const { clientClosed, clientStalled } = this;
    this.settle({
      completed: false,
      clientClosed: clientClosed && !clientStalled,
      eventTooLarge: false,
      clientStalled,
    });
  }

  private settle(outcome: RelayOutcome | { error: unknown }): void {
    if (this.settled) return;
    this.settled = true;
    this.res.off('close', this.onClose);
    if ('error' in outcome) this.reject(outcome.error);
    else this.resolve(outcome);
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

/**
 * The text of a stream, kept only in case the stream ends without usage and must be estimated, in
 * bounded memory whatever the stream's length: event data is held as received and turned into text
 * lazily (most streams do report usage, so most never pay for it), past `maxPendingChars` the held
 * data is converted, and of the text only the first `maxSampleChars` are kept beside the count of all
 * characters; the estimate extrapolates from that sample.
 */
export class StreamedText {
  private pending: string[] = [];
  private pendingChars = 0;
  private sample = '';
  private chars = 0;

  constructor(
    private readonly extract: (data: string) => string,
    private readonly maxPendingChars = 256 * 1024,
    private readonly maxSampleChars = 256 * 1024,
  ) {}

  add(data: string): void {
    this.pending.push(data);
    this.pendingChars += data.length;
    if (this.pendingChars > this.maxPendingChars) this.convert();
  }

  value(): TextSample {
    this.convert();
    return { text: this.sample, chars: this.chars };
  }

  /** Characters held right now (pending event data and the sample), for tests and diagnostics. */
  get heldChars(): number {
    return this.pendingChars + this.sample.length;
  }

  private convert(): void {
    for (const data of this.pending) {
      const text = this.extract(data);
      this.chars += text.length;
      const room = this.maxSampleChars - this.sample.length;
      if (room > 0) this.sample += text.length <= room ? text : text.slice(0, room);
    }
    this.pending = [];
    this.pendingChars = 0;
  }
}

/** One block of an SSE stream: the exact bytes up to and including its blank line, and what they hold. */
export interface SseBlock {
  readonly raw: Buffer;
  /** The dispatched event; `undefined` for a block without data (comments, keep-alives). */
  readonly event: SseEvent | undefined;
}

const LF = 0x0a;
const CR = 0x0d;
const COLON = 0x3a;
const SPACE = 0x20;
const DATA = Buffer.from('data');
const EVENT = Buffer.from('event');
const ID = Buffer.from('id');

function isName(buffer: Buffer, start: number, name: Buffer): boolean {
  for (let index = 0; index < name.length; index += 1) if (buffer[start + index] !== name[index]) return false;
  return true;
}

/**
 * Incremental SSE splitter over raw bytes (WHATWG rules): lines end in LF, CRLF or a lone CR, even when
 * the terminator is split across chunks; `data:` lines join with `\n`; one space after the colon is
 * stripped; comment lines are skipped. Each block keeps its exact bytes, so a relay can forward them
 * untouched. Lines are decoded only once they are complete, so a UTF-8 sequence split across chunks is
 * never broken.
 *
 * Work is linear in the bytes pushed, however an event is cut into chunks: an unfinished block grows
 * in a buffer that doubles when full, and a line is scanned for its end only past what earlier chunks
 * already scanned. A block larger than `maxEventBytes` stops the splitter ({@link oversized}).
 */
export class SseSplitter {
  /** Bytes `[0, length)` are the unparsed rest; past them, spare room for the next chunks. */
  private buffer: Buffer = EMPTY;
  private length = 0;
  /** Where the next unparsed line starts in `buffer`. */
  private position = 0;
  /** `[position, scanned)` holds no line terminator: the next search starts at `scanned`. */
  private scanned = 0;
  private data: string[] = [];
  private eventName: string | undefined;
  private eventId: string | undefined;
  private atStreamStart = true;
  private tooLarge = false;

  constructor(private readonly maxEventBytes = Number.POSITIVE_INFINITY) {}

  /** True once a block passed `maxEventBytes`; from then on the splitter returns nothing and holds nothing. */
  get oversized(): boolean {
    return this.tooLarge;
  }

  /** Feeds one chunk; returns the blocks it completed. */
  push(chunk: Uint8Array): SseBlock[] {
    if (this.tooLarge) return [];
    this.append(chunk);
    const blocks: SseBlock[] = [];
    const buffer = this.buffer.subarray(0, this.length);
    let blockStart = 0;
    let nextLf = -2;
    let nextCr = -2;
    for (;;) {
      const position = this.position;
      const from = Math.max(position, this.scanned);
      if (nextLf !== -1 && nextLf < position) nextLf = buffer.indexOf(LF, from);
      if (nextCr !== -1 && nextCr < position) nextCr = buffer.indexOf(CR, from);
      let end: number;
      let terminator: number;
      if (nextCr !== -1 && (nextLf === -1 || nextCr < nextLf)) {
        // A CR at the very end may be the first half of a CRLF: wait for the next chunk.
        if (nextCr + 1 === buffer.length) {
          this.scanned = nextCr;
          break;
        }
        end = nextCr;
        terminator = buffer[nextCr + 1] === LF ? 2 : 1;
      } else if (nextLf !== -1) {
        end = nextLf;
        terminator = 1;
      } else {
        this.scanned = buffer.length;
        break;
      }
      this.position = end + terminator;
      if (end === position) {
        if (this.position - blockStart > this.maxEventBytes) return this.refuse(blocks);
        blocks.push({ raw: buffer.subarray(blockStart, this.position), event: this.dispatch() });
        blockStart = this.position;
      } else {
        this.readLine(buffer, position, end);
      }
    }
    if (buffer.length - blockStart > this.maxEventBytes) return this.refuse(blocks);
    if (blockStart > 0) {
      // Copy the unfinished rest so the chunk it came from is not pinned in memory.
      this.buffer = blockStart === buffer.length ? EMPTY : Buffer.from(buffer.subarray(blockStart));
      this.length = this.buffer.length;
      this.position -= blockStart;
      this.scanned = Math.max(0, this.scanned - blockStart);
    }
    return blocks;
  }

  private append(chunk: Uint8Array): void {
    if (this.length === 0) {
      this.buffer = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
      this.length = chunk.byteLength;
      return;
    }
    const needed = this.length + chunk.byteLength;
    // Only the room past `length` is ever written, and only in a buffer allocated here: blocks handed
    // out earlier (views below `length`) and the caller's chunks are never touched.
    if (needed > this.buffer.length) {
      const grown = Buffer.allocUnsafe(Math.max(needed, this.buffer.length * 2));
      this.buffer.copy(grown, 0, 0, this.length);
      this.buffer = grown;
    }
    this.buffer.set(chunk, this.length);
    this.length = needed;
  }

  private refuse(blocks: SseBlock[]): SseBlock[] {
    this.tooLarge = true;
    this.buffer = EMPTY;
    this.length = 0;
    this.data = [];
    return blocks;
  }

  /** The bytes of an unfinished block at the end of the stream (an event cut off by EOF is not dispatched). */
  rest(): Buffer {
    return this.buffer.subarray(0, this.length);
  }

  private readLine(buffer: Buffer, start: number, end: number): void {
    if (this.atStreamStart) {
      this.atStreamStart = false;
      if (buffer[start] === 0xef && buffer[start + 1] === 0xbb && buffer[start + 2] === 0xbf) start += 3;
    }
    if (buffer[start] === COLON) return;
    // Byte comparisons, not strings: this runs for every line of every stream.
    let nameEnd = start;
    while (nameEnd < end && buffer[nameEnd] !== COLON) nameEnd += 1;
    let valueStart = nameEnd === end ? end : nameEnd + 1;
    if (buffer[valueStart] === SPACE && valueStart < end) valueStart += 1;
    const nameLength = nameEnd - start;
    if (nameLength === 4 && isName(buffer, start, DATA)) this.data.push(buffer.toString('utf8', valueStart, end));
    else if (nameLength === 5 && isName(buffer, start, EVENT))
      this.eventName = buffer.toString('utf8', valueStart, end);
    else if (nameLength === 2 && isName(buffer, start, ID)) this.eventId = buffer.toString('utf8', valueStart, end);
  }

  private dispatch(): SseEvent | undefined {
    this.atStreamStart = false;
    const { data, eventName, eventId } = this;
    this.data = [];
    this.eventName = undefined;
    this.eventId = undefined;
    if (data.length === 0) return undefined;
    const event: { data: string; event?: string; id?: string } = {
      data: data.length === 1 ? data[0]! : data.join('\n'),
    };
    if (eventName !== undefined) event.event = eventName;
    if (eventId !== undefined) event.id = eventId;
    return event;
  }
}

/**
 * The bytes of `raw` (one block) with its `data:` lines replaced by `data`, every other line (event, id,
 * comments) and the block's line endings kept.
 */
export function replaceBlockData(raw: Buffer, data: string): Buffer {
  const text = raw.toString('utf8');
  const lines = text.split(/(\r\n|\r|\n)/);
  const newline = lines[1] ?? '\n';
  const out: string[] = [];
  let dataWritten = false;
  for (let index = 0; index < lines.length; index += 2) {
    const line = lines[index]!;
    const terminator = lines[index + 1] ?? '';
    if (/^data(:|$)/.test(line)) {
      if (!dataWritten) {
        out.push(
          data
            .split('\n')
            .map((part) => `data: ${part}`)
            .join(newline),
          terminator,
        );
        dataWritten = true;
      }
      continue;
    }
    out.push(line, terminator);
  }
  return Buffer.from(out.join(''), 'utf8');
}
