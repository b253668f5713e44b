import type { SseEvent } from '../plugins/plugin-contract.ts';

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

/**
 * Incremental SSE splitter over raw bytes (WHATWG rules): lines end in LF, CRLF or a lone CR, even when
 * the terminator is split across chunks; `data:` lines join with `\n`; one space after the colon is
 * stripped; comment lines are skipped. Each block keeps its exact bytes, so a relay can forward them
 * untouched. Lines are decoded only once they are complete, so a UTF-8 sequence split across chunks is
 * never broken.
 */
export class SseSplitter {
  private buffer: Buffer = EMPTY;
  /** Where the next unparsed line starts in `buffer`. */
  private position = 0;
  private data: string[] = [];
  private eventName: string | undefined;
  private eventId: string | undefined;
  private atStreamStart = true;

  /** Feeds one chunk; returns the blocks it completed. */
  push(chunk: Uint8Array): SseBlock[] {
    this.buffer = this.buffer.length === 0 ? Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength) : Buffer.concat([this.buffer, chunk]);
    const blocks: SseBlock[] = [];
    const buffer = this.buffer;
    let blockStart = 0;
    let nextLf = -2;
    let nextCr = -2;
    for (;;) {
      const position = this.position;
      if (nextLf !== -1 && nextLf < position) nextLf = buffer.indexOf(LF, position);
      if (nextCr !== -1 && nextCr < position) nextCr = buffer.indexOf(CR, position);
      let end: number;
      let terminator: number;
      if (nextCr !== -1 && (nextLf === -1 || nextCr < nextLf)) {
        // A CR at the very end may be the first half of a CRLF: wait for the next chunk.
        if (nextCr + 1 === buffer.length) break;
        end = nextCr;
        terminator = buffer[nextCr + 1] === LF ? 2 : 1;
      } else if (nextLf !== -1) {
        end = nextLf;
        terminator = 1;
      } else {
        break;
      }
      this.position = end + terminator;
      if (end === position) {
        blocks.push({ raw: buffer.subarray(blockStart, this.position), event: this.dispatch() });
        blockStart = this.position;
      } else {
        this.readLine(buffer, position, end);
      }
    }
    if (blockStart > 0) {
      // Copy the unfinished rest so the chunk it came from is not pinned in memory.
      this.buffer = blockStart === buffer.length ? EMPTY : Buffer.from(buffer.subarray(blockStart));
      this.position -= blockStart;
    }
    return blocks;
  }

  /** The bytes of an unfinished block at the end of the stream (an event cut off by EOF is not dispatched). */
  rest(): Buffer {
    return this.buffer;
  }

  private readLine(buffer: Buffer, start: number, end: number): void {
    if (this.atStreamStart) {
      this.atStreamStart = false;
      if (buffer[start] === 0xef && buffer[start + 1] === 0xbb && buffer[start + 2] === 0xbf) start += 3;
    }
    if (buffer[start] === COLON) return;
    const colon = buffer.indexOf(COLON, start);
    const nameEnd = colon === -1 || colon > end ? end : colon;
    let valueStart = nameEnd === end ? end : nameEnd + 1;
    if (buffer[valueStart] === SPACE && valueStart < end) valueStart += 1;
    const name = buffer.toString('latin1', start, nameEnd);
    if (name === 'data') this.data.push(buffer.toString('utf8', valueStart, end));
    else if (name === 'event') this.eventName = buffer.toString('utf8', valueStart, end);
    else if (name === 'id') this.eventId = buffer.toString('utf8', valueStart, end);
  }

  private dispatch(): SseEvent | undefined {
    this.atStreamStart = false;
    const { data, eventName, eventId } = this;
    this.data = [];
    this.eventName = undefined;
    this.eventId = undefined;
    if (data.length === 0) return undefined;
    const event: { data: string; event?: string; id?: string } = { data: data.length === 1 ? data[0]! : data.join('\n') };
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
        out.push(data.split('\n').map((part) => `data: ${part}`).join(newline), terminator);
        dataWritten = true;
      }
      continue;
    }
    out.push(line, terminator);
  }
  return Buffer.from(out.join(''), 'utf8');
}
