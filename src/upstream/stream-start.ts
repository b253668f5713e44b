import type { SseEvent, WireFormat } from '../plugins/plugin-contract.ts';
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

const MESSAGES_OPENINGS = new Set(['message_start', 'ping']);
const RESPONSES_OPENINGS = new Set(['response.created', 'response.in_progress']);
const ROLE_ONLY_KEYS = new Set(['role', 'content', 'refusal']);

/** What an event before any content is: one that only opens the stream, the first content, or not an event of the format at all. */
export type EarlyEvent = 'opening' | 'content' | 'malformed';

type ChatChunk = { choices?: { delta?: Record<string, unknown>; finish_reason?: unknown }[]; usage?: unknown };

/**
 * Judges an event that arrives before any content. Opening events only open a stream: Messages
 * `message_start` and `ping`, Responses `response.created` and `response.in_progress`, a Chat
 * Completions chunk whose deltas carry nothing but a role (and empty content). Anything else is
 * content, so an unknown event is never held, unless its data is not JSON: the event the stream would
 * start with is parsed (once per stream), and a malformed one is a failure of that endpoint.
 */
export function judgeEarlyEvent(format: WireFormat, event: SseEvent): EarlyEvent {
  if (format === 'chat-completions' && event.data === '[DONE]') return 'content';
  if (format === 'messages' && event.event !== undefined && MESSAGES_OPENINGS.has(event.event)) return 'opening';
  if (format === 'responses' && event.event !== undefined && RESPONSES_OPENINGS.has(event.event)) return 'opening';
  let parsed: unknown;
  try {
    parsed = JSON.parse(event.data);
  } catch {
    return 'malformed';
  }
  if (typeof parsed !== 'object' || parsed === null) return 'malformed';
  if (format === 'messages') return event.event === undefined && MESSAGES_OPENINGS.has((parsed as { type?: string }).type ?? '') ? 'opening' : 'content';
  if (format !== 'chat-completions') return 'content';
  const chunk = parsed as ChatChunk;
  if (!Array.isArray(chunk.choices) || chunk.choices.length === 0 || chunk.usage) return 'content';
  const opening = chunk.choices.every(
    (choice) =>
      choice.finish_reason == null &&
      Object.entries(choice.delta ?? {}).every(([key, value]) => ROLE_ONLY_KEYS.has(key) && (key === 'role' || value === null || value === '')),
  );
  return opening ? 'opening' : 'content';
}

/** Whether an event only opens a stream (see {@link judgeEarlyEvent}). */
export function isOpeningEvent(format: WireFormat, event: SseEvent): boolean {
  return judgeEarlyEvent(format, event) === 'opening';
}

/** Whether an event reports an error in place of an answer. */
export function isErrorEvent(format: WireFormat, event: SseEvent): boolean {
  if (event.event === 'error') return true;
  if (format === 'responses') return event.event === 'response.failed';
  if (format === 'chat-completions') return event.data.startsWith('{"error"') || /^\{\s*"error"\s*:/.test(event.data);
  return false;
}

/**
 * Reads an upstream SSE body until its first content event, holding the opening events so that a
 * failure before any content can still be failed over without the client seeing a byte. The held
 * chunks are handed back unchanged in front of the rest of the body, so the client gets exactly the
 * serving upstream's bytes. At most `maxHeldBytes` are held: past that the stream counts as started.
 * `signal` aborting (the first-content timeout) makes the read fail as `broken`.
 */
export async function awaitStreamStart(
  body: AsyncIterable<Uint8Array>,
  format: WireFormat,
  maxHeldBytes: number,
): Promise<StreamStart> {
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
        if (isErrorEvent(format, event)) return await failed({ kind: 'error', reason: 'the upstream sent an error event before any content' });
        const judged = judgeEarlyEvent(format, event);
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
