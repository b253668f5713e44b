import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import Anthropic from '@anthropic-ai/sdk';
import { expect } from 'chai';
import OpenAI from 'openai';
import { request } from 'undici';
import { eventually, sleep } from '../../helpers/eventually.ts';
import { ScriptedUpstream, type Script } from '../../helpers/scripted-upstream.ts';
import { samplePlugins } from '../../plugins/sample-plugins.ts';
import { startRouteTestApp, type RouteTestApp } from './route-test-app.ts';

async function post(app: RouteTestApp, path: string, body: unknown) {
  const response = await request(`${app.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await response.body.text();
  return {
    status: response.statusCode,
    headers: response.headers,
    text,
    json: () => JSON.parse(text) as Record<string, any>,
  };
}

/** A base URL on which nothing listens (connection refused). */
async function refusingUrl(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise((resolve) => server.close(resolve));
  return `http://127.0.0.1:${port}/v1`;
}

const chat = (extra: Record<string, unknown> = {}) => ({
  model: 'acme/one',
  messages: [{ role: 'user', content: 'hi' }],
  ...extra,
});
const messages = { model: 'bolt-1', max_tokens: 5, stream: true, messages: [{ role: 'user', content: 'x' }] };
const responses = { model: 'acme/one', input: 'x', stream: true };

const GOOD_JSON = '{"id":"from-b","usage":{"n":4}}';
const answerJson: Script = (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(GOOD_JSON);
const sse =
  (events: string[]): Script =>
  (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.end(events.join(''));
  };

/** A whole stream per format, and its opening events alone. */
const STREAMS = {
  'chat-completions': {
    path: '/v1/chat/completions',
    body: chat({ stream: true }),
    opening: ['data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n'],
    content: ['data: {"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}\n\n'],
    end: ['data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"n":2}}\n\n', 'data: [DONE]\n\n'],
    errorEvent: 'data: {"error":{"message":"overloaded"}}\n\n',
    malformed: 'data: {"choices":[{"index":0,"delta":{"content":"leaked text\n\n',
  },
  messages: {
    path: '/v1/messages',
    body: messages,
    opening: [
      'event: message_start\ndata: {"type":"message_start","message":{"usage":{"n":1}}}\n\n',
      'event: ping\ndata: {"type":"ping"}\n\n',
    ],
    content: [
      'event: content_block_delta\ndata: {"type":"content_block_delta","delta":{"type":"text_delta","text":"Hi"}}\n\n',
    ],
    end: [
      'event: message_delta\ndata: {"type":"message_delta","usage":{"n":2}}\n\n',
      'event: message_stop\ndata: {"type":"message_stop"}\n\n',
    ],
    errorEvent: 'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n',
    malformed:
      'event: content_block_delta\ndata: {"type":"content_block_delta","delta":{"type":"text_delta","text":"leaked\n\n',
  },
  responses: {
    path: '/v1/responses',
    body: responses,
    opening: [
      'event: response.created\ndata: {"type":"response.created"}\n\n',
      'event: response.in_progress\ndata: {"type":"response.in_progress"}\n\n',
    ],
    content: ['event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"Hi"}\n\n'],
    end: ['event: response.completed\ndata: {"type":"response.completed","response":{"usage":{"n":2}}}\n\n'],
    errorEvent: 'event: error\ndata: {"type":"error","code":"server_error","message":"boom"}\n\n',
    malformed: 'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"leaked\n\n',
  },
} as const;

describe('failover between endpoints', () => {
  let a: ScriptedUpstream;
  let b: ScriptedUpstream;
  let app: RouteTestApp | undefined;

  beforeEach(async () => {
    a = await ScriptedUpstream.start();
    b = await ScriptedUpstream.start();
  });
  afterEach(async () => {
    await app?.close();
    app = undefined;
    await a.close();
    await b.close();
  });

  const start = async (options: Parameters<typeof startRouteTestApp>[2] = {}, first?: string) => {
    app = await startRouteTestApp(
      samplePlugins(),
      { acme: [first ?? a.url, b.url], bolt: [first ?? a.url, b.url] },
      options,
    );
    return app;
  };

  describe('JSON answers', () => {
    const failures: [string, Script][] = [
      ['connection reset', (req) => req.socket.destroy()],
      ...[429, 500, 502, 503, 504, 529].map((status): [string, Script] => [
        `status ${status}`,
        (_req, res) =>
          res.writeHead(status, { 'content-type': 'application/json' }).end('{"error":{"message":"busy"}}'),
      ]),
    ];
    for (const [name, script] of failures) {
      it(`fails over on ${name}, and the client sees only the second endpoint's answer`, async () => {
        await start();
        a.script = script;
        b.script = answerJson;
        const response = await post(app!, '/v1/chat/completions', chat());
        expect(response.status).to.equal(200);
        expect(response.text).to.equal(GOOD_JSON);
        expect(a.requests).to.have.length(1);
        expect(b.requests).to.have.length(1);
        await sleep(50);
        expect(app!.exchanges).to.have.length(1);
        expect(app!.exchanges[0]).to.include({ status: 200, endpoint: 'ep1', attempts: 2 });
        expect(app!.exchanges[0]!.usage).to.deep.equal({ inputTokens: 4, outputTokens: 4, cachedTokens: 0 });
      });
    }

    it('fails over on connection refused', async () => {
      await start({}, await refusingUrl());
      b.script = answerJson;
      const response = await post(app!, '/v1/chat/completions', chat());
      expect(response.status).to.equal(200);
      expect(response.text).to.equal(GOOD_JSON);
    });

    it('fails over when the headers do not come within the first-byte timeout', async () => {
      await start({ firstByteTimeoutMs: 300 });
      a.script = () => undefined; // never answers
      b.script = answerJson;
      const response = await post(app!, '/v1/chat/completions', chat());
      expect(response.status).to.equal(200);
      expect(response.text).to.equal(GOOD_JSON);
    });

    it('fails over on 408 and 409 without counting them against the endpoint, and reads retry-after-ms on a 429', async () => {
      await start();
      b.script = answerJson;
      for (const status of [408, 409]) {
        a.script = (_req, res) => res.writeHead(status, { 'content-type': 'application/json' }).end('{}');
        expect((await post(app!, '/v1/chat/completions', chat())).status).to.equal(200);
      }
      expect(app!.services.endpoints.pool('acme')!.state()[0]).to.include({ status: 'up', consecutiveFailures: 0 });
      a.script = (_req, res) =>
        res.writeHead(429, { 'content-type': 'application/json', 'retry-after-ms': '60000' }).end('{}');
      expect((await post(app!, '/v1/chat/completions', chat())).status).to.equal(200);
      expect(app!.services.endpoints.pool('acme')!.state()[0]).to.include({
        status: 'resting',
        consecutiveFailures: 1,
      });
    });

    it('returns another 4xx as it came and never retries it', async () => {
      await start();
      a.script = (_req, res) =>
        res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":{"message":"bad"}}');
      b.script = answerJson;
      const response = await post(app!, '/v1/chat/completions', chat());
      expect(response.status).to.equal(400);
      expect(response.text).to.equal('{"error":{"message":"bad"}}');
      expect(b.requests).to.have.length(0);
    });

    it("returns the last endpoint's own answer when every endpoint failed with a status", async () => {
      await start();
      a.script = (_req, res) => res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":"a"}');
      b.script = (_req, res) => res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":"b"}');
      const response = await post(app!, '/v1/chat/completions', chat());
      expect(response.status).to.equal(503);
      expect(response.text).to.equal('{"error":"b"}');
      await sleep(50);
      expect(app!.exchanges).to.have.length(1);
    });
  });

  for (const [format, stream] of Object.entries(STREAMS)) {
    describe(`${format} streams`, () => {
      const whole = [...stream.opening, ...stream.content, ...stream.end];
      const preContentFailures: [string, Script][] = [
        [
          'breaks',
          (_req, res) => {
            res.writeHead(200, { 'content-type': 'text/event-stream' });
            res.write(stream.opening.join(''), () => setTimeout(() => res.destroy(), 20));
          },
        ],
        ['sends an error event', sse([...stream.opening, stream.errorEvent])],
        // Unterminated JSON that reads like content, then a dropped socket: a failure of that endpoint, not content.
        [
          'sends a malformed event and drops',
          (_req, res) => {
            res.writeHead(200, { 'content-type': 'text/event-stream' });
            res.write(stream.malformed, () => setTimeout(() => res.destroy(), 20));
          },
        ],
        [
          'stalls',
          (_req, res) => {
            res.writeHead(200, { 'content-type': 'text/event-stream' });
            res.write(stream.opening.join(''));
          },
        ],
      ];
      for (const [name, script] of preContentFailures) {
        it(`fails over when the stream ${name} before its first content event, invisibly in the bytes`, async () => {
          await start({ firstByteTimeoutMs: 400 });
          a.script = script;
          b.script = sse(whole);
          const response = await post(app!, stream.path, stream.body);
          expect(response.status).to.equal(200);
          expect(response.text).to.equal(whole.join(''));
          expect(a.requests).to.have.length(1);
          await eventually(() => app!.exchanges.length === 1, 'the usage record');
          await sleep(50);
          expect(app!.exchanges).to.have.length(1);
          expect(app!.exchanges[0]).to.include({ status: 200, outcome: 'complete', endpoint: 'ep1', attempts: 2 });
        });
      }

      it('holds the opening events until the first content event', async () => {
        await start();
        let release!: () => void;
        const released = new Promise<void>((resolve) => (release = resolve));
        a.script = async (_req, res) => {
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.write(stream.opening.join(''));
          await released;
          res.end([...stream.content, ...stream.end].join(''));
        };
        const pending = request(`${app!.url}${stream.path}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(stream.body),
        });
        // Neither the status line nor the opening events leave before the first content event.
        const early = await Promise.race([pending.then(() => 'headers'), sleep(300).then(() => 'nothing yet')]);
        expect(early).to.equal('nothing yet');
        expect(a.requests).to.have.length(1);
        release();
        const response = await pending;
        expect(response.statusCode).to.equal(200);
        expect(await response.body.text()).to.equal(whole.join(''));
      });

      it('does not fail over after the first content event: a cut ends with an in-band error, never a clean end', async () => {
        await start();
        a.script = (_req, res) => {
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.write([...stream.opening, ...stream.content].join(''), () => setTimeout(() => res.destroy(), 20));
        };
        b.script = sse(whole);
        const response = await post(app!, stream.path, stream.body);
        expect(response.status).to.equal(200);
        const sent = [...stream.opening, ...stream.content].join('');
        expect(response.text.startsWith(sent)).to.equal(true);
        const tail = response.text.slice(sent.length);
        expect(tail).to.match(format === 'chat-completions' ? /^data: \{"detail":"[^"]*broke off/ : /^event: error\n/);
        expect(b.requests).to.have.length(0);
        await eventually(() => app!.exchanges.length === 1, 'the usage record');
        expect(app!.exchanges[0]!.outcome).to.equal('upstream_cut');
        // The cut counts against the endpoint's breaker all the same.
        expect(
          app!.services.endpoints.pool(format === 'messages' ? 'bolt' : 'acme')!.state()[0]!.consecutiveFailures,
        ).to.equal(1);
      });

      it('ends a stream that stalls past the idle timeout with an in-band error, outcome stalled', async () => {
        await start({ idleTimeoutMs: 300 });
        a.script = (_req, res) => {
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.write([...stream.opening, ...stream.content].join(''));
        };
        const response = await post(app!, stream.path, stream.body);
        expect(response.text).to.contain('stalled');
        expect(b.requests).to.have.length(0);
        await eventually(() => app!.exchanges.length === 1, 'the usage record');
        expect(app!.exchanges[0]!.outcome).to.equal('stalled');
      });
    });
  }

  describe('resting and the breaker', () => {
    it('rests an endpoint for its Retry-After', async () => {
      await start();
      a.script = (_req, res) =>
        res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '60' }).end('{}');
      b.script = answerJson;
      expect((await post(app!, '/v1/chat/completions', chat())).status).to.equal(200);
      expect((await post(app!, '/v1/chat/completions', chat())).status).to.equal(200);
      expect(a.requests).to.have.length(1);
      expect(b.requests).to.have.length(2);
      const [first] = app!.services.endpoints.pool('acme')!.state();
      expect(first).to.include({ name: 'ep0', status: 'resting', consecutiveFailures: 1 });
    });

    it('opens after the threshold, answers 503 with Retry-After when all rest, and one trial closes it again', async () => {
      app = await startRouteTestApp(
        samplePlugins(),
        { acme: [a.url] },
        { breaker: { failureThreshold: 2, cooldownMs: 500 } },
      );
      const pool = app.services.endpoints.pool('acme')!;
      a.script = (_req, res) => res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":"down"}');
      expect((await post(app, '/v1/chat/completions', chat())).status).to.equal(500);
      expect(pool.state()[0]).to.include({ status: 'up', consecutiveFailures: 1 });
      expect((await post(app, '/v1/chat/completions', chat())).status).to.equal(500);
      expect(pool.state()[0]).to.include({ status: 'resting', consecutiveFailures: 2 });

      const refused = await post(app, '/v1/chat/completions', chat());
      expect(refused.status).to.equal(503);
      expect(refused.headers['content-type']).to.match(/application\/json/);
      expect(Number(refused.headers['retry-after'])).to.be.greaterThan(0);
      expect(refused.json().error.code).to.equal('GW_ERR_UPSTREAM_UNAVAILABLE');
      expect(a.requests).to.have.length(2);

      // Half-open: the first request after the cooldown is the trial; it fails, so the endpoint rests again.
      await eventually(() => pool.state()[0]!.status === 'up', 'the cooldown to end');
      expect((await post(app, '/v1/chat/completions', chat())).status).to.equal(500);
      expect(pool.state()[0]).to.include({ status: 'resting' });
      expect((await post(app, '/v1/chat/completions', chat())).status).to.equal(503);

      // The next trial succeeds and closes the breaker.
      await eventually(() => pool.state()[0]!.status === 'up', 'the second cooldown to end');
      a.script = answerJson;
      expect((await post(app, '/v1/chat/completions', chat())).status).to.equal(200);
      expect(pool.state()[0]).to.include({ status: 'up', consecutiveFailures: 0 });
      expect((await post(app, '/v1/chat/completions', chat())).status).to.equal(200);
    });
  });
});

describe('in-band errors through the official SDKs', () => {
  let a: ScriptedUpstream;
  let app: RouteTestApp;

  before(async () => {
    a = await ScriptedUpstream.start();
    app = await startRouteTestApp(samplePlugins(), { acme: [a.url], bolt: [a.url] }, { idleTimeoutMs: 300 });
  });
  after(async () => {
    await app.close();
    await a.close();
  });

  const ends: [string, (res: import('node:http').ServerResponse) => void][] = [
    ['cut', (res) => setTimeout(() => res.destroy(), 20)],
    ['stalled', () => undefined],
  ];
  for (const [how, end] of ends) {
    for (const [format, stream] of Object.entries(STREAMS)) {
      it(`makes the ${format} SDK raise an error for a ${how} stream, after the content it got`, async () => {
        a.script = (_req, res) => {
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.write([...stream.opening, ...stream.content].join(''), () => end(res));
        };
        const seen: string[] = [];
        const consume = async () => {
          if (format === 'messages') {
            const client = new Anthropic({ baseURL: app.url, apiKey: 'sk-test', maxRetries: 0 });
            const events = await client.messages.create({
              model: 'bolt-1',
              max_tokens: 5,
              stream: true,
              messages: [{ role: 'user', content: 'x' }],
            });
            for await (const event of events) seen.push(event.type);
          } else {
            const client = new OpenAI({ baseURL: `${app.url}/v1`, apiKey: 'sk-test', maxRetries: 0 });
            if (format === 'responses') {
              const events = await client.responses.create({ model: 'acme/one', input: 'x', stream: true });
              for await (const event of events) seen.push(event.type);
            } else {
              const chunks = await client.chat.completions.create({
                model: 'acme/one',
                messages: [{ role: 'user', content: 'x' }],
                stream: true,
              });
              for await (const chunk of chunks) seen.push(chunk.choices[0]?.delta.content ?? '');
            }
          }
        };
        const error = await consume().then(
          () => undefined,
          (caught: unknown) => caught as Error,
        );
        expect(error, 'the SDK raised').to.be.instanceOf(Error);
        expect(error!.message).to.match(how === 'cut' ? /broke off/ : /stalled/);
        expect(seen.length).to.be.greaterThan(0);
      });
    }
  }
});

describe('model fallbacks', () => {
  let a: ScriptedUpstream;
  let b: ScriptedUpstream;
  let app: RouteTestApp;

  beforeEach(async () => {
    a = await ScriptedUpstream.start();
    b = await ScriptedUpstream.start();
    app = await startRouteTestApp(
      samplePlugins(),
      { acme: [a.url], bolt: [b.url] },
      { fallbacks: { 'acme/one': ['bolt/bolt-1'] } },
    );
  });
  afterEach(async () => {
    await app.close();
    await a.close();
    await b.close();
  });

  it('tries the next model when every endpoint of the requested one failed, records usage against it, and names it', async () => {
    a.script = (_req, res) => res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":"down"}');
    b.script = answerJson;
    const response = await post(app, '/v1/chat/completions', chat());
    expect(response.status).to.equal(200);
    expect(response.text).to.equal(GOOD_JSON);
    expect(response.headers['x-gateway-model']).to.equal('bolt/bolt-1');
    expect(JSON.parse(b.requests[0]!.body).model).to.equal('bolt-1');
    await sleep(50);
    expect(app.exchanges).to.have.length(1);
    expect(app.exchanges[0]!.resolved).to.include({ canonicalId: 'bolt/bolt-1', requestedId: 'acme/one' });
    expect(app.exchanges[0]).to.include({ status: 200, attempts: 2 });
  });

  it('falls back on a stream that broke before its first content, and not when the requested model answered', async () => {
    const stream = STREAMS['chat-completions'];
    const whole = [...stream.opening, ...stream.content, ...stream.end];
    a.script = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(stream.opening.join(''), () => setTimeout(() => res.destroy(), 20));
    };
    b.script = sse(whole);
    const fellBack = await post(app, stream.path, stream.body);
    expect(fellBack.text).to.equal(whole.join(''));
    expect(fellBack.headers['x-gateway-model']).to.equal('bolt/bolt-1');

    a.script = answerJson;
    const direct = await post(app, '/v1/chat/completions', chat());
    expect(direct.headers['x-gateway-model']).to.equal(undefined);
    expect(b.requests).to.have.length(1);
  });

  it('is checked at start: targets must be canonical models sharing a route in the same wire format', async () => {
    const { fallbackTable } = await import('../../../src/data-plane/routes/model-fallbacks.ts');
    const { ModelRegistry } = await import('../../../src/core/model-registry.ts');
    const registry = new ModelRegistry(samplePlugins());
    expect(fallbackTable(registry, { 'acme/one': ['bolt/bolt-1', 'acme/two'] }).get('acme/one')).to.deep.equal([
      'bolt/bolt-1',
      'acme/two',
    ]);
    expect(() => fallbackTable(registry, { 'acme/one': ['acme/nope'] })).to.throw(
      "fallback of 'acme/one' 'acme/nope' is not a canonical model ID",
    );
    expect(() => fallbackTable(registry, { 'acme-latest': ['acme/two'] })).to.throw(
      "model 'acme-latest' is not a canonical model ID",
    );
    expect(() => fallbackTable(registry, { 'acme/one': ['acme/one'] })).to.throw('cannot fall back to itself');
    const [acme, bolt] = samplePlugins();
    const withMessagesOnly = new ModelRegistry([
      acme!,
      { ...bolt!, models: [...bolt!.models, { ...bolt!.models[0]!, id: 'bolt-m', routes: ['messages'] }] },
    ]);
    expect(() => fallbackTable(withMessagesOnly, { 'acme/one': ['bolt/bolt-m'] })).to.throw(
      "'bolt/bolt-m' serves none of the routes of 'acme/one' in the same wire format",
    );
  });
});
