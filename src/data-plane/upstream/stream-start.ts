import { WIRE_FORMATS, type WireFormatRules } from '../../core/formats/index.ts';
import type { WireFormat } from '../../plugins/plugin-contract.ts';
import { SseSplitter } from '../sse/sse-splitter.ts';
import type { UpstreamBody } from '../sse/upstream-body.ts';

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

/** Which events only open a stream and which report an error: a wire format's rules, or an adapted vendor's. */
export type EarlyEventRules = Pick<WireFormatRules, 'judgeEarlyEvent' | 'isErrorEvent'>;

/** The verdict on a stream's start so far: `undefined` while only opening events came. */
type Verdict = { readonly kind: 'content' } | Exclude<StreamStart, { kind: 'content' }> | undefined;

const CONTENT = { kind: 'content' } as const;

/**
 * Judges a stream's opening bytes as they come: the first content event (or anything that is not an
 * opening event) starts it, an error event or a malformed one fails it, and past `maxHeldBytes` it
 * counts as started. Which events open a stream or report an error is the format's rule
 * (`WIRE_FORMATS[format].judgeEarlyEvent`, `.isErrorEvent`), or an adapted vendor's (its declared error event).
 */
class OpeningJudge {
  private readonly rules: EarlyEventRules;
  private readonly splitter = new SseSplitter();
  private heldBytes = 0;

  constructor(
    judged: WireFormat | EarlyEventRules,
    private readonly maxHeldBytes: number,
  ) {
    this.rules = typeof judged === 'string' ? WIRE_FORMATS[judged] : judged;
  }

  push(chunk: Uint8Array): Verdict {
    this.heldBytes += chunk.length;
    for (const block of this.splitter.push(chunk)) {
      const event = block.event;
      if (!event) continue;
      if (this.rules.isErrorEvent(event))
        return { kind: 'error', reason: 'the upstream sent an error event before any content' };
      const judged = this.rules.judgeEarlyEvent(event);
      if (judged === 'malformed')
        return { kind: 'broken', error: new Error('the upstream sent a malformed event before any content') };
      if (judged === 'content') return CONTENT;
    }
    return this.heldBytes > this.maxHeldBytes ? CONTENT : undefined;
  }
}

/**
 * Holds a dispatched stream's opening events until its first content event, so that a failure before
 * any content can still be failed over without the client seeing a byte. The chunks are judged as the
 * socket delivers them and, once content comes, handed back to the response unchanged in front of the
 * rest, so the relay gets exactly the serving upstream's bytes (`body` is the response itself). At most
 * `maxHeldBytes` are held: past that the stream counts as started. A failed start cancels the request;
 * the response's signal aborting (the first-content timeout) fails it as `broken`.
 */
export function awaitDispatchedStreamStart<B extends UpstreamBody & { detach(held: readonly Uint8Array[]): void }>(
  response: B,
  judged: WireFormat | EarlyEventRules,
  maxHeldBytes: number,
): Promise<{ readonly kind: 'content'; readonly body: B } | Exclude<StreamStart, { kind: 'content' }>> {
  const judge = new OpeningJudge(judged, maxHeldBytes);
  const held: Uint8Array[] = [];
  return new Promise((resolve) => {
    let decided = false;
    response.attach({
      data(chunk) {
        if (decided) return;
        held.push(chunk);
        const verdict = judge.push(chunk);
        if (verdict === undefined) return;
        decided = true;
        if (verdict.kind === 'content') {
          response.detach(held);
          resolve({ kind: 'content', body: response });
        } else {
          response.abort();
          resolve(verdict);
        }
      },
      end() {
        if (decided) return;
        decided = true;
        response.detach(held);
        resolve({ kind: 'content', body: response });
      },
      error(error) {
        if (decided) return;
        decided = true;
        resolve({ kind: 'broken', error });
      },
    });
  });
}
