import { WIRE_FORMATS } from '../../core/formats/index.ts';
import type { WireFormat } from '../../plugins/plugin-contract.ts';
import { discard, isByteReadable, readableBatches } from '../sse/readable-batches.ts';
import { SseSplitter } from '../sse/sse-splitter.ts';

/**
 * How a stream's start went:
 * - `content`: a content event (or anything that is not an opening event) arrived, or the stream ended
 *   cleanly; `body` replays the held chunks and then continues with the upstream's own;
 * - `error`: the upstream sent an error event before any content;
 * - `broken`: the upstream body failed (cut, reset, timed out) or sent an event that is not of its
 *   format (data that is not JSON) before any content.
 */
export type StreamStart =
  | { readonly kind: 'content'; readonly body: AsyncIterable<Uint8Array> }
  | { readonly kind: 'error'; readonly reason: string }
  | { readonly kind: 'broken'; readonly error: unknown };

/**
 * Reads an upstream SSE body until its first content event, holding the opening events so that a
 * failure before any content can still be failed over without the client seeing a byte. The held
 * chunks are handed back unchanged in front of the rest of the body, so the client gets exactly the
 * serving upstream's bytes. At most `maxHeldBytes` are held: past that the stream counts as started.
 * `signal` aborting (the first-content timeout) makes the read fail as `broken`. Which events open a
 * stream or report an error is the format's rule (`WIRE_FORMATS[format].judgeEarlyEvent`, `.isErrorEvent`).
 */
export async function awaitStreamStart(
  body: AsyncIterable<Uint8Array>,
  format: WireFormat,
  maxHeldBytes: number,
): Promise<StreamStart> {
  const rules = WIRE_FORMATS[format];
  // A node byte stream is read a batch at a time and handed back whole, the held bytes put back in
  // front, so the relay reads it the same cheap way; any other iterable is replayed.
  const readable = isByteReadable(body) ? body : undefined;
  const source = readable ? readableBatches(readable, { keepOpen: true }) : body[Symbol.asyncIterator]();
  const held: Uint8Array[] = [];
  const splitter = new SseSplitter();
  let heldBytes = 0;
  const started = async (ended: boolean): Promise<StreamStart> => {
    if (!readable) return { kind: 'content', body: replay(held, source, ended) };
    await source.return?.(undefined);
    if (ended) return { kind: 'content', body: replay(held, source, true) };
    readable.unshift(held.length === 1 ? held[0]! : Buffer.concat(held));
    return { kind: 'content', body: readable };
  };
  const failed = async (start: StreamStart): Promise<StreamStart> => {
    await source.return?.(undefined);
    if (readable) discard(readable);
    return start;
  };
  try {
    for (;;) {
      const next = await source.next();
      if (next.done) return await started(true);
      held.push(next.value);
      heldBytes += next.value.length;
      for (const block of splitter.push(next.value)) {
        const event = block.event;
        if (!event) continue;
        if (rules.isErrorEvent(event)) return await failed({ kind: 'error', reason: 'the upstream sent an error event before any content' });
        const judged = rules.judgeEarlyEvent(event);
        if (judged === 'malformed') return await failed({ kind: 'broken', error: new Error('the upstream sent a malformed event before any content') });
        if (judged === 'content') return await started(false);
      }
      if (heldBytes > maxHeldBytes) return await started(false);
    }
  } catch (error) {
    if (readable) discard(readable);
    return { kind: 'broken', error };
  }
}

/** The held chunks, then the rest of the upstream body, without an extra generator layer. */
function replay(held: Uint8Array[], iterator: AsyncIterator<Uint8Array>, ended: boolean): AsyncIterable<Uint8Array> {
  let index = 0;
  const rest: AsyncIterator<Uint8Array> = {
    next: () => {
      if (index < held.length) return Promise.resolve({ value: held[index++]!, done: false });
      if (ended) return Promise.resolve({ value: undefined, done: true });
      return iterator.next();
    },
    return: (value?: unknown) => (iterator.return ? iterator.return(value) : Promise.resolve({ value: undefined, done: true })),
  };
  return { [Symbol.asyncIterator]: () => rest };
}
