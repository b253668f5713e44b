import { expect } from 'chai';
import { createServer, type Server, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  createAuthenticator,
  type KeyAuthenticator,
  authenticate as authenticateStage,
} from '../../src/data-plane/pipeline/authenticate.ts';
import type { KeyStore } from '../../src/stores/keys/key-store.ts';
import type { Logger } from 'pino';
import { createDataPlane, createWayIn } from '../../src/data-plane/data-plane.ts';
import { upstreamTimeout } from '../../src/core/gateway-errors.ts';
import { createRateLimiters, type KeyRateLimit, admit } from '../../src/data-plane/pipeline/admit.ts';
import type { RouteId } from '../../src/plugins/plugin-contract.ts';
import { type Exchange, pipeline, type Next, type Stage } from '../../src/data-plane/pipeline/exchange.ts';
import { captureLogs } from './pipeline/guarded-app.ts';

const KEY = 'sk-dispatcher-test-key-0001-0123456789abcdef';
const emptyStore = { findByHash: async () => undefined } as Partial<KeyStore> as KeyStore;

type ModelHandler = (req: IncomingMessage, res: ServerResponse, exchange: Exchange) => Promise<void> | void;

interface WayInTestOptions {
  readonly handlers: Partial<Record<RouteId, ModelHandler>>;
  readonly authenticate?: Pick<KeyAuthenticator, 'check'>;
  readonly rateLimit?: Pick<KeyRateLimit, 'count'>;
  readonly logger: Logger;
}

/**
 * The way in over a data plane whose routes authenticate, admit and then run these handlers as their
 * last stage, everything else answered 299 `not dispatched` by a stand-in control plane.
 */
function wayIn(options: WayInTestOptions) {
  const routes = new Map<RouteId, Next>();
  for (const [route, handler] of Object.entries(options.handlers) as [RouteId, ModelHandler][]) {
    const stages: Stage[] = [
      ...(options.authenticate ? [authenticateStage(options.authenticate)] : []),
      ...(options.rateLimit ? [admit({ rateLimit: options.rateLimit })] : []),
      // The way in's exchanges answer on the HTTP response itself.
      async (exchange) => handler(exchange.req, exchange.res as ServerResponse, exchange),
    ];
    routes.set(route, pipeline(stages));
  }
  const dataPlane = createDataPlane({ routes: { current: routes }, logger: options.logger });
  return createWayIn({
    source: {},
    dataPlane,
    control: (_req, res) => void res.writeHead(299, { 'content-type': 'text/plain' }).end('not dispatched'),
  });
}

describe('the way in: the data plane', () => {
  let server: Server;
  let url: string;
  const logs = captureLogs();
  const limiters = createRateLimiters({ max: 2 });
  const handlers: WayInTestOptions['handlers'] = {
    'chat-completions': (_req, res, context) =>
      void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ caller: context.caller })),
    messages: () => {
      throw upstreamTimeout('vendor');
    },
    responses: async (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      await new Promise((resolve) => res.write('data: one\n\n', resolve));
      throw new Error('broke after the first event');
    },
    chat: async () => {
      throw new Error('secret internals');
    },
  };
  const dispatch = wayIn({
    handlers,
    authenticate: createAuthenticator({ store: emptyStore, staticKeys: [KEY] }),
    rateLimit: limiters.perKey,
    logger: logs.logger,
  });

  before(async () => {
    server = createServer(dispatch);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const post = (path: string, key = KEY, method = 'POST') =>
    fetch(`${url}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}` },
      body: method === 'POST' ? '{}' : undefined,
    });

  it('takes every method on the model paths in every accepted spelling (any query), and leaves every other path to the control plane', async () => {
    expect((await post('/v1/chat/completions?trace=1')).status).to.equal(200);
    const limited = createRateLimiters({ max: 1000 });
    const other = createServer(wayIn({ handlers, rateLimit: limited.perKey, logger: logs.logger }));
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    const send = (path: string, method = 'POST') =>
      fetch(`http://127.0.0.1:${(other.address() as AddressInfo).port}${path}`, {
        method,
        body: method === 'POST' ? '{}' : undefined,
      });
    try {
      for (const path of ['/v1/chat/completions/', '/V1/Chat/Completions', '/v1/chat/completions/?x=1'])
        expect((await send(path)).status, path).to.equal(200);
      const wrongMethod = await send('/v1/chat/completions', 'GET');
      expect(wrongMethod.status).to.equal(405);
      expect(wrongMethod.headers.get('allow')).to.equal('POST');
      for (const [path, method] of [
        ['/v1/chat/completions//', 'POST'],
        ['/v1/chat/completion', 'POST'],
        ['/v1/count_tokens', 'POST'],
        ['/v1/models', 'POST'],
        ['/v1/messages/count_tokens', 'POST'],
      ] as const) {
        const answer = await send(path, method);
        expect(answer.status, `${method} ${path}`).to.equal(299);
        expect(await answer.text()).to.equal('not dispatched');
      }
    } finally {
      other.closeAllConnections();
      await new Promise((resolve) => other.close(resolve));
    }
  });

  it('gives the handler the authenticated caller in its context, with the RateLimit headers set', async () => {
    const answer = await post('/v1/chat/completions');
    expect(((await answer.json()) as { caller: { id: string } }).caller.id).to.match(/^static_/);
    expect(answer.headers.get('ratelimit')).to.match(/^"2-in-1min"; r=\d; t=\d+$/);
    expect(answer.headers.get('ratelimit-policy')).to.match(/^"2-in-1min"; q=2; w=60; pk=:[A-Za-z0-9+/=]+:$/);
  });

  it('answers a refused key in the envelope of the route, before the handler runs', async () => {
    const answer = await post('/v1/messages', 'sk-not-a-known-key-000');
    expect(answer.status).to.equal(401);
    expect(await answer.json()).to.deep.equal({
      detail: 'Invalid API key',
      type: 'error',
      error: { type: 'authentication_error', message: 'Invalid API key' },
    });
  });

  it("answers a handler's gateway error in the route's envelope, and anything else with a generic 500 that is logged", async () => {
    const limited = createRateLimiters({ max: 1000 });
    const other = createServer(wayIn({ handlers, rateLimit: limited.perKey, logger: logs.logger }));
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    const otherUrl = `http://127.0.0.1:${(other.address() as AddressInfo).port}`;
    try {
      const failed = await fetch(`${otherUrl}/v1/messages`, { method: 'POST', body: '{}' });
      expect(failed.status).to.equal(504);
      expect(((await failed.json()) as { type: string }).type).to.equal('error');
      const internal = await fetch(`${otherUrl}/v1/chat`, { method: 'POST', body: '{}' });
      expect(internal.status).to.equal(500);
      const text = await internal.text();
      expect(text).not.to.contain('secret internals');
      expect(JSON.parse(text)).to.have.property('detail');
      expect(logs.text()).to.contain('secret internals');
    } finally {
      other.closeAllConnections();
      await new Promise((resolve) => other.close(resolve));
    }
  });

  it('cuts a stream that fails after its headers left', async () => {
    const limited = createRateLimiters({ max: 1000 });
    const other = createServer(wayIn({ handlers, rateLimit: limited.perKey, logger: logs.logger }));
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    try {
      const answer = await fetch(`http://127.0.0.1:${(other.address() as AddressInfo).port}/v1/responses`, {
        method: 'POST',
        body: '{}',
      });
      expect(answer.status).to.equal(200);
      let caught: unknown;
      await answer.text().catch((error: unknown) => (caught = error));
      expect(caught).to.be.instanceOf(Error);
    } finally {
      other.closeAllConnections();
      await new Promise((resolve) => other.close(resolve));
    }
  });

  it('refuses over the limit with 429, Retry-After and the RateLimit headers', async () => {
    let answer = await post('/v1/chat/completions');
    while (answer.status === 200) answer = await post('/v1/chat/completions');
    expect(answer.status).to.equal(429);
    expect(Number(answer.headers.get('retry-after'))).to.be.within(1, 60);
    expect(answer.headers.get('ratelimit')).to.match(/; r=0; t=\d+$/);
    expect(((await answer.json()) as { detail: string }).detail).to.equal('Rate limit exceeded: 2 per 1 minute');
  });
});
