import { expect } from 'chai';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { request } from 'undici';
import { EVENTS } from '../../../src/core/diagnostics.ts';
import type { ExchangeRecord, ExchangeView } from '../../../src/core/exchange.ts';
import type { JsonRequestBody } from '../../../src/data-plane/http/json-body.ts';
import { eventually } from '../../helpers/eventually.ts';
import { ScriptedUpstream } from '../../helpers/scripted-upstream.ts';
import { startTestGateway, TEST_KEY, type TestGateway } from '../../helpers/test-gateway.ts';

setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc') as () => void;

const chunk = (delta: object, finish: string | null = null) =>
  `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'delta-4.7', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
const usage = `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'delta-4.7', choices: [], usage: { prompt_tokens: 16000, completion_tokens: 2, total_tokens: 16002 } })}\n\n`;

/** A long chat's request: 64 turns of about 1 KB before the last question. */
const conversation = [
  ...Array.from({ length: 64 }, (_unused, index) => ({
    role: index % 2 === 0 ? 'user' : 'assistant',
    content: `Turn ${index}: ${'the fox weighs what it means at some length; '.repeat(22)}`,
  })),
  { role: 'user', content: 'So what does it mean?' },
];

type WithBody = ExchangeView & { readonly body?: JsonRequestBody };

describe('a long conversation is not held parsed while its answer streams', function () {
  this.timeout(30_000);
  let dir: string;
  let upstream: ScriptedUpstream;
  let test: TestGateway;
  let finish: (() => void) | undefined;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gateway-held-body-'));
    // The cache stage (before the reservation) tells its part while the body is parsed whole.
    await writeFile(join(dir, 'gateway.yaml'), 'cache:\n  ttlSeconds: 60\n');
    upstream = await ScriptedUpstream.start();
    // The first content goes out at once; the rest waits until the test says.
    upstream.script = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(chunk({ role: 'assistant', content: '' }) + chunk({ content: 'It means ' }));
      return new Promise<void>((resolve) => {
        finish = () => {
          res.end(chunk({ content: 'much.' }, 'stop') + usage + 'data: [DONE]\n\n');
          resolve();
        };
      });
    };
    test = await startTestGateway({
      configFile: join(dir, 'gateway.yaml'),
      env: { DELTA_BASE_URL: upstream.url, LOG_LEVEL: 'silent' },
    });
  });

  after(async () => {
    // A failed check leaves the stream open: its upstream ends it, so that the gateway closes at once.
    finish?.();
    await test?.close();
    await upstream?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('keeps the bytes and the scalars once the attempt starts, and lets the messages go while the stream is open', async () => {
    const { source } = test.gateway;
    let messages: WeakRef<object> | undefined;
    let streaming: WithBody | undefined;
    let recorded: ExchangeRecord | undefined;
    const off = [
      EVENTS.cache.subscribe(source, ({ exchange }) => {
        messages = new WeakRef((exchange as WithBody).body!.body.messages as object);
      }),
      EVENTS.streamOpened.subscribe(source, (exchange) => (streaming = exchange as WithBody)),
      EVENTS.exchangeRecorded.subscribe(source, ({ record }) => (recorded = record)),
    ];
    try {
      const body = JSON.stringify({ model: 'delta/delta-4.7', stream: true, messages: conversation });
      const answer = await request(`${test.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' },
        body,
      });
      expect(answer.statusCode).to.equal(200);
      await eventually(() => streaming !== undefined, 'the stream to open');
      // While the answer streams: the scalars the record reads and the very bytes sent, no parsed messages.
      const held = streaming!.body!;
      expect(held.body).to.deep.equal({ model: 'delta/delta-4.7', stream: true });
      expect(held.bytes.toString()).to.equal(body);
      expect(messages).not.to.equal(undefined);
      // Collected in a later turn than the one that made the WeakRef (which keeps its target for that turn).
      await eventually(() => {
        collectGarbage();
        return messages!.deref() === undefined;
      }, 'the parsed messages to be collected while the stream is open');
      finish!();
      const text = await answer.body.text();
      expect(text).to.include('much.').and.to.include('[DONE]');
      await eventually(() => recorded !== undefined, 'the usage record');
      expect(recorded!.outcome).to.equal('complete');
      expect(recorded!.usage).to.include({ inputTokens: 16000, outputTokens: 2 });
    } finally {
      off.forEach((unsubscribe) => unsubscribe());
    }
  });
});
