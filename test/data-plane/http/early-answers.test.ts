import { expect } from 'chai';
import type { IncomingMessage } from 'node:http';
import { startTestGateway, TEST_KEY, type TestGateway } from '../../helpers/test-gateway.ts';
import { runUploads, type UploadOutcome } from '../../helpers/upload-client.ts';

const BODY_BYTES = 64 * 1024 * 1024;
const RUNS = 4;
const LIMIT_TEXT = `Request body is larger than the limit of ${10 * 1024 * 1024} bytes`;

/** The Chat Completions error envelope (what the SDK reads) beside the gateway's `detail`. */
const envelope = (message: string, type: string, code: string) => ({ detail: message, error: { message, type, param: null, code } });

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
      const outcomes = await runUploads({ client: 'http', url: gateway.url, key: TEST_KEY, bytes: BODY_BYTES, chunked, runs: RUNS });
      expect(outcomes).to.deep.equal(Array<UploadOutcome>(RUNS).fill({ status: 413, body: envelope(LIMIT_TEXT, 'invalid_request_error', 'GW_ERR_PAYLOAD_TOO_LARGE') }));
      expect(requests).to.equal(RUNS);
    });

    it(`gives the openai SDK an APIError 413 on a 64 MiB upload (${framing}), with one request per call`, async () => {
      const outcomes = await runUploads({ client: 'openai', url: gateway.url, key: TEST_KEY, bytes: BODY_BYTES, chunked, runs: RUNS });
      for (const outcome of outcomes) {
        expect(outcome).to.deep.include({ errorClass: 'APIError', apiError: true, status: 413 });
        expect(outcome.body).to.deep.include({ message: LIMIT_TEXT, type: 'invalid_request_error', code: 'GW_ERR_PAYLOAD_TOO_LARGE' });
      }
      expect(outcomes).to.have.length(RUNS);
      // A connection error would have been retried (maxRetries 2), reaching the gateway again.
      expect(requests).to.equal(RUNS);
    });
  }

  it('answers a bad key on a 64 MiB upload with a 401 the client reads (raw client and SDK)', async () => {
    const key = 'sk-not-a-known-key-0001';
    const raw = await runUploads({ client: 'http', url: gateway.url, key, bytes: BODY_BYTES, chunked: false, runs: RUNS });
    expect(raw).to.deep.equal(Array<UploadOutcome>(RUNS).fill({ status: 401, body: envelope('Invalid API key', 'authentication_error', 'GW_ERR_UNAUTHENTICATED') }));
    const sdk = await runUploads({ client: 'openai', url: gateway.url, key, bytes: BODY_BYTES, chunked: false, runs: RUNS });
    for (const outcome of sdk) expect(outcome).to.deep.include({ errorClass: 'AuthenticationError', apiError: true, status: 401 });
    expect(requests).to.equal(2 * RUNS);
  });
});
