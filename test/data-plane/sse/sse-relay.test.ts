import { expect } from 'chai';
import fc from 'fast-check';
import type { ServerResponse } from 'node:http';
import { Writable } from 'node:stream';
import type { SseEvent } from '../../../src/plugins/plugin-contract.ts';
import { relaySse } from '../../../src/data-plane/sse/sse-relay.ts';
import { redactCredential } from '../../../src/data-plane/upstream/redact-credential.ts';

const SECRET = 'upstream-secret-key';

/** A client socket stand-in: a Writable that keeps what it is given. */
function client(): { res: ServerResponse; received: () => Buffer } {
  const chunks: Buffer[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      chunks.push(Buffer.from(chunk));
      callback();
    },
  });
  return { res: sink as unknown as ServerResponse, received: () => Buffer.concat(chunks) };
}

async function* chunked(bytes: Buffer, points: number[]): AsyncGenerator<Uint8Array> {
  let start = 0;
  for (const point of [...points, bytes.length]) {
    yield bytes.subarray(start, point);
    start = point;
  }
}

describe('relaySse (property)', () => {
  it('writes exactly the upstream bytes, credential redacted, up to the first event over the cap, whatever the chunking', async () => {
    const lineEnd = fc.constantFrom('\n', '\r\n', '\r');
    const text = fc.oneof(
      fc.string({ maxLength: 30 }),
      fc.constant(`key ${SECRET}`),
      fc.string({ maxLength: 3 }).map((pad) => 'z'.repeat(200) + pad),
    );
    const event = fc
      .tuple(fc.option(fc.constantFrom('delta', 'error', 'message_stop'), { nil: undefined }), text, lineEnd)
      .map(
        ([name, data, end]) => `${name ? `event: ${name}${end}` : ''}data: ${data.replace(/[\r\n]/g, '')}${end}${end}`,
      );
    await fc.assert(
      fc.asyncProperty(
        fc.array(event, { minLength: 1, maxLength: 8 }),
        fc.option(fc.integer({ min: 40, max: 400 }), { nil: undefined }),
        fc.array(fc.nat(), { maxLength: 10 }),
        fc.boolean(),
        async (events, cap, cuts, truncated) => {
          const whole = Buffer.from(events.join(''));
          // Sometimes the upstream stops in the middle of its last event.
          const bytes = truncated ? whole.subarray(0, Math.max(1, whole.length - 3)) : whole;
          const points = [...new Set(cuts.map((cut) => cut % (bytes.length + 1)))].sort((a, b) => a - b);
          const { res, received } = client();
          const seen: SseEvent[] = [];
          const outcome = await relaySse(chunked(bytes, points), res, {
            onEvent: (passing) => seen.push(passing),
            maxEventBytes: cap,
            rewrite: (out) => redactCredential(out, SECRET),
          });
          // What of each event arrived: the last one only in part when the stream was truncated.
          const sizes = events.map(
            (one, index) => Buffer.byteLength(one) - (truncated && index === events.length - 1 ? 3 : 0),
          );
          const tooLarge = cap === undefined ? -1 : sizes.findIndex((size) => size > cap);
          if (tooLarge !== -1) {
            expect(outcome.eventTooLarge).to.equal(true);
            expect(received().toString()).to.equal(
              redactCredential(Buffer.from(events.slice(0, tooLarge).join('')), SECRET).toString(),
            );
            expect(seen).to.have.length(tooLarge);
          } else {
            expect(outcome).to.deep.include({ completed: true, eventTooLarge: false });
            expect(received().toString()).to.equal(redactCredential(bytes, SECRET).toString());
          }
          expect(received().includes(SECRET)).to.equal(false);
        },
      ),
      { numRuns: 300 },
    );
  });
});
