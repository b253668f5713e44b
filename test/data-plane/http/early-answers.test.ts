import { expect } from 'chai';
import type { IncomingMessage } from 'node:http';
import { connect } from 'node:net';
import { startTestGateway, TEST_KEY, type TestGateway } from '../../helpers/test-gateway.ts';
import { runUploads, type UploadOutcome } from '../../helpers/upload-client.ts';

const BODY_BYTES = 64 * 1024 * 1024;
const RUNS = 4;
const LIMIT_TEXT = `Request body is larger than the limit of ${10 * 1024 * 1024} bytes`;

/** The Chat Completions error envelope (what the SDK reads) beside the gateway's `detail`. */
const envelope = (message: string, type: string, code: string) => ({
  detail: message,
  error: { message, type, param: null, code },
});

describe('early answers on large uploads (lingering close)', function () {
  // Each run moves tens of MiB through loopback and a child process; a bound, not a speed check.
  this.timeout(180_000);
  let gateway: TestGateway;
  let requests = 0;

  before(async () => {
    gateway = await startTestGateway();
    gateway.gateway.server.on('request', (req: IncomingMessage) => {
      if (req.url === '/v1/chat/completions') requests += 1;
    });
  });
  after(() => gateway.close());
  beforeEach(() => {
    requests = 0;
  });

  for (const chunked of [false, true]) {
    const framing = chunked ? 'chunked, without Content-Length' : 'with Content-Length';

    it(`answers a raw node:http client's 64 MiB upload (${framing}) with a 413 it reads, every time`, async () => {
      const outcomes = await runUploads({
        client: 'http',
        url: gateway.url,
        key: TEST_KEY,
        bytes: BODY_BYTES,
        chunked,
        runs: RUNS,
      });
      expect(outcomes).to.deep.equal(
        Array<UploadOutcome>(RUNS).fill({
          status: 413,
          body: envelope(LIMIT_TEXT, 'invalid_request_error', 'GW_ERR_PAYLOAD_TOO_LARGE'),
        }),
      );
      expect(requests).to.equal(RUNS);
    });

    it(`gives the openai SDK an APIError 413 on a 64 MiB upload (${framing}), with one request per call`, async () => {
      const outcomes = await runUploads({
        client: 'openai',
        url: gateway.url,
        key: TEST_KEY,
        bytes: BODY_BYTES,
        chunked,
        runs: RUNS,
      });
      for (const outcome of outcomes) {
        expect(outcome).to.deep.include({ errorClass: 'APIError', apiError: true, status: 413 });
        expect(outcome.body).to.deep.include({
          message: LIMIT_TEXT,
          type: 'invalid_request_error',
          code: 'GW_ERR_PAYLOAD_TOO_LARGE',
        });
      }
      expect(outcomes).to.have.length(RUNS);
      // A connection error would have been retried (maxRetries 2), reaching the gateway again.
      expect(requests).to.equal(RUNS);
    });
  }

  it('keeps the answer readable for a client that sends past the linger bound before it reads: reading stops, no reset', async () => {
    // The client writes 1 MiB pieces without reading, until the gateway stops taking them (no 'drain'
    // within 500 ms), then reads. Reading stops past twice the body limit (20 MiB): the client's sending
    // stalls, and its answer waits for it. A reset there would have thrown the unread 413 away.
    const { port } = new URL(gateway.url);
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(port), '127.0.0.1');
      let text = '';
      socket.on('error', reject);
      socket.pause();
      socket.once('connect', async () => {
        socket.write(
          `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TEST_KEY}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`,
        );
        const piece = Buffer.concat([
          Buffer.from(`${(1024 * 1024).toString(16)}\r\n`),
          Buffer.alloc(1024 * 1024, 0x20),
          Buffer.from('\r\n'),
        ]);
        for (let sent = 0; sent < BODY_BYTES; sent += piece.length) {
          if (socket.write(piece)) continue;
          const drained = await Promise.race([
            new Promise<boolean>((done) => socket.once('drain', () => done(true))),
            new Promise<boolean>((done) => setTimeout(() => done(false), 500)),
          ]);
          if (!drained) break;
        }
        socket.on('data', (chunk: Buffer) => (text += chunk.toString()));
        socket.once('end', () => {
          resolve(text);
          socket.destroy();
        });
        socket.resume();
      });
    });
    expect(answer).to.match(/^HTTP\/1\.1 413 /);
    expect(answer).to.contain('GW_ERR_PAYLOAD_TOO_LARGE');
  });

  it('answers a bad key on a 64 MiB upload with a 401 the client reads (raw client and SDK)', async () => {
    const key = 'sk-not-a-known-key-0001';
    const raw = await runUploads({
      client: 'http',
      url: gateway.url,
      key,
      bytes: BODY_BYTES,
      chunked: false,
      runs: RUNS,
    });
    expect(raw).to.deep.equal(
      Array<UploadOutcome>(RUNS).fill({
        status: 401,
        body: envelope('Invalid API key', 'authentication_error', 'GW_ERR_UNAUTHENTICATED'),
      }),
    );
    const sdk = await runUploads({
      client: 'openai',
      url: gateway.url,
      key,
      bytes: BODY_BYTES,
      chunked: false,
      runs: RUNS,
    });
    for (const outcome of sdk)
      expect(outcome).to.deep.include({ errorClass: 'AuthenticationError', apiError: true, status: 401 });
    expect(requests).to.equal(2 * RUNS);
  });
});
