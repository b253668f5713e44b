import { connect } from 'node:net';
import { expect } from 'chai';
import { request } from 'undici';
import { startTestGateway, TEST_KEY, type TestGateway } from '../../helpers/test-gateway.ts';

const TEXT = 'café 漢字 😀 \u2028 ﷽';

// Each model route with a valid body holding TEXT, the upstream it reaches, and where its error message sits.
const ROUTES = [
  {
    path: '/v1/chat/completions',
    vendor: 'gamma',
    body: { model: 'gamma/gamma-3.8-flash', messages: [{ role: 'user', content: TEXT }] },
    message: (body: any) => body.error.message,
  },
  {
    path: '/v1/messages',
    vendor: 'beta',
    body: { model: 'beta-latest', max_tokens: 16, messages: [{ role: 'user', content: TEXT }] },
    message: (body: any) => body.error.message,
  },
  {
    path: '/v1/messages/count_tokens',
    vendor: 'beta',
    body: { model: 'beta-latest', messages: [{ role: 'user', content: TEXT }] },
    message: (body: any) => body.error.message,
  },
  {
    path: '/v1/responses',
    vendor: 'alpha',
    body: { model: 'alpha-latest', input: TEXT },
    message: (body: any) => body.error.message,
  },
  {
    path: '/v1/chat',
    vendor: 'alpha',
    body: { model: 'alpha-latest', input: TEXT },
    message: (body: any) => body.errors.join('; '),
  },
] as const;

async function post(url: string, path: string, body: Buffer) {
  const response = await request(`${url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' },
    body,
  });
  const text = await response.body.text();
  return { status: response.statusCode, text, json: () => JSON.parse(text) as any };
}

/** One request written as raw bytes (so that a header may repeat); the status and body of the answer. */
async function rawRequest(url: string, head: string, body = ''): Promise<{ status: number; body: any }> {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  // Written without a FIN, which the gateway would take for a client that left; it closes after answering.
  socket.write(`${head}Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  const chunks: Buffer[] = [];
  for await (const chunk of socket) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1]);
  // The errors are sent with a Content-Length, so their body is the rest as it is.
  return { status, body: status === 200 ? undefined : JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) };
}

describe('bytes the gateway did not read never reach the upstream', function () {
  this.timeout(30_000);
  let test: TestGateway;

  before(async () => {
    test = await startTestGateway();
  });
  beforeEach(() => {
    for (const upstream of Object.values(test.upstreams)) upstream.reset();
  });
  after(async () => test.close());

  for (const route of ROUTES) {
    describe(route.path, () => {
      it("answers 400 Field 'body': not valid UTF-8 in the route's envelope, for a bad byte in a member name, forwarding nothing", async () => {
        // `{"model\xff":"…","model":"<valid>",…}`: before, accepted and forwarded with the 0xFF byte.
        const valid = JSON.stringify(route.body);
        const bytes = Buffer.concat([
          Buffer.from('{"model'),
          Buffer.from([0xff]),
          Buffer.from(`":"unread",${valid.slice(1)}`),
        ]);
        const response = await post(test.url, route.path, bytes);
        expect(response.status, response.text).to.equal(400);
        expect(response.json().errors).to.deep.equal(["Field 'body': not valid UTF-8"]);
        expect(route.message(response.json())).to.contain("Field 'body': not valid UTF-8");
        expect(test.allRequests()).to.have.length(0);
      });

      it('answers 400 to more than one Host header, forwarding nothing', async () => {
        const body = JSON.stringify(route.body);
        const head = (hosts: string[]) =>
          `POST ${route.path} HTTP/1.1\r\n${hosts.map((host) => `Host: ${host}\r\n`).join('')}Authorization: Bearer ${TEST_KEY}\r\nContent-Type: application/json\r\n`;
        const refused = await rawRequest(test.url, head(['127.0.0.1', 'upstream.example']), body);
        expect(refused.status).to.equal(400);
        expect(refused.body.detail).to.equal('The request has more than one Host header');
        if (route.path !== '/v1/chat')
          expect(route.message(refused.body)).to.equal('The request has more than one Host header');
        expect(test.allRequests()).to.have.length(0);
        expect((await rawRequest(test.url, head(['127.0.0.1']), body)).status).to.equal(200);
      });

      it('passes valid multi-byte UTF-8 on byte for byte', async () => {
        const response = await post(test.url, route.path, Buffer.from(JSON.stringify(route.body)));
        expect(response.status, response.text).to.equal(200);
        const forwarded = test.upstreams[route.vendor].requests;
        expect(forwarded).to.have.length(1);
        expect(forwarded[0]!.rawBytes.includes(Buffer.from(JSON.stringify(TEXT)))).to.equal(
          true,
          forwarded[0]!.rawBody,
        );
      });
    });
  }

  it('refuses every kind of malformed UTF-8, in values too', async () => {
    const malformed = [
      [0x80], // a continuation byte alone
      [0xe6, 0xbc], // a three-byte sequence cut short
      [0xc0, 0xaf], // an overlong '/'
      [0xed, 0xa0, 0x80], // a UTF-16 surrogate encoded as UTF-8
      [0xf4, 0x90, 0x80, 0x80], // past U+10FFFF
    ];
    for (const bad of malformed) {
      const bytes = Buffer.concat([
        Buffer.from('{"model":"gamma/gamma-3.8-flash","messages":[{"role":"user","content":"a'),
        Buffer.from(bad),
        Buffer.from('b"}]}'),
      ]);
      const response = await post(test.url, '/v1/chat/completions', bytes);
      expect(response.status, `${Buffer.from(bad).toString('hex')}: ${response.text}`).to.equal(400);
      expect(response.json().error.message).to.equal("Invalid input parameters: Field 'body': not valid UTF-8");
    }
    expect(test.allRequests()).to.have.length(0);
  });

  it('answers 400 to more than one Host header on the routes Express serves too', async () => {
    const refused = await rawRequest(
      test.url,
      'GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nhost: upstream.example\r\n',
    );
    expect(refused).to.deep.equal({ status: 400, body: { detail: 'The request has more than one Host header' } });
    expect((await rawRequest(test.url, 'GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n')).status).to.equal(200);
  });
});
