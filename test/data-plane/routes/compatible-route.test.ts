import { expect } from 'chai';
import { request } from 'undici';
import type { ProviderPlugin } from '../../../src/plugins/plugin-contract.ts';
import { samplePlugins } from '../../plugins/sample-plugins.ts';
import { eventually } from '../../helpers/eventually.ts';
import { ScriptedUpstream } from '../../helpers/scripted-upstream.ts';
import { startRouteTestApp, type RouteTestApp } from './route-test-app.ts';

function pluginsWithFixup(): ProviderPlugin[] {
  const [acme, bolt] = samplePlugins();
  const dropMarked = (event: { data: string }) =>
    event.data.includes('"drop":true')
      ? null
      : event.data.includes('"x":1')
        ? { data: event.data.replace('"x":1', '"x":2') }
        : undefined;
  return [
    {
      ...acme!,
      streamFixups: [{ name: 'test-fixup', route: 'chat-completions', models: ['acme/one'], fixup: dropMarked }],
    },
    bolt!,
  ];
}

async function post(app: RouteTestApp, path: string, body: unknown, headers: Record<string, string> = {}) {
  const response = await request(`${app.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await response.body.text();
  return {
    status: response.statusCode,
    headers: response.headers,
    text,
    json: () => JSON.parse(text) as Record<string, any>,
  };
}

const chat = (model: string, extra: Record<string, unknown> = {}) => ({
  model,
  messages: [{ role: 'user', content: 'hi' }],
  ...extra,
});

describe('compatible routes', () => {
  let upstream: ScriptedUpstream;
  let app: RouteTestApp;

  beforeEach(async () => {
    upstream = await ScriptedUpstream.start();
    app = await startRouteTestApp(pluginsWithFixup(), { acme: upstream.url, bolt: upstream.url });
  });
  afterEach(async () => {
    await app.close();
    await upstream.close();
  });

  describe('JSON', () => {
    it('forwards every field with only model replaced, and returns the upstream body byte for byte', async () => {
      const upstreamBody = '{ "id":"x1",  "model" : "hidden-2026",\n "usage": {"n": 7}, "weird":[1,2 ,3] }';
      upstream.script = (_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json', 'x-request-id': 'req-1' }).end(upstreamBody);
      };
      const response = await post(
        app,
        '/v1/chat/completions',
        chat('acme/hidden', { temperature: 0.2, vendor_extra: { a: [1] } }),
      );
      expect(response.status).to.equal(200);
      expect(response.text).to.equal(upstreamBody);
      // The gateway's own id answers the client; the upstream's is passed on beside it.
      expect(response.headers['x-upstream-request-id']).to.equal('req-1');
      expect(response.headers['x-request-id']).to.match(/^[0-9a-f-]{36}$/);
      const seen = upstream.requests[0]!;
      expect(seen.path).to.equal('/v1/chat/completions');
      expect(seen.headers.authorization).to.equal('Bearer upstream-secret-key');
      expect(JSON.parse(seen.body)).to.deep.equal({
        model: 'hidden-2026',
        messages: [{ role: 'user', content: 'hi' }],
        temperature: 0.2,
        vendor_extra: { a: [1] },
      });
      expect(app.exchanges).to.have.length(1);
      expect(app.exchanges[0]).to.include({ route: 'chat-completions', status: 200, stream: false });
      expect(app.exchanges[0]!.resolved.canonicalId).to.equal('acme/hidden');
      expect(app.exchanges[0]!.usage).to.deep.equal({ inputTokens: 7, outputTokens: 7, cachedTokens: 0 });
    });

    it('resolves an alias before dispatch and records the concrete model', async () => {
      upstream.script = (_req, res) =>
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"usage":{"n":1}}');
      await post(app, '/v1/responses', { model: 'acme-latest', input: 'hi' });
      expect(upstream.lastBody().model).to.equal('one');
      expect(upstream.requests[0]!.path).to.equal('/v1/responses');
      expect(app.exchanges[0]!.resolved).to.include({ canonicalId: 'acme/one', alias: 'acme-latest' });
    });

    it('uses the x-api-key style and passes the declared client headers on the messages route', async () => {
      const [acme, bolt] = samplePlugins();
      const withHeaders: ProviderPlugin = {
        ...bolt!,
        routes: {
          ...bolt!.routes,
          messages: {
            path: '/messages',
            format: 'messages',
            auth: 'x-api-key',
            modelIds: ['native'],
            forwardHeaders: ['anthropic-version'],
            defaultHeaders: { 'anthropic-version': '2023-06-01' },
          },
        },
      };
      await app.close();
      app = await startRouteTestApp([acme!, withHeaders], { bolt: upstream.url });
      upstream.script = (_req, res) =>
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"usage":{"n":1}}');
      await post(
        app,
        '/v1/messages',
        { model: 'bolt-latest', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] },
        { 'anthropic-version': '2024-01-01', 'x-secret': 'no' },
      );
      const seen = upstream.requests[0]!;
      expect(seen.headers['x-api-key']).to.equal('upstream-secret-key');
      expect(seen.headers.authorization).to.equal(undefined);
      expect(seen.headers['anthropic-version']).to.equal('2024-01-01');
      expect(seen.headers['x-secret']).to.equal(undefined);
      expect(upstream.lastBody().model).to.equal('bolt-1');
      await post(app, '/v1/messages', { model: 'bolt-1', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] });
      expect(upstream.requests[1]!.headers['anthropic-version']).to.equal('2023-06-01');
    });

    it('answers 502 when a Chat Completions answer carries no usage', async () => {
      upstream.script = (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{"id":"x"}');
      const response = await post(app, '/v1/chat/completions', chat('acme/one'));
      expect(response.status).to.equal(502);
      expect(response.json().detail).to.contain('usage metadata');
      expect(response.json().error.message).to.contain('usage metadata');
    });

    it('returns upstream errors as they came, status, body and retry headers', async () => {
      const errorBody = '{"error":{"message":"slow down","type":"rate_limit_error"}}';
      upstream.script = (_req, res) =>
        res
          .writeHead(429, { 'content-type': 'application/json', 'retry-after': '7', 'x-should-retry': 'true' })
          .end(errorBody);
      const response = await post(app, '/v1/chat/completions', chat('acme/one'));
      expect(response.status).to.equal(429);
      expect(response.text).to.equal(errorBody);
      expect(response.headers['retry-after']).to.equal('7');
      expect(response.headers['x-should-retry']).to.equal('true');
      expect(app.exchanges[0]).to.include({ status: 429, consumed: false });
    });

    it("never relays the gateway's upstream credential that an upstream error body echoes", async () => {
      upstream.script = (_req, res) =>
        res
          .writeHead(400, { 'content-type': 'text/html' })
          .end('<p>Bad request from key upstream-secret-key (Bearer upstream-secret-key)</p>');
      const response = await post(app, '/v1/chat/completions', chat('acme/one'));
      expect(response.status).to.equal(400);
      expect(response.text).to.equal('<p>Bad request from key [REDACTED] (Bearer [REDACTED])</p>');
      expect(response.headers['content-length']).to.equal(String(Buffer.byteLength(response.text)));
      expect(response.headers['x-content-type-options']).to.equal('nosniff');
    });

    it('sends X-Content-Type-Options: nosniff on relayed answers, gateway errors and unknown paths', async () => {
      upstream.script = (_req, res) =>
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"usage":{"n":1}}');
      const answers = [
        await post(app, '/v1/chat/completions', chat('acme/one')),
        await post(app, '/v1/chat/completions', { model: 42 }),
        await post(app, '/v1/nothing', {}),
      ];
      upstream.script = (_req, res) =>
        res.writeHead(200, { 'content-type': 'text/event-stream' }).end('data: {"usage":{"n":1}}\n\n');
      answers.push(await post(app, '/v1/chat/completions', chat('acme/two', { stream: true })));
      expect(answers.map((answer) => answer.status)).to.deep.equal([200, 400, 404, 200]);
      for (const answer of answers) expect(answer.headers['x-content-type-options']).to.equal('nosniff');
    });

    it("turns an upstream 401/403 (the gateway's own credentials) into 502", async () => {
      for (const status of [401, 403]) {
        upstream.script = (_req, res) =>
          res
            .writeHead(status, { 'content-type': 'application/json' })
            .end('{"error":{"message":"bad key upstream-secret-key"}}');
        const response = await post(app, '/v1/messages', {
          model: 'bolt-1',
          max_tokens: 5,
          messages: [{ role: 'user', content: 'x' }],
        });
        expect(response.status).to.equal(502);
        expect(response.json()).to.deep.include({ type: 'error' });
        expect(response.json().detail).to.contain("'bolt' rejected the gateway's credentials");
        expect(response.text).not.to.contain('upstream-secret-key');
      }
    });
  });

  describe('streams', () => {
    it('relays SSE bytes unchanged and sets include_usage before forwarding', async () => {
      const events = [': comment\r\n\r\n', 'data: {"a":"x"}\r\n\r\n', 'data:{"usage":{"n":3}}\n\n', 'data: [DONE]\n\n'];
      upstream.script = async (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        for (const event of events) {
          res.write(event);
          await new Promise((resolve) => setTimeout(resolve, 5));
        }
        res.end();
      };
      const response = await post(
        app,
        '/v1/chat/completions',
        chat('acme/two', { stream: true, stream_options: { include_obfuscation: false } }),
      );
      expect(response.headers['content-type']).to.equal('text/event-stream');
      expect(response.text).to.equal(events.join(''));
      expect(upstream.lastBody().stream_options).to.deep.equal({ include_obfuscation: false, include_usage: true });
      expect(app.exchanges[0]!.usage).to.deep.equal({ inputTokens: 3, outputTokens: 3, cachedTokens: 0 });
      expect(app.exchanges[0]!.outcome).to.equal('complete');
    });

    it("records a stream that ends before its format's terminal event as upstream_cut, however it ends", async () => {
      const cases: [string, Record<string, unknown>, string, boolean][] = [
        [
          '/v1/chat/completions',
          chat('acme/two', { stream: true }),
          'data: {"choices":[{"delta":{"content":"a"},"finish_reason":null}]}\n\n',
          false,
        ],
        [
          '/v1/chat/completions',
          chat('acme/two', { stream: true }),
          'data: {"choices":[{"delta":{},"finish_reason":"stop"}]}\n\n',
          true,
        ],
        [
          '/v1/messages',
          { model: 'bolt-1', max_tokens: 5, stream: true, messages: [{ role: 'user', content: 'x' }] },
          'event: message_start\ndata: {"type":"message_start"}\n\nevent: content_block_delta\ndata: {"type":"content_block_delta"}\n\n',
          false,
        ],
        [
          '/v1/messages',
          { model: 'bolt-1', max_tokens: 5, stream: true, messages: [{ role: 'user', content: 'x' }] },
          'event: message_stop\ndata: {"type":"message_stop"}\n\n',
          true,
        ],
        [
          '/v1/responses',
          { model: 'one', input: 'x', stream: true },
          'event: response.created\ndata: {"type":"response.created"}\n\n',
          false,
        ],
        [
          '/v1/responses',
          { model: 'one', input: 'x', stream: true },
          'event: response.incomplete\ndata: {"type":"response.incomplete"}\n\n',
          true,
        ],
      ];
      for (const [path, body, events, complete] of cases) {
        // Half of the cut streams end cleanly, half by a reset connection.
        upstream.script = (_req, res) => {
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          if (complete || path !== '/v1/messages') res.end(events);
          else res.write(events, () => setTimeout(() => res.destroy(), 20));
        };
        await post(app, path, body).catch(() => undefined);
      }
      await eventually(() => app.exchanges.length === cases.length, 'every stream recorded');
      expect(app.exchanges.map((exchange) => [exchange.route, exchange.status, exchange.outcome])).to.deep.equal([
        ['chat-completions', 200, 'upstream_cut'],
        ['chat-completions', 200, 'complete'],
        ['messages', 200, 'upstream_cut'],
        ['messages', 200, 'complete'],
        ['responses', 200, 'upstream_cut'],
        ['responses', 200, 'complete'],
      ]);
    });

    it('flushes each upstream chunk as it arrives, never buffering the stream', async () => {
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      upstream.script = async (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('data: {"first":true}\n\n');
        await released;
        res.end('data: [DONE]\n\n');
      };
      const response = await request(`${app.url}/v1/chat/completions`, {
        method: 'POST',
        body: JSON.stringify(chat('acme/two', { stream: true })),
      });
      const iterator = response.body[Symbol.asyncIterator]();
      const first = await iterator.next();
      expect(Buffer.from(first.value as Buffer).toString()).to.equal('data: {"first":true}\n\n');
      release();
      let rest = '';
      for (let next = await iterator.next(); !next.done; next = await iterator.next())
        rest += Buffer.from(next.value as Buffer).toString();
      expect(rest).to.equal('data: [DONE]\n\n');
    });

    it('applies a declared fixup only to its model, keeping all other bytes, even in split chunks', async () => {
      const stream =
        'data: {"x":1}\r\n\r\ndata: {"drop":true}\r\n\r\n: note\r\n\r\ndata: {"y":1}\r\n\r\ndata: [DONE]\r\n\r\n';
      upstream.script = async (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        for (let index = 0; index < stream.length; index += 7) {
          res.write(stream.slice(index, index + 7));
          await new Promise((resolve) => setImmediate(resolve));
        }
        res.end();
      };
      const fixed = await post(app, '/v1/chat/completions', chat('acme/one', { stream: true }));
      expect(fixed.text).to.equal('data: {"x":2}\r\n\r\n: note\r\n\r\ndata: {"y":1}\r\n\r\ndata: [DONE]\r\n\r\n');
      const untouched = await post(app, '/v1/chat/completions', chat('acme/two', { stream: true }));
      expect(untouched.text).to.equal(stream);
      const notStreamed = await post(app, '/v1/responses', { model: 'one', input: 'x', stream: true });
      expect(notStreamed.text).to.equal(stream);
    });

    it("ends a stream with an in-band error in the route's own format when one event passes the cap", async () => {
      await app.close();
      app = await startRouteTestApp(
        pluginsWithFixup(),
        { acme: upstream.url, bolt: upstream.url },
        { maxSseEventBytes: 64 * 1024 },
      );
      let upstreamClosed = 0;
      upstream.script = async (_req, res) => {
        res.on('close', () => (upstreamClosed += 1));
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('event: first\ndata: {"usage":{"n":2}}\n\n');
        res.write('data: {"huge":"');
        for (let index = 0; index < 40 && !res.destroyed; index += 1) {
          res.write('z'.repeat(4096));
          await new Promise((resolve) => setImmediate(resolve));
        }
        res.end('"}\n\n');
      };
      const cases = [
        { path: '/v1/chat/completions', body: chat('acme/two', { stream: true }), tail: /^data: (\{.*\})\n\n$/ },
        {
          path: '/v1/messages',
          body: { model: 'bolt-1', max_tokens: 5, stream: true, messages: [{ role: 'user', content: 'x' }] },
          tail: /^event: error\ndata: (\{.*\})\n\n$/,
        },
        {
          path: '/v1/responses',
          body: { model: 'one', input: 'x', stream: true },
          tail: /^event: error\ndata: (\{.*\})\n\n$/,
        },
      ];
      for (const [index, { path, body, tail }] of cases.entries()) {
        const response = await post(app, path, body);
        expect(response.status).to.equal(200);
        const first = 'event: first\ndata: {"usage":{"n":2}}\n\n';
        expect(response.text.startsWith(first), path).to.equal(true);
        const error = JSON.parse(tail.exec(response.text.slice(first.length))![1]!) as Record<string, any>;
        expect(error.detail, path).to.equal(
          "Upstream provider '" +
            (path === '/v1/messages' ? 'bolt' : 'acme') +
            "' sent a stream event larger than the gateway's limit of 65536 bytes; the stream was ended",
        );
        if (path === '/v1/messages') expect(error).to.deep.include({ type: 'error' });
        else expect(error.error.code).to.equal('GW_ERR_UPSTREAM_EVENT_TOO_LARGE');
        await eventually(
          () => upstreamClosed === index + 1 && app.exchanges.length === index + 1,
          'the upstream request dropped and the exchange recorded',
        );
        expect(app.exchanges[index]).to.include({ status: 200, stream: true, consumed: true, outcome: 'upstream_cut' });
        expect(app.exchanges[index]!.usage).to.deep.equal({ inputTokens: 2, outputTokens: 2, cachedTokens: 0 });
      }
    });

    it("redacts the gateway's upstream credential from streamed events, even when it is split across chunks", async () => {
      const stream = 'data: {"a":"key upstream-secret-key here"}\n\ndata: {"b":"upstream-secret-key"}\n\n';
      upstream.script = async (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        for (let index = 0; index < stream.length; index += 5) {
          res.write(stream.slice(index, index + 5));
          await new Promise((resolve) => setImmediate(resolve));
        }
        res.end();
      };
      for (const model of ['acme/one', 'acme/two']) {
        const response = await post(app, '/v1/chat/completions', chat(model, { stream: true }));
        expect(response.text, model).to.equal('data: {"a":"key [REDACTED] here"}\n\ndata: {"b":"[REDACTED]"}\n\n');
      }
    });

    it('aborts the upstream request when the client goes away', async () => {
      let upstreamClosed!: () => void;
      const closed = new Promise<void>((resolve) => (upstreamClosed = resolve));
      upstream.script = (req, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('data: {"a":1}\n\n');
        res.on('close', upstreamClosed);
      };
      const controller = new AbortController();
      const response = await request(`${app.url}/v1/chat/completions`, {
        method: 'POST',
        body: JSON.stringify(chat('acme/two', { stream: true })),
        signal: controller.signal,
      });
      await response.body[Symbol.asyncIterator]().next();
      controller.abort();
      await closed;
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(app.exchanges[0]).to.include({ status: 499, stream: true, outcome: 'client_closed' });
    });
  });

  describe('client errors', () => {
    it('lists every bad field at once in a ValidationError', async () => {
      const response = await post(app, '/v1/chat/completions', {
        model: 42,
        messages: [{ content: 'x' }, 'no'],
        stream: 'yes',
        tools: {},
      });
      expect(response.status).to.equal(400);
      const body = response.json();
      expect(body.detail).to.equal('Invalid input parameters');
      expect(body.errors).to.have.members([
        "Field 'model': must be a string",
        "Field 'messages[0].role': is required",
        "Field 'messages[1]': must be an object",
        "Field 'stream': must be true or false",
        "Field 'tools': must be an array of objects",
      ]);
      expect(body.error.type).to.equal('invalid_request_error');
      expect(upstream.requests).to.have.length(0);
    });

    it('lists at most 50 bad items of a long array, with their own indexes, and counts the rest', async () => {
      const many = Array.from({ length: 2000 }, (_, index) => ({ content: `m${index}` }));
      const all = await post(app, '/v1/chat/completions', { model: 'acme/one', messages: many });
      expect(all.status).to.equal(400);
      const errors = all.json().errors as string[];
      expect(errors).to.have.length(51);
      expect(errors[0]).to.equal("Field 'messages[0].role': is required");
      expect(errors).to.include("Field 'messages[49].role': is required");
      expect(errors.at(-1)).to.equal("Field 'messages': 1950 more items are invalid (only the first 50 are listed)");

      const two = many.map((message, index) =>
        index === 10 || index === 1500 ? message : { role: 'user', ...message },
      );
      const some = await post(app, '/v1/chat/completions', {
        model: 'acme/one',
        messages: [...two, 'not a message'],
        tools: [1],
      });
      expect(some.json().errors).to.have.members([
        "Field 'messages[10].role': is required",
        "Field 'messages[1500].role': is required",
        "Field 'messages[2000]': must be an object",
        "Field 'tools[0]': must be an object",
      ]);
      expect(upstream.requests).to.have.length(0);
    });

    it("makes a model outside the route's set a field error beside the others", async () => {
      const response = await post(app, '/v1/responses', { model: 'bolt/bolt-1' });
      expect(response.json().errors).to.deep.equal([
        "Field 'input': is required",
        "Field 'model': 'bolt/bolt-1' is not available on /v1/responses; it is served on /v1/chat/completions",
      ]);
    });

    it('keeps input required on Responses, also for a stored prompt', async () => {
      const response = await post(app, '/v1/responses', {
        model: 'two',
        prompt: { id: 'pmpt_123', variables: { city: 'Oslo' } },
      });
      expect(response.status).to.equal(400);
      expect(response.json().errors).to.deep.equal(["Field 'input': is required"]);
      expect(upstream.requests).to.have.length(0);
    });

    it('requires max_tokens on messages, with the Messages envelope', async () => {
      const response = await post(app, '/v1/messages', { model: 'bolt-1', messages: [{ role: 'user', content: 'x' }] });
      expect(response.status).to.equal(400);
      expect(response.json()).to.deep.include({ type: 'error', errors: ["Field 'max_tokens': is required"] });
      expect(response.json().error.type).to.equal('invalid_request_error');
    });

    it('reads a form-typed body as JSON, as curl -d sends it', async () => {
      upstream.script = (_req, res) =>
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"usage":{"n":1}}');
      const response = await post(app, '/v1/chat/completions', JSON.stringify(chat('acme/one')), {
        'content-type': 'application/x-www-form-urlencoded',
      });
      expect(response.status).to.equal(200);
    });

    it('refuses bodies that are not a JSON object with a JSON 400', async () => {
      for (const [body, detail] of [
        ['{"model":', 'Request body is not valid JSON'],
        ['[1,2]', 'must be a JSON object, got an array'],
        ['', 'Request body is empty'],
      ] as const) {
        const response = await post(app, '/v1/chat/completions', body);
        expect(response.status).to.equal(400);
        expect(response.headers['content-type']).to.contain('application/json');
        expect(response.json().detail).to.contain(detail);
      }
    });

    it('refuses a body over the limit with a JSON 413', async () => {
      await app.close();
      app = await startRouteTestApp(pluginsWithFixup(), { acme: upstream.url }, { bodyLimitBytes: 100 });
      const response = await post(app, '/v1/chat/completions', chat('acme/one', { padding: 'x'.repeat(200) }));
      expect(response.status).to.equal(413);
      expect(response.json().detail).to.equal('Request body is larger than the limit of 100 bytes');
    });

    it('answers unknown paths with 404 and wrong methods with 405, both JSON', async () => {
      const missing = await request(`${app.url}/v1/nothing`);
      expect(missing.statusCode).to.equal(404);
      expect(await missing.body.json()).to.deep.equal({ detail: 'No route for GET /v1/nothing' });
      const wrong = await request(`${app.url}/v1/chat/completions`);
      expect(wrong.statusCode).to.equal(405);
      expect(wrong.headers.allow).to.equal('POST');
      expect(((await wrong.body.json()) as { detail: string }).detail).to.contain('use POST');
    });
  });

  describe('upstream failures', () => {
    it('answers 502 naming the provider, never its key, when the connection is refused', async () => {
      const port = new URL(upstream.url).port;
      await upstream.close();
      const refusing = await startRouteTestApp(pluginsWithFixup(), { acme: `http://127.0.0.1:${port}/v1` });
      try {
        const response = await post(refusing, '/v1/chat/completions', chat('acme/one'));
        expect(response.status).to.equal(502);
        expect(response.json().detail).to.equal("Upstream provider 'acme' failed: connection refused");
        expect(response.text).not.to.contain('upstream-secret-key');
      } finally {
        await refusing.close();
        upstream = await ScriptedUpstream.start();
      }
    });

    it('answers 502 when the upstream does not answer in time', async () => {
      await app.close();
      app = await startRouteTestApp(pluginsWithFixup(), { acme: upstream.url }, { timeoutMs: 200 });
      upstream.script = () => {};
      const response = await post(app, '/v1/chat/completions', chat('acme/one'));
      expect(response.status).to.equal(502);
      expect(response.json().detail).to.equal("Upstream provider 'acme' failed: no response within 200 ms");
    });

    it('answers 502 JSON to an upstream answer over the size limit, and keeps serving', async () => {
      const big = Buffer.alloc(2 * 1024 * 1024, 'a');
      upstream.script = (_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(big);
      };
      const response = await post(app, '/v1/chat/completions', chat('acme/one'));
      expect(response.status).to.equal(502);
      expect(response.json().detail).to.equal("Upstream provider 'acme' failed: the answer broke off or was too large");
      upstream.script = (_req, res) =>
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"usage":{"n":1}}');
      expect((await post(app, '/v1/chat/completions', chat('acme/one'))).status).to.equal(200);
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(app.exchanges.map((exchange) => exchange.status)).to.deep.equal([502, 200]);
    });

    it('answers 502 saying what to set when a provider is not configured', async () => {
      await app.close();
      app = await startRouteTestApp(pluginsWithFixup(), {});
      const response = await post(app, '/v1/chat/completions', chat('bolt-latest'));
      expect(response.status).to.equal(502);
      expect(response.json().detail).to.equal("Upstream provider 'bolt' is not configured (set BOLT_BASE_URL)");
    });
  });
});
