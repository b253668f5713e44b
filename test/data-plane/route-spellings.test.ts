import { expect } from 'chai';
import { withinOneWindow } from '../helpers/limit-window.ts';
import { request as httpRequest } from 'node:http';
import { MODEL_ROUTES, type ModelRoute } from '../../src/core/route-table.ts';
import { clientRequest } from '../../tools/conformance/route-requests.ts';
import type { RouteId } from '../../src/plugins/plugin-contract.ts';
import { startTestGateway, TEST_KEY, type TestGateway } from '../helpers/test-gateway.ts';

/** A model each route serves in the test gateway's plugins. */
const MODEL: Record<RouteId, string> = {
  'chat-completions': 'alpha-latest',
  responses: 'gen-5.5',
  messages: 'beta-latest',
  'count-tokens': 'beta-latest',
  chat: 'alpha-latest',
};

/**
 * Every spelling of a model path the gateway has always accepted (Express's matching): case, one trailing slash, any
 * query.
 */
function spellings(path: string): string[] {
  const mixed = path.replace(/(^|\/)([a-z])/g, (_match, slash: string, letter: string) => slash + letter.toUpperCase());
  return [
    path,
    `${path}/`,
    path.toUpperCase(),
    mixed,
    `${mixed}/`,
    `${path}?trace=1`,
    `${path}/?a=b&c=d`,
    `${path.toUpperCase()}/?x=`,
  ];
}

interface Answer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly text: string;
}

/** One request through node:http (so a target in absolute form can be sent too). */
function send(
  url: string,
  target: string,
  options: { method?: string; headers?: Record<string, string>; body?: unknown } = {},
): Promise<Answer> {
  const { hostname, port } = new URL(url);
  const payload = options.body === undefined ? undefined : JSON.stringify(options.body);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: hostname,
        port,
        method: options.method ?? 'POST',
        path: target,
        headers: { 'content-type': 'application/json', ...options.headers },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          resolve({ status: res.statusCode!, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

const bearer = { authorization: `Bearer ${TEST_KEY}` };

/**
 * What must be equal between two answers: status, error body (whole), success body (its top-level fields), and the
 * headers the way in sets.
 */
function comparable(answer: Answer): unknown {
  const body = answer.text === '' ? undefined : (JSON.parse(answer.text) as Record<string, unknown>);
  return {
    status: answer.status,
    body: answer.status < 400 ? Object.keys(body ?? {}).sort() : body,
    contentType: answer.headers['content-type'],
    allow: answer.headers.allow,
    nosniff: answer.headers['x-content-type-options'],
    requestId: typeof answer.headers['x-request-id'],
    rateLimit: typeof answer.headers.ratelimit,
    rateLimitPolicy: answer.headers['ratelimit-policy'],
    wwwAuthenticate: answer.headers['www-authenticate'],
  };
}

describe('every model route in every accepted spelling', function () {
  this.timeout(60_000);
  let test: TestGateway;

  before(async () => {
    test = await startTestGateway({ env: { RATE_LIMIT_MAX: '100000', GATEWAY_AUTH_FAILURES_PER_MINUTE: '100000' } });
  });
  after(async () => test.close());

  const cases = (route: ModelRoute) => ({
    'authenticated, valid': { headers: bearer, body: clientRequest(route.id, MODEL[route.id], false) },
    'authenticated, invalid body': { headers: bearer, body: {} },
    'authenticated, body not JSON': { headers: bearer, body: 'not an object' },
    'no key': { headers: {}, body: clientRequest(route.id, MODEL[route.id], false) },
    'unknown key': { headers: { authorization: 'Bearer sk-not-a-known-key-0000000000000000000' }, body: {} },
    'x-api-key only': { headers: { 'x-api-key': TEST_KEY }, body: clientRequest(route.id, MODEL[route.id], false) },
    'wrong method (GET)': { method: 'GET', headers: bearer, body: undefined },
    'wrong method (PUT)': { method: 'PUT', headers: {}, body: {} },
  });

  for (const route of MODEL_ROUTES) {
    it(`${route.path}: the same answer as the canonical path, authenticated or not`, async () => {
      for (const [name, options] of Object.entries(cases(route))) {
        const canonical = comparable(await send(test.url, route.path, options));
        for (const spelling of spellings(route.path).slice(1)) {
          expect(comparable(await send(test.url, spelling, options)), `${name}: ${spelling}`).to.deep.equal(canonical);
        }
        // A request target in absolute form names the same path (Express read it so too).
        expect(
          comparable(await send(test.url, `${test.url}${route.path}`, options)),
          `${name}: absolute form`,
        ).to.deep.equal(canonical);
      }
    });
  }

  it('answers the canonical paths as the API always did: 200, 401 in the envelope of the route, 405 naming POST', async () => {
    for (const route of MODEL_ROUTES) {
      const ok = await send(test.url, route.path, {
        headers: bearer,
        body: clientRequest(route.id, MODEL[route.id], false),
      });
      expect(ok.status, route.path).to.equal(200);
      const refused = await send(test.url, route.path, { body: {} });
      expect(refused.status).to.equal(401);
      const body = JSON.parse(refused.text) as Record<string, unknown>;
      expect(body.detail).to.be.a('string');
      if (route.family === 'messages-envelope') expect(body.type).to.equal('error');
      if (route.family === 'completions-envelope') expect(body.error).to.have.property('type', 'authentication_error');
      if (route.family === 'plain') expect(Object.keys(body)).to.deep.equal(['detail']);
      const wrong = await send(test.url, route.path, { method: 'GET', headers: bearer });
      expect(wrong.status).to.equal(405);
      expect(wrong.headers.allow).to.equal('POST');
      expect((JSON.parse(wrong.text) as { detail: string }).detail).to.equal(
        `Method GET is not allowed on ${route.path}; use POST`,
      );
      expect(
        (
          await send(test.url, route.path, {
            headers: { 'x-api-key': TEST_KEY },
            body: clientRequest(route.id, MODEL[route.id], false),
          })
        ).status,
      ).to.equal(route.keyHeaders.includes('x-api-key') ? 200 : 401);
    }
  });

  it('leaves other spellings to the control plane: 404 (two trailing slashes, escapes, a doubled slash, a longer path)', async () => {
    for (const route of MODEL_ROUTES) {
      for (const target of [
        `${route.path}//`,
        `${route.path.replace('v1', 'v%31')}`,
        `/${route.path}`,
        `${route.path}/x`,
        `${route.path}x`,
      ]) {
        const answer = await send(test.url, target, {
          headers: bearer,
          body: clientRequest(route.id, MODEL[route.id], false),
        });
        expect(answer.status, target).to.equal(404);
      }
    }
  });

  it('lets nothing without a valid key reach a route, in any spelling', async () => {
    const before = test.allRequests().length;
    for (const route of MODEL_ROUTES) {
      for (const spelling of spellings(route.path)) {
        for (const headers of [
          {},
          { authorization: 'Bearer sk-not-a-known-key-0000000000000000000' },
          { authorization: 'Basic abc' },
        ] as Record<string, string>[]) {
          expect(
            (await send(test.url, spelling, { headers, body: clientRequest(route.id, MODEL[route.id], false) })).status,
            spelling,
          ).to.equal(401);
        }
      }
    }
    expect(test.allRequests().length).to.equal(before);
  });
});

describe('the rate limit on every spelling of the model routes', function () {
  this.timeout(60_000);
  let test: TestGateway;

  before(async () => {
    test = await startTestGateway({ env: { RATE_LIMIT_MAX: '12' } });
  });
  after(async () => test.close());

  it('counts every spelling against the one per-key limit, and refuses every spelling past it before any upstream is asked', async () => {
    const targets = MODEL_ROUTES.flatMap((route) => spellings(route.path).map((spelling) => ({ route, spelling })));
    await withinOneWindow(20_000);
    for (const { route, spelling } of targets.slice(0, 12)) {
      const answer = await send(test.url, spelling, {
        headers: bearer,
        body: clientRequest(route.id, MODEL[route.id], false),
      });
      expect(answer.status, spelling).to.equal(200);
      expect(answer.headers.ratelimit).to.match(/^"12-in-1min"; r=\d+; t=\d+$/);
    }
    const upstreamCalls = test.allRequests().length;
    for (const { route, spelling } of targets) {
      const refused = await send(test.url, spelling, {
        headers: bearer,
        body: clientRequest(route.id, MODEL[route.id], false),
      });
      expect(refused.status, spelling).to.equal(429);
      expect(refused.headers.ratelimit).to.match(/; r=0; t=\d+$/);
      expect(Number(refused.headers['retry-after'])).to.be.within(1, 60);
      expect((JSON.parse(refused.text) as { detail: string }).detail).to.equal('Rate limit exceeded: 12 per 1 minute');
    }
    expect(test.allRequests().length).to.equal(upstreamCalls);
  });
});
