import { expect } from 'chai';
import fc from 'fast-check';
import { replaceBlockData, SseSplitter } from '../../../src/data-plane/sse/sse-relay.ts';

function splitAll(chunks: (string | Buffer)[]) {
  const splitter = new SseSplitter();
  const blocks = chunks.flatMap((chunk) => splitter.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk));
  return { blocks, rest: splitter.rest() };
}

describe('SseSplitter', () => {
  it("splits events, joins multi-line data and keeps each block's exact bytes", () => {
    const stream = 'event: message_start\ndata: {"a":1}\n\n: keep-alive\n\ndata: line one\ndata:line two\nid: 7\n\n';
    const { blocks, rest } = splitAll([stream]);
    expect(blocks.map((block) => block.event)).to.deep.equal([
      { event: 'message_start', data: '{"a":1}' },
      undefined,
      { data: 'line one\nline two', id: '7' },
    ]);
    expect(Buffer.concat(blocks.map((block) => block.raw)).toString()).to.equal(stream);
    expect(rest.length).to.equal(0);
  });

  it('handles CRLF and lone CR line endings, also when CR and LF arrive in different chunks', () => {
    const { blocks } = splitAll(['data: a\r', '\n\r', '\ndata: b\r\r', 'data: c\n\n']);
    expect(blocks.map((block) => block.event?.data)).to.deep.equal(['a', 'b', 'c']);
    expect(blocks[0]!.raw.toString()).to.equal('data: a\r\n\r\n');
  });

  it('keeps an event cut off by the end of the stream as undispatched rest', () => {
    const { blocks, rest } = splitAll(['data: done\n\ndata: {"partial"']);
    expect(blocks).to.have.length(1);
    expect(rest.toString()).to.equal('data: {"partial"');
  });

  it('does not break a UTF-8 character split across chunks', () => {
    const bytes = Buffer.from('data: héllo ✓\n\n');
    const { blocks } = splitAll([bytes.subarray(0, 8), bytes.subarray(8, 15), bytes.subarray(15)]);
    expect(blocks[0]!.event!.data).to.equal('héllo ✓');
  });

  it('gives the same events and bytes however the stream is cut into chunks', () => {
    const lineEnding = fc.constantFrom('\n', '\r\n', '\r');
    const line = fc.oneof(
      fc.string({ unit: 'grapheme', maxLength: 12 }).map((text) => `data: ${text.replace(/[\r\n]/g, '')}`),
      fc.constantFrom('event: delta', ': comment', 'id: 1', 'data:', 'retry: 10'),
    );
    const event = fc
      .tuple(fc.array(line, { minLength: 1, maxLength: 4 }), lineEnding)
      .map(([lines, end]) => lines.join(end) + end + end);
    fc.assert(
      fc.property(
        fc.array(event, { minLength: 1, maxLength: 6 }),
        fc.array(fc.nat(), { maxLength: 8 }),
        (events, cuts) => {
          const bytes = Buffer.from(events.join(''));
          const whole = splitAll([bytes]);
          const points = [...new Set(cuts.map((cut) => cut % (bytes.length + 1)))].sort((a, b) => a - b);
          const chunks = [0, ...points].map((start, index) => bytes.subarray(start, [...points, bytes.length][index]));
          const pieces = splitAll(chunks);
          expect(pieces.blocks.map((block) => block.event)).to.deep.equal(whole.blocks.map((block) => block.event));
          expect(Buffer.concat([...pieces.blocks.map((block) => block.raw), pieces.rest]).equals(bytes)).to.equal(true);
        },
      ),
    );
  });
});

describe('SseSplitter on degenerate input (linear in bytes)', () => {
  // Each of these took minutes or more when every chunk re-copied and re-scanned the unfinished event;
  // they now finish in well under a second (the suite's timeout is what fails them otherwise).
  it('splits one 24 MiB event that arrives in 6,144 chunks without a line break', () => {
    const splitter = new SseSplitter();
    const piece = Buffer.alloc(4096, 'x');
    expect(splitter.push(Buffer.from('data: '))).to.deep.equal([]);
    for (let index = 0; index < 6144; index += 1) expect(splitter.push(piece)).to.have.length(0);
    const [block] = splitter.push(Buffer.from('\n\n'));
    expect(block!.raw.length).to.equal(6 + 6144 * 4096 + 2);
    expect(block!.event!.data.length).to.equal(6144 * 4096);
    expect(splitter.rest().length).to.equal(0);
  });

  it('splits a million short lines without a colon in one chunk', () => {
    const splitter = new SseSplitter();
    const blocks = splitter.push(Buffer.from('x\n'.repeat(1_000_000) + 'data: end\n\n'));
    expect(blocks.map((block) => block.event)).to.deep.equal([{ data: 'end' }]);
  });
});

describe('SseSplitter event cap', () => {
  it('stops at a block larger than maxEventBytes, giving back the blocks before it', () => {
    const splitter = new SseSplitter(100);
    const first = splitter.push(Buffer.from('data: small\n\ndata: ' + 'y'.repeat(60)));
    expect(first.map((block) => block.event?.data)).to.deep.equal(['small']);
    expect(splitter.oversized).to.equal(false);
    expect(splitter.push(Buffer.from('y'.repeat(60)))).to.deep.equal([]);
    expect(splitter.oversized).to.equal(true);
    expect(splitter.push(Buffer.from('\n\ndata: later\n\n'))).to.deep.equal([]);
    expect(splitter.rest().length).to.equal(0);
  });

  it('gives the same blocks as an uncapped splitter up to the first block over the cap, however the stream is cut', () => {
    const event = fc.string({ maxLength: 40 }).map((text) => `data: ${text.replace(/[\r\n]/g, '')}\n\n`);
    fc.assert(
      fc.property(
        fc.array(event, { minLength: 1, maxLength: 8 }),
        fc.integer({ min: 8, max: 48 }),
        fc.array(fc.nat(), { maxLength: 6 }),
        (events, cap, cuts) => {
          const bytes = Buffer.from(events.join(''));
          const points = [...new Set(cuts.map((cut) => cut % (bytes.length + 1)))].sort((a, b) => a - b);
          const chunks = [0, ...points].map((start, index) => bytes.subarray(start, [...points, bytes.length][index]));
          const capped = new SseSplitter(cap);
          const blocks = chunks.flatMap((chunk) => capped.push(chunk));
          const firstTooLarge = events.findIndex((text) => Buffer.byteLength(text) > cap);
          const expected = firstTooLarge === -1 ? events : events.slice(0, firstTooLarge);
          expect(blocks.map((block) => block.raw.toString())).to.deep.equal(expected);
          expect(capped.oversized).to.equal(firstTooLarge !== -1);
        },
      ),
    );
  });
});

describe('replaceBlockData', () => {
  it('replaces the data lines and keeps the other lines and the line endings', () => {
    const raw = Buffer.from('event: x\r\ndata: {"a":\r\ndata: 1}\r\nid: 3\r\n\r\n');
    expect(replaceBlockData(raw, '{"b":2}').toString()).to.equal('event: x\r\ndata: {"b":2}\r\nid: 3\r\n\r\n');
  });
});
