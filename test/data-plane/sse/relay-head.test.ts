import { expect } from 'chai';
import type { ServerResponse } from 'node:http';
import { Writable } from 'node:stream';
import type { SseEvent } from '../../../src/plugins/plugin-contract.ts';
import { FixupChain, relaySse } from '../../../src/data-plane/sse/sse-relay.ts';
import type { BodySink, UpstreamBody } from '../../../src/data-plane/sse/upstream-body.ts';

/** A client stand-in that notes when the head went out relative to the bytes. */
function client(): { res: ServerResponse; log: string[] } {
  const log: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      log.push(`bytes:${chunk.toString('utf8')}`);
      callback();
    },
  });
  return { res: sink as unknown as ServerResponse, log };
}

/**
 * A body like a look-ahead's: the held chunks are handed on within `attach`, the rest `later` (one
 * per tick), then the end.
 */
function heldBody(held: string[], later: string[] = []): UpstreamBody & { aborted: boolean } {
  const body = {
    aborted: false,
    attach(sink: BodySink) {
      for (const chunk of held) sink.data(Buffer.from(chunk));
      void (async () => {
        for (const chunk of later) {
          await new Promise((resolve) => setImmediate(resolve));
          if (body.aborted) return;
          sink.data(Buffer.from(chunk));
        }
        await new Promise((resolve) => setImmediate(resolve));
        if (!body.aborted) sink.end();
      })();
    },
    pause() {},
    resume() {},
    abort() {
      body.aborted = true;
    },
  };
  return body;
}

const fixups = (fixup: (event: SseEvent) => SseEvent | readonly SseEvent[] | null | undefined) =>
  new FixupChain([{ name: 'f', route: 'chat-completions', models: [], fixup }]);
const fault = new Error('hook fault');

describe('relaySse: the head goes out with the first bytes', () => {
  it('a hook failing on the held events before anything was written: fails with nothing written, no head', async () => {
    const { res, log } = client();
    const body = heldBody(['data: a\n\ndata: b\n\n'], ['data: c\n\n']);
    const relayed = relaySse(body, res, {
      onEvent: () => {},
      fixups: fixups(() => {
        throw fault;
      }),
      head: () => log.push('head'),
      flush: () => Buffer.from('held by rewrite'),
    });
    expect(await relayed.catch((error: unknown) => error)).to.equal(fault);
    expect(log).to.deep.equal([]);
    expect(body.aborted).to.equal(true);
  });

  it('a hook failing after dropping the events before it: still nothing written, no head', async () => {
    const { res, log } = client();
    const relayed = relaySse(heldBody(['data: a\n\ndata: b\n\n']), res, {
      onEvent: (event) => {
        if (event.data === 'b') throw fault;
      },
      fixups: fixups(() => null),
      head: () => log.push('head'),
    });
    expect(await relayed.catch((error: unknown) => error)).to.equal(fault);
    expect(log).to.deep.equal([]);
  });

  it('a hook failing on a held event after others were written: the head and those events went out first', async () => {
    const { res, log } = client();
    const relayed = relaySse(heldBody(['data: a\n\ndata: b\n\n']), res, {
      onEvent: () => {},
      fixups: fixups((event) => {
        if (event.data === 'b') throw fault;
        return undefined;
      }),
      head: () => log.push('head'),
    });
    expect(await relayed.catch((error: unknown) => error)).to.equal(fault);
    expect(log).to.deep.equal(['head', 'bytes:data: a\n\n']);
  });

  it('events the fixups hold back: the head still goes out once the held chunks were taken, not when the upstream sends more', async () => {
    const { res, log } = client();
    let headAt = -1;
    let seen = 0;
    const relayed = relaySse(heldBody(['data: a\n\n'], ['data: b\n\n']), res, {
      onEvent: () => (seen += 1),
      fixups: fixups(() => null),
      head: () => {
        headAt = seen;
        log.push('head');
      },
    });
    expect(log).to.deep.equal(['head']);
    expect(headAt).to.equal(1);
    expect(await relayed).to.include({ completed: true });
    expect(log).to.deep.equal(['head']);
  });

  it('a stream that ends with nothing written still gets its head before the end', async () => {
    const { res, log } = client();
    const outcome = await relaySse(heldBody([]), res, { onEvent: () => {}, head: () => log.push('head') });
    expect(outcome.completed).to.equal(true);
    expect(log).to.deep.equal(['head']);
  });
});
