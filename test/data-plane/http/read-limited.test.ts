import { expect } from 'chai';
import { PassThrough, Readable } from 'node:stream';
import { readLimited } from '../../../src/data-plane/http/json-body.ts';

describe('readLimited', () => {
  it('reads a stream whole when it stays within the limit', async () => {
    const bytes = await readLimited(
      Readable.from([Buffer.from('ab'), Buffer.from('cd')]),
      4,
      () => new Error('too large'),
    );
    expect(bytes.toString()).to.equal('abcd');
  });

  it('refuses a stream over the limit, and the error of the body destroyed by onTooLarge reaches no one', async () => {
    const body = new PassThrough();
    const reading = readLimited(body, 4, () => {
      // As undici's body does when destroyed before its end: it emits an error.
      body.destroy(new Error('aborted'));
      return new Error('too large');
    });
    body.write(Buffer.from('123456'));
    const error = await reading.catch((caught: Error) => caught);
    expect((error as Error).message).to.equal('too large');
    // Without a listener left on the body, its error event would be an uncaught exception (the test fails).
    await new Promise((resolve) => setImmediate(resolve));
    expect(body.destroyed).to.equal(true);
  });
});
