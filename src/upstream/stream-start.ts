import type { SseEvent, WireFormat } from '../plugins/plugin-contract.ts';
import { discard, isByteReadable, readableBatches } from '../sse/readable-batches.ts';
import { SseSplitter } from '../sse/sse-splitter.ts';

/**
 * How a stream's start went:
 * - `content`: a content event (or anything that is not an opening event) arrived, or the stream ended
 *   cleanly; `body` replays the held chunks and then continues with the upstream's own;
 * - `error`: the upstream sent an error event before any content;
 * - `broken`: the upstream body failed (cut, reset, timed out) before any content.
 */
export type StreamStart =
  | { readonly kind: 'content'; readonly body: AsyncIterable<Uint8Array> }
  | { readonly kind: 'error'; readonly reason: string }
  | { readonly kind: 'broken'; readonly error: unknown };

const MESSAGES_OPENINGS = new Set(['message_start', 'ping']);
const RESPONSES_OPENINGS = new Set(['response.created', 'response.in_progress']);
const ROLE_ONLY_KEYS = new Set(['role', 'content', 'refusal']);
const NON_EMPTY_CONTENT = /"content"\s*:\s*"[^"]/;

/**
 * Whether an event only opens a stream (no content yet): Messages `message_start` and `ping`, Responses
 * `response.created` and `response.in_progress`, a Chat Completions chunk whose deltas carry nothing but
 * a role (and empty content). Everything else counts as content, so an unknown event is never held.
 */
export function isOpeningEvent(format: WireFormat, event: SseEvent): boolean {
  if (format === 'messages') return event.event !== undefined ? MESSAGES_OPENINGS.has(event.event) : /^\{"type":"(message_start|ping)"/.test(event.data);
  if (format === 'responses') return event.event !== undefined && RESPONSES_OPENINGS.has(event.event);
  if (format !== 'chat-completions' || event.data === '[DONE]') return false;
  // Most content chunks say so without a parse: a non-empty `content` string (a raw `"content":"` can only
  // be a key and its value, since quotes inside strings are escaped).
  if (NON_EMPTY_CONTENT.test(event.data)) return false;
  try {
    const chunk = JSON.parse(event.data) as { choices?: { delta?: Record<string, unknown>; finish_reason?: unknown }[]; usage?: unknown };
    if (!Array.isArray(chunk.choices) || chunk.choices.length === 0 || chunk.usage) return false;
    return chunk.choices.every(
      (choice) =>
        choice.finish_reason == null &&
        Object.entries(choice.delta ?? {}).every(([key, value]) => ROLE_ONLY_KEYS.has(key) && (key === 'role' || value === null || value === '')),
    );
  } catch {
    return false;
  }
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
  try {
    for (;;) {
      const next = await source.next();
      if (next.done) return await started(true);
      held.push(next.value);
      heldBytes += next.value.length;
      for (const block of splitter.push(next.value)) {
        const event = block.event;
        if (!event) continue;
        if (isErrorEvent(format, event)) {
          await source.return?.(undefined);
          if (readable) discard(readable);
          return { kind: 'error', reason: 'the upstream sent an error event before any content' };
        }
        if (!isOpeningEvent(format, event)) return await started(false);
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
