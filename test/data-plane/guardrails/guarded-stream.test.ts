import { expect } from 'chai';
import {
  GuardedBody,
  isGuardrailStreamBlock,
  GuardrailRun,
  type GuardrailActed,
} from '../../../src/data-plane/guardrails/guardrail-run.ts';
import type { BodySink } from '../../../src/data-plane/sse/upstream-body.ts';
import { SseSplitter } from '../../../src/data-plane/sse/sse-relay.ts';
import { WIRE_FORMATS } from '../../../src/core/formats/index.ts';
import { buildGuardrailSet } from '../../../src/guardrails/guardrail-set.ts';
import type { GuardrailSettings } from '../../../src/guardrails/guardrail-settings.ts';
import type { WebhookPost } from '../../../src/guardrails/webhook-guardrail.ts';

/** An upstream body the test pushes by hand, noting pauses and aborts. */
class FakeBody {
  sink: BodySink | undefined;
  paused = false;
  aborted = false;
  attach(sink: BodySink) {
    this.sink = sink;
  }
  pause() {
    this.paused = true;
  }
  resume() {
    this.paused = false;
  }
  abort() {
    this.aborted = true;
  }
}

const chunk = (content: string | undefined, finish: string | null = null) =>
  `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', choices: [{ index: 0, delta: content === undefined ? {} : { content }, finish_reason: finish }] })}\n\n`;

/** A guarded body over a fake upstream, with what reached the relay's side. */
function guarded(
  settings: GuardrailSettings[],
  post?: WebhookPost,
  maxEventBytes = 1024 * 1024,
  tapped: string[] = [],
) {
  const set = buildGuardrailSet(settings, [], post)!;
  const acted: GuardrailActed[] = [];
  const run = new GuardrailRun(
    set.select(undefined)!,
    WIRE_FORMATS['chat-completions'],
    { route: 'chat-completions', model: 'alpha/gen-5.5', requestId: 'r1' },
    (event) => acted.push(event),
  );
  const inner = new FakeBody();
  const body = new GuardedBody(inner, run, run.selection.response!, maxEventBytes, {
    tap: (event) => tapped.push(event.data),
  });
  const seen = { bytes: [] as Buffer[], ended: false, error: undefined as unknown };
  body.attach({
    data: (bytes) => seen.bytes.push(Buffer.from(bytes)),
    end: () => (seen.ended = true),
    error: (error) => (seen.error = error),
  });
  const text = () => Buffer.concat(seen.bytes).toString('utf8');
  const contents = () =>
    new SseSplitter()
      .push(Buffer.concat(seen.bytes))
      .map((block) => block.event?.data ?? '')
      .filter((data) => data.startsWith('{'))
      .map(
        (data) => (JSON.parse(data) as { choices: { delta: { content?: string } }[] }).choices[0]?.delta.content ?? '',
      )
      .join('');
  return { inner, body, seen, text, contents, acted, run };
}

const codes: GuardrailSettings = {
  name: 'no-codes',
  use: 'regex',
  on: 'response',
  action: 'block',
  patterns: ['PROJECT-[0-9]{4}'],
  ignoreCase: false,
};
const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('data plane: a stream body behind response guardrails', () => {
  it('hands on whole events as their own bytes, however the upstream cut them, and the cut-off rest at the end', async () => {
    const { inner, seen, text } = guarded([codes]);
    const stream = chunk('Hello there, ') + chunk('nothing to see.') + chunk(undefined, 'stop') + 'data: [DONE]\n\n';
    for (let at = 0; at < stream.length; at += 7) inner.sink!.data(Buffer.from(stream.slice(at, at + 7)));
    inner.sink!.data(Buffer.from('data: {"cut'));
    inner.sink!.end();
    expect(text()).to.equal(`${stream}data: {"cut`);
    expect(seen.ended).to.equal(true);
  });

  it('judges what it holds when the upstream breaks off, lets it out (or blocks it), then passes the break on', () => {
    const clean = guarded([codes]);
    clean.inner.sink!.data(Buffer.from(chunk('short')));
    expect(clean.text()).to.equal('');
    const broke = new Error('socket hang up');
    clean.inner.sink!.error(broke);
    expect(clean.contents()).to.equal('short');
    expect(clean.seen.error).to.equal(broke);

    const dirty = guarded([codes]);
    dirty.inner.sink!.data(Buffer.from(chunk('PROJECT-12') + chunk('34')));
    dirty.inner.sink!.error(broke);
    expect(isGuardrailStreamBlock(dirty.seen.error)).to.equal(true);
    expect(dirty.contents()).to.equal('');
    expect(dirty.inner.aborted).to.equal(true);
    expect(dirty.acted).to.deep.include({
      guardrail: 'no-codes',
      phase: 'response',
      action: 'block',
      cause: 'finding',
      route: 'chat-completions',
      model: 'alpha/gen-5.5',
      requestId: 'r1',
      keyId: undefined,
      team: undefined,
    });
  });

  it('lets the events before a finding out, then fails with the block, and drops the upstream (what it held tapped as it came, for the estimate)', () => {
    const tapped: string[] = [];
    const { inner, seen, contents } = guarded([codes], undefined, undefined, tapped);
    inner.sink!.data(
      Buffer.from(
        chunk('A long harmless opening sentence, ') +
          chunk('and then PROJECT-') +
          chunk('1234 and more text after it.'),
      ),
    );
    expect(contents()).to.equal('A long harmless opening sentence, ');
    expect(isGuardrailStreamBlock(seen.error)).to.equal(true);
    expect((seen.error as { refusal: { code: string; status: number } }).refusal).to.include({
      code: 'GW_ERR_GUARDRAIL',
      status: 400,
    });
    expect(inner.aborted).to.equal(true);
    const deltas = tapped.map(
      (data) => (JSON.parse(data) as { choices: { delta: { content: string } }[] }).choices[0]!.delta.content,
    );
    expect(deltas).to.deep.equal([
      'A long harmless opening sentence, ',
      'and then PROJECT-',
      '1234 and more text after it.',
    ]);
    inner.sink!.data(Buffer.from(chunk('late')));
    expect(contents()).to.equal('A long harmless opening sentence, ');
  });

  it('hands an event over the cap on as one the relay refuses, after judging what it held', () => {
    const { inner, seen } = guarded([codes], undefined, 256);
    inner.sink!.data(Buffer.from(chunk('fine')));
    inner.sink!.data(Buffer.from(`data: ${'x'.repeat(300)}`));
    const last = seen.bytes.at(-1)!;
    expect(last.length).to.equal(257);
    const splitter = new SseSplitter(256);
    splitter.push(Buffer.concat(seen.bytes));
    expect(splitter.oversized).to.equal(true);
    expect(inner.aborted).to.equal(true);
  });

  it('asks a webhook about each released batch, with what the channel delivered before, pausing the upstream meanwhile', async () => {
    const asked: { texts: string[]; context: { preceding?: string[]; stream: boolean } }[] = [];
    let answer: (value: { status: number; body: string }) => void = () => {};
    const post: WebhookPost = (_url, body) => {
      asked.push(JSON.parse(body) as (typeof asked)[number]);
      return new Promise((resolve) => (answer = resolve));
    };
    const { inner, body, seen, contents } = guarded(
      [
        {
          name: 'hook',
          use: 'webhook',
          on: 'response',
          url: 'http://hook.example/x',
          timeoutMs: 1000,
          failMode: 'closed',
          headers: {},
        },
      ],
      post,
    );
    inner.sink!.data(Buffer.from(chunk('first part, ')));
    await tick();
    expect(asked).to.have.length(1);
    expect(asked[0]!.texts).to.deep.equal(['first part, ']);
    expect(inner.paused).to.equal(true);
    // The relay's own pause and resume while the webhook is asked leave the body paused.
    body.pause();
    body.resume();
    expect(inner.paused).to.equal(true);
    inner.sink!.data(Buffer.from(chunk('second part')));
    inner.sink!.end();
    expect(seen.bytes).to.have.length(0);
    answer({ status: 200, body: '{"action":"allow"}' });
    await tick();
    await tick();
    expect(asked).to.have.length(2);
    expect(asked[1]).to.deep.include({ texts: ['second part'] });
    expect(asked[1]!.context).to.deep.include({ stream: true, preceding: ['first part, '] });
    answer({ status: 200, body: '{"action":"rewrite","texts":["SECOND PART"]}' });
    await tick();
    await tick();
    expect(contents()).to.equal('first part, SECOND PART');
    expect(seen.ended).to.equal(true);
  });
});
