import type { SseEvent } from '../../plugins/plugin-contract.ts';

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
const EMPTY = Buffer.alloc(0);
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
