import { expect } from 'chai';
import { readFile } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { request } from 'undici';
import type { UsageRecord } from '../../../src/usage/usage-accounting.ts';
import { eventually } from '../../helpers/eventually.ts';
import { postHead } from '../../helpers/raw-client.ts';
import { ScriptedUpstream } from '../../helpers/scripted-upstream.ts';
import { startTestGateway, TEST_KEY, type TestGateway } from '../../helpers/test-gateway.ts';

/** A client that sends its request and then reads nothing until told to. */
class NonReadingClient {
  private readonly chunks: Buffer[] = [];
  ended = false;

  private constructor(private readonly socket: Socket) {
    socket.on('data', (chunk: Buffer) => this.chunks.push(chunk));
    socket.on('end', () => (this.ended = true));
    socket.on('close', () => (this.ended = true));
    socket.on('error', () => {});
  }

  static async send(url: string, path: string, body: unknown): Promise<NonReadingClient> {
    const { hostname, port } = new URL(url);
    const socket = connect(Number(port), hostname);
    // Paused before it connects, the socket never starts reading: what the gateway sends stays in the
    // kernel's buffers until they are full.
    socket.pause();
    await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    const json = JSON.stringify(body);
    socket.write(postHead(path, TEST_KEY, Buffer.byteLength(json)) + json);
    return new NonReadingClient(socket);
  }

  resume(): void {
    this.socket.resume();
  }

  received(): string {
    return Buffer.concat(this.chunks).toString('latin1');
  }

  destroy(): void {
    this.socket.destroy();
  }
}

function waitForDrain(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}

const sse = (name: string | undefined, data: unknown) =>
  `${name ? `event: ${name}\n` : ''}data: ${JSON.stringify(data)}\n\n`;
const TEXT = 'x'.repeat(16 * 1024);

/** Per streaming route: the request, the opening events, one content event, and the terminal events. */
const STREAMS = [
  {
    route: 'chat-completions',
    path: '/v1/chat/completions',
    body: { model: 'alpha/gen-5.5', stream: true, messages: [{ role: 'user', content: 'a lot' }] },
    opening: '',
    content: sse(undefined, { choices: [{ index: 0, delta: { content: TEXT } }] }),
    end:
      sse(undefined, { choices: [], usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } }) +
      'data: [DONE]\n\n',
  },
  {
    route: 'responses',
    path: '/v1/responses',
    body: { model: 'alpha/gen-5.5', stream: true, input: 'a lot' },
    opening: sse('response.created', { type: 'response.created', response: {} }),
    content: sse('response.output_text.delta', { type: 'response.output_text.delta', delta: TEXT }),
    end: sse('response.completed', {
      type: 'response.completed',
      response: { usage: { input_tokens: 3, output_tokens: 2, total_tokens: 5 } },
    }),
  },
  {
    route: 'messages',
    path: '/v1/messages',
    body: { model: 'beta-opus-4-8', stream: true, max_tokens: 5, messages: [{ role: 'user', content: 'a lot' }] },
    opening: sse('message_start', { type: 'message_start', message: { usage: { input_tokens: 3, output_tokens: 1 } } }),
    content: sse('content_block_delta', {
      type: 'content_block_delta',
      index: 0,
      delta: { type: 'text_delta', text: TEXT },
    }),
    end:
      sse('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 2 } }) +
      sse('message_stop', { type: 'message_stop' }),
  },
] as const;

describe('clients that stop reading (GATEWAY_CLIENT_WRITE_TIMEOUT_MS)', function () {
  this.timeout(60_000);
  let upstream: ScriptedUpstream;
  let test: TestGateway;
  let client: NonReadingClient | undefined;
  let upstreamClosed: number;

  beforeEach(async () => {
    upstream = await ScriptedUpstream.start();
    upstreamClosed = 0;
    test = await startTestGateway({
      env: { GATEWAY_CLIENT_WRITE_TIMEOUT_MS: '1000', ALPHA_BASE_URL: upstream.url, BETA_BASE_URL: upstream.url },
    });
  });
  afterEach(async () => {
    client?.destroy();
    client = undefined;
    await test.close();
    await upstream.close();
  });

  /** Answers a stream that never ends on its own: content events as fast as the gateway takes them. */
  function streamForever(stream: (typeof STREAMS)[number]) {
    upstream.script = async (_req, res) => {
      res.on('close', () => (upstreamClosed += 1));
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(stream.opening);
      while (!res.destroyed) if (!res.write(stream.content)) await waitForDrain(res);
    };
  }

  async function records(): Promise<UsageRecord[]> {
    await test.gateway.flushUsage();
    const text = await readFile(join(test.dataDir, 'usage.jsonl'), 'utf8').catch(() => '');
    return text
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as UsageRecord);
  }

  async function connections(): Promise<number> {
    return new Promise((resolve, reject) =>
      test.gateway.server.getConnections((error, count) => (error ? reject(error) : resolve(count))),
    );
  }

  for (const stream of STREAMS) {
    it(`${stream.route} stream: ended once the client left it unread for the timeout, upstream closed, recorded client_stalled`, async () => {
      streamForever(stream);
      client = await NonReadingClient.send(test.url, stream.path, stream.body);
      await eventually(async () => (await records()).length === 1, 'the stream recorded', 20_000);
      const [record] = await records();
      expect(record).to.deep.include({ route: stream.route, status: 200, stream: true, outcome: 'client_stalled' });
      await eventually(() => upstreamClosed === 1, 'the upstream connection closed', 10_000);
      // The gateway holds nothing for the client any more, though the client never closed.
      await eventually(async () => (await connections()) === 0, 'the client connection closed by the gateway', 10_000);
      client.resume();
      await eventually(() => client!.ended, 'the client to see its stream end', 10_000);
      expect(client.received()).to.match(/^HTTP\/1.1 200 /);
      // Cut: the chunked body never got its last chunk.
      expect(client.received().endsWith('0\r\n\r\n')).to.equal(false);
    });
  }

  /**
   * Reads an answer, looking away for less than the timeout after every MiB: 10 MiB outgrow the socket
   * buffers, so the gateway waits on this reader many times, over longer than the timeout in all.
   */
  async function readInBursts(path: string, body: unknown): Promise<number> {
    const response = await request(`${test.url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    let bytes = 0;
    for await (const chunk of response.body) {
      bytes += (chunk as Buffer).length;
      if (bytes % (1024 * 1024) < (chunk as Buffer).length) await new Promise((resolve) => setTimeout(resolve, 300));
    }
    return bytes;
  }

  it('a stream read in bursts, each pause shorter than the timeout, is relayed whole', async () => {
    const stream = STREAMS[0];
    upstream.script = async (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (let sent = 0; sent < 640; sent++) if (!res.write(stream.content)) await waitForDrain(res);
      res.end(stream.end);
    };
    expect(await readInBursts(stream.path, stream.body)).to.be.greaterThan(640 * TEXT.length);
    await eventually(async () => (await records()).length === 1, 'the stream recorded');
    expect((await records())[0]).to.deep.include({ status: 200, outcome: 'complete' });
  });

  const BIG_TEXT = 'y'.repeat(12 * 1024 * 1024);
  const JSON_ANSWERS = [
    {
      route: 'chat-completions',
      path: '/v1/chat/completions',
      body: { model: 'alpha/gen-5.5', messages: [{ role: 'user', content: 'a lot' }] },
      answer: {
        choices: [{ index: 0, message: { role: 'assistant', content: BIG_TEXT }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 },
      },
    },
    {
      route: 'chat',
      path: '/v1/chat',
      body: { model: 'alpha/gen-5.5', input: 'a lot' },
      answer: {
        output: [{ type: 'message', role: 'assistant', content: [{ type: 'output_text', text: BIG_TEXT }] }],
        usage: { input_tokens: 3, output_tokens: 2, total_tokens: 5 },
      },
    },
  ] as const;

  it('a JSON answer read in bursts, each pause shorter than the timeout, is sent whole', async () => {
    const entry = JSON_ANSWERS[0];
    const answer = JSON.stringify(entry.answer);
    upstream.script = (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(answer);
    expect(await readInBursts(entry.path, entry.body)).to.equal(Buffer.byteLength(answer));
    await eventually(async () => (await records()).length === 1, 'the answer recorded');
    expect((await records())[0]).to.deep.include({ status: 200, outcome: 'complete' });
  });

  for (const entry of JSON_ANSWERS) {
    it(`${entry.path} JSON answer too large for the buffers: ended once the client left it unread for the timeout, recorded client_stalled`, async () => {
      upstream.script = (_req, res) =>
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(entry.answer));
      client = await NonReadingClient.send(test.url, entry.path, entry.body);
      await eventually(async () => (await records()).length === 1, 'the answer recorded', 20_000);
      expect((await records())[0]).to.deep.include({
        route: entry.route,
        status: 200,
        stream: false,
        outcome: 'client_stalled',
      });
      await eventually(async () => (await connections()) === 0, 'the client connection closed by the gateway', 10_000);
      client.resume();
      await eventually(() => client!.ended, 'the client to see its answer end', 10_000);
      expect(client.received().length).to.be.lessThan(BIG_TEXT.length);
    });
  }
});
