import { expect } from 'chai';
import type { IncomingMessage } from 'node:http';
import type { WebSocket } from 'ws';
import { sendError } from '../../../src/data-plane/answer-error.ts';
import { rateLimited } from '../../../src/core/gateway-errors.ts';
import { SocketResponse } from '../../../src/data-plane/websocket/socket-response.ts';

/** A socket that keeps what is sent; it takes each message at once unless told to hold them (a client not reading). */
class FakeSocket {
  readonly sent: string[] = [];
  holding = false;
  private held: (() => void)[] = [];

  send(message: string, done?: () => void): void {
    this.sent.push(message);
    if (!done) return;
    if (this.holding) this.held.push(done);
    else setImmediate(done);
  }

  release(): void {
    this.holding = false;
    this.held.splice(0).forEach((done) => done());
  }
}

const REQ = { headers: {} } as IncomingMessage;

function response(socket = new FakeSocket()) {
  let cuts = 0;
  const res = new SocketResponse(REQ, socket as unknown as WebSocket, () => (cuts += 1));
  return { res, socket, cuts: () => cuts };
}

const closed = (res: SocketResponse) =>
  new Promise<void>((resolve) => (res.closed ? resolve() : res.once('close', resolve)));
const event = (type: string, fields: Record<string, unknown> = {}) =>
  `event: ${type}\ndata: ${JSON.stringify({ type, ...fields })}\n\n`;

describe('a response on a WebSocket (SocketResponse)', () => {
  it('sends a stream as one message per event, the data of each, in order, however the bytes were cut', async () => {
    const { res, socket, cuts } = response();
    const created = event('response.created', { response: { id: 'resp_7' } });
    const delta = event('response.output_text.delta', { delta: 'a\nb' });
    const stream = `${created}: keep-alive\n\n${delta}data: [DONE]\n\n`;
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    for (let at = 0; at < stream.length; at += 7) res.write(Buffer.from(stream.slice(at, at + 7)));
    res.end();
    await closed(res);
    expect(socket.sent.map((message) => JSON.parse(message))).to.deep.equal([
      { type: 'response.created', response: { id: 'resp_7' } },
      { type: 'response.output_text.delta', delta: 'a\nb' },
    ]);
    expect(res.responseId).to.equal('resp_7');
    const after = { sent: res.sent, cuts: cuts(), finished: res.writableFinished };
    expect(after).to.deep.equal({ sent: 2, cuts: 0, finished: true });
  });

  it("sends the gateway's error answer as one error event with its status, as the error answer writes it", async () => {
    const { res, socket } = response();
    const message = 'Rate limit exceeded: 100 requests per minute';
    sendError(res, rateLimited(message, { 'Retry-After': '7' }), 'completions-envelope');
    await closed(res);
    expect(socket.sent.map((message) => JSON.parse(message))).to.deep.equal([
      {
        type: 'error',
        status: 429,
        code: 'GW_ERR_RATE_LIMITED',
        message,
        param: null,
        detail: message,
        error: { message, type: 'rate_limit_error', param: null, code: 'GW_ERR_RATE_LIMITED' },
      },
    ]);
    expect(res.getHeader('retry-after')).to.equal('7');
  });

  it("sends an upstream's whole answer as one message: an error with its status, a success as completed", async () => {
    const upstreamError = response();
    upstreamError.res.writeHead(400, { 'content-type': 'application/json' });
    const error = { message: 'bad input', type: 'invalid_request_error', param: 'input', code: 'bad' };
    upstreamError.res.end(Buffer.from(JSON.stringify({ error })));
    const page = response();
    page.res.writeHead(502, { 'content-type': 'text/html' });
    page.res.end(Buffer.from('<html>bad gateway</html>'));
    const whole = response();
    whole.res.writeHead(200, { 'content-type': 'application/json' });
    whole.res.end(Buffer.from('{"id":"resp_1","status":"completed"}'));
    await Promise.all([closed(upstreamError.res), closed(page.res), closed(whole.res)]);
    expect(JSON.parse(upstreamError.socket.sent[0]!)).to.deep.equal({
      type: 'error',
      status: 400,
      code: 'bad',
      message: 'bad input',
      param: 'input',
      error,
    });
    const pageError = JSON.parse(page.socket.sent[0]!);
    expect(pageError).to.deep.include({ type: 'error', status: 502, message: '<html>bad gateway</html>' });
    const completed = '{"type":"response.completed","response":{"id":"resp_1","status":"completed"}}';
    expect(whole.socket.sent).to.deep.equal([completed]);
  });

  it("holds writes while the socket has not taken its messages, as a client's full buffers do", async () => {
    const socket = new FakeSocket();
    socket.holding = true;
    const { res } = response(socket);
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const delta = Buffer.from(event('response.output_text.delta', { delta: 'x'.repeat(8 * 1024) }));
    const accepted = [res.write(delta), res.write(delta), res.write(delta)];
    expect(accepted.at(-1)).to.equal(false);
    const drained = new Promise((resolve) => res.once('drain', resolve));
    socket.release();
    await drained;
    expect(res.writableLength).to.equal(0);
  });

  it('tells of a cut when the gateway ended the answer where it stood; not on a cancel, a leave, an end', async () => {
    const cut = response();
    cut.res.writeHead(200, { 'content-type': 'text/event-stream' });
    cut.res.destroy();
    const cancelled = response();
    cancelled.res.cancel();
    const gone = response();
    gone.res.gone();
    const ended = response();
    ended.res.writeHead(200, { 'content-type': 'text/event-stream' });
    ended.res.end();
    await Promise.all([cut, cancelled, gone, ended].map(({ res }) => closed(res)));
    expect([cut, cancelled, gone, ended].map(({ cuts }) => cuts())).to.deep.equal([1, 0, 0, 0]);
    expect(cancelled.res.cancelled).to.equal(true);
    expect(gone.res.cancelled).to.equal(false);
  });
});
