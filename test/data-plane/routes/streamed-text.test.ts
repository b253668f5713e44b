import { expect } from 'chai';
import { StreamedText } from '../../../src/data-plane/sse/sse-relay.ts';

describe('StreamedText', () => {
  it('holds bounded memory however long the stream, and still counts every character', () => {
    const streamed = new StreamedText((data) => (JSON.parse(data) as { t: string }).t, 64 * 1024, 128 * 1024);
    const piece = 'x'.repeat(1000);
    let most = 0;
    for (let index = 0; index < 20_000; index += 1) {
      streamed.add(JSON.stringify({ t: piece }));
      most = Math.max(most, streamed.heldChars);
    }
    expect(most).to.be.at.most(64 * 1024 + 1100 + 128 * 1024);
    const sample = streamed.value();
    expect(sample.chars).to.equal(20_000 * 1000);
    expect(sample.text).to.equal('x'.repeat(128 * 1024));
  });

  it('keeps a short stream whole', () => {
    const streamed = new StreamedText((data) => data);
    streamed.add('Hello, ');
    streamed.add('world');
    expect(streamed.value()).to.deep.equal({ text: 'Hello, world', chars: 12 });
  });
});
