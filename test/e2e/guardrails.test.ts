import { expect } from 'chai';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { request } from 'undici';
import { ScriptedUpstream } from '../helpers/scripted-upstream.ts';
import { startTestGateway, TEST_KEY, type TestGateway } from '../helpers/test-gateway.ts';

type Format = 'chat-completions' | 'messages' | 'responses';

/** The route, model and vendor of each client format, as the scripted upstreams serve them. */
const ROUTES: Record<Format, { path: string; model: string; vendor: 'alpha' | 'beta' }> = {
  'chat-completions': { path: '/v1/chat/completions', model: 'alpha/gen-5.5', vendor: 'alpha' },
  messages: { path: '/v1/messages', model: 'beta-latest', vendor: 'beta' },
  responses: { path: '/v1/responses', model: 'alpha/gen-5.5', vendor: 'alpha' },
};

const requestBody = (format: Format, text: string, stream: boolean) =>
  format === 'responses'
    ? { model: ROUTES[format].model, input: text, stream }
    : {
        model: ROUTES[format].model,
        ...(format === 'messages' ? { max_tokens: 64 } : {}),
        messages: [{ role: 'user', content: text }],
        stream,
      };

/** A JSON answer of the format whose text is `text`. */
function jsonAnswer(format: Format, text: string): string {
  if (format === 'chat-completions') {
    return JSON.stringify({
      id: 'chatcmpl-1',
      object: 'chat.completion',
      created: 1,
      model: 'gen-5.5',
      choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 },
    });
  }
  if (format === 'messages') {
    return JSON.stringify({
      id: 'msg_1',
      type: 'message',
      role: 'assistant',
      model: 'beta-fable-5-1',
      content: [{ type: 'text', text }],
      stop_reason: 'end_turn',
      usage: { input_tokens: 11, output_tokens: 7 },
    });
  }
  return JSON.stringify({
    id: 'resp_1',
    object: 'response',
    status: 'completed',
    model: 'gen-5.5',
    output: [
      {
        type: 'message',
        id: 'msg_1',
        role: 'assistant',
        status: 'completed',
        content: [{ type: 'output_text', text, annotations: [] }],
      },
    ],
    usage: { input_tokens: 11, output_tokens: 7, total_tokens: 18 },
  });
}

/** A stream of the format whose text comes in `deltas`, as the upstream sends it (one string per event). */
function streamEvents(format: Format, deltas: readonly string[]): string[] {
  const text = deltas.join('');
  if (format === 'chat-completions') {
    const chunk = (delta: object, finish: string | null) =>
      `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'gen-5.5', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
    return [
      chunk({ role: 'assistant', content: '' }, null),
      ...deltas.map((delta) => chunk({ content: delta }, null)),
      chunk({}, 'stop'),
      `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'gen-5.5', choices: [], usage: { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 } })}\n\n`,
      'data: [DONE]\n\n',
    ];
  }
  const named = (payload: { type: string }) => `event: ${payload.type}\ndata: ${JSON.stringify(payload)}\n\n`;
  if (format === 'messages') {
    return [
      named({
        type: 'message_start',
        message: {
          id: 'msg_1',
          type: 'message',
          role: 'assistant',
          model: 'beta-fable-5-1',
          content: [],
          stop_reason: null,
          usage: { input_tokens: 11, output_tokens: 1 },
        },
      } as { type: string }),
      named({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } } as { type: string }),
      ...deltas.map((delta) =>
        named({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: delta } } as {
          type: string;
        }),
      ),
      named({ type: 'content_block_stop', index: 0 } as { type: string }),
      named({ type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 7 } } as {
        type: string;
      }),
      named({ type: 'message_stop' }),
    ];
  }
  const item = {
    type: 'message',
    id: 'msg_1',
    role: 'assistant',
    status: 'completed',
    content: [{ type: 'output_text', text, annotations: [] }],
  };
  return [
    named({
      type: 'response.created',
      response: { id: 'resp_1', object: 'response', status: 'in_progress', output: [] },
    } as { type: string }),
    ...deltas.map((delta) =>
      named({ type: 'response.output_text.delta', item_id: 'msg_1', output_index: 0, content_index: 0, delta } as {
        type: string;
      }),
    ),
    named({ type: 'response.output_text.done', item_id: 'msg_1', output_index: 0, content_index: 0, text } as {
      type: string;
    }),
    named({
      type: 'response.completed',
      response: {
        id: 'resp_1',
        object: 'response',
        status: 'completed',
        output: [item],
        usage: { input_tokens: 11, output_tokens: 7, total_tokens: 18 },
      },
    } as { type: string }),
  ];
}

interface Answer {
  readonly status: number;
  readonly text: string;
}

const GUARDRAILS = `guardrails:
  - { name: no-emails, use: pii, on: request, action: redact, entities: [email, phone, card] }
  - { name: no-codes, use: regex, on: response, action: block, patterns: ['PROJECT-[0-9]{4}'] }
  - { name: no-secrets, use: pii, on: response, action: redact, entities: [secret] }
`;

describe('guardrails end to end: prompts and answers, exact across stream events', function () {
  this.timeout(60_000);
  let upstream: ScriptedUpstream;
  let test: TestGateway;
  let configFile: string;
  const logs: string[] = [];
  /** What the scripted upstream answers next: a JSON body, or a stream's events (each written on its own). */
  let next: { kind: 'json'; body: string } | { kind: 'stream'; events: string[] };

  before(async () => {
    upstream = await ScriptedUpstream.start();
    upstream.script = async (_req: IncomingMessage, res: ServerResponse) => {
      if (next.kind === 'json') return res.writeHead(200, { 'content-type': 'application/json' }).end(next.body);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (const event of next.events) {
        res.write(event);
        await new Promise((resolve) => setImmediate(resolve));
      }
      res.end();
    };
    const { mkdtemp } = await import('node:fs/promises');
    const { tmpdir } = await import('node:os');
    const dir = await mkdtemp(join(tmpdir(), 'gateway-guardrails-'));
    configFile = join(dir, 'gateway.yaml');
    await writeFile(configFile, `logLevel: info\n${GUARDRAILS}`);
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        logs.push(chunk.toString());
        done();
      },
    });
    test = await startTestGateway({
      configFile,
      logTo: sink,
      env: { ALPHA_BASE_URL: upstream.url, BETA_BASE_URL: upstream.url },
    });
  });
  after(async () => {
    await test?.close();
    await upstream?.close();
  });
  beforeEach(() => {
    upstream.requests.length = 0;
  });

  async function post(path: string, body: string | object): Promise<Answer> {
    const response = await request(`${test.url}${path}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${TEST_KEY}`,
        'content-type': 'application/json',
        'anthropic-version': '2023-06-01',
      },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
    return { status: response.statusCode, text: await response.body.text() };
  }

  async function records(): Promise<Record<string, unknown>[]> {
    await test.gateway.flushUsage();
    const journal = await readFile(join(test.dataDir, 'usage.jsonl'), 'utf8').catch(() => '');
    return journal
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as Record<string, unknown>);
  }

  it('sends a prompt to the upstream without its e-mail address, every other byte as the client sent it', async () => {
    next = { kind: 'json', body: jsonAnswer('chat-completions', 'Noted.') };
    const content = 'Mail ada@example.com today, caf\\u00e9 \\"quoted\\" and call +44 20 7946 0958.';
    const sent = `{"model":"alpha/gen-5.5",  "messages":[{"role":"system","content":"Reply to ada@example.com never."},{"role":"assistant","content":"ada@example.com?"},{"role":"user","content":"${content}"}], "temperature": 0.50,"n":1}`;
    const answer = await post('/v1/chat/completions', sent);
    expect(answer.status, answer.text).to.equal(200);
    const received = upstream.requests[0]!.body;
    const decoded = JSON.parse(`"${content}"`) as string;
    const expected = sent
      .replace('"alpha/gen-5.5"', '"gen-5.5"')
      .replace('"Reply to ada@example.com never."', '"Reply to [EMAIL] never."')
      .replace('"ada@example.com?"', '"[EMAIL]?"')
      .replace(
        `"${content}"`,
        JSON.stringify(decoded.replace('ada@example.com', '[EMAIL]').replace('+44 20 7946 0958', '[PHONE]')),
      );
    // The assistant's earlier turn too: on a stateless route the client writes the whole history.
    expect(received).to.equal(expected);
    const [record] = (await records()).slice(-1);
    expect(record).to.deep.include({
      status: 200,
      guardrails: [{ name: 'no-emails', phase: 'request', action: 'redact' }],
    });
  });

  it('redacts the prompt of every route: Messages (system, tool results), Responses (instructions, input items) and /v1/chat', async () => {
    next = { kind: 'json', body: jsonAnswer('messages', 'Noted.') };
    await post('/v1/messages', {
      model: 'beta-latest',
      max_tokens: 16,
      system: [{ type: 'text', text: 'Owner: bob@example.org' }],
      messages: [
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 't1', content: 'found carl@example.net' },
            { type: 'text', text: 'card 4111 1111 1111 1111' },
          ],
        },
      ],
    });
    expect(upstream.lastBody()).to.deep.include({
      system: [{ type: 'text', text: 'Owner: [EMAIL]' }],
      messages: [
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 't1', content: 'found [EMAIL]' },
            { type: 'text', text: 'card [CARD]' },
          ],
        },
      ],
    });
    next = { kind: 'json', body: jsonAnswer('responses', 'Noted.') };
    await post('/v1/responses', {
      model: 'alpha/gen-5.5',
      instructions: 'Write to dora@example.com',
      input: [{ role: 'user', content: [{ type: 'input_text', text: 'and eve@example.com' }] }],
    });
    expect(upstream.lastBody()).to.deep.include({
      instructions: 'Write to [EMAIL]',
      input: [{ role: 'user', content: [{ type: 'input_text', text: 'and [EMAIL]' }] }],
    });
    next = { kind: 'json', body: jsonAnswer('responses', 'Noted.') };
    const chat = await post('/v1/chat', { model: 'alpha/gen-5.5', input: 'Hello fay@example.com' });
    expect(chat.status, chat.text).to.equal(200);
    expect(JSON.stringify(upstream.lastBody())).to.contain('Hello [EMAIL]').and.not.to.contain('fay@');
  });

  for (const format of ['chat-completions', 'messages', 'responses'] as const) {
    const { path } = ROUTES[format];

    it(`${format}: refuses a JSON answer holding a blocked pattern with GW_ERR_GUARDRAIL (400, the route's envelope), billed as the upstream billed it`, async () => {
      next = { kind: 'json', body: jsonAnswer(format, 'Your code is PROJECT-1234, keep it.') };
      const answer = await post(path, requestBody(format, 'What is my code?', false));
      expect(answer.status).to.equal(400);
      expect(answer.text).not.to.contain('PROJECT-1234');
      const body = JSON.parse(answer.text) as {
        detail: string;
        error: { code?: string; type: string; message: string };
      };
      expect(body.detail).to.contain("Guardrail 'no-codes' blocked the answer");
      if (format === 'messages')
        expect(body).to.deep.include({ type: 'error' }) && expect(body.error.type).to.equal('invalid_request_error');
      else expect(body.error.code).to.equal('GW_ERR_GUARDRAIL');
      const [record] = (await records()).slice(-1);
      expect(record).to.deep.include({
        status: 400,
        outcome: 'guardrail_blocked',
        inputTokens: 11,
        outputTokens: 7,
        guardrails: [{ name: 'no-codes', phase: 'response', action: 'block' }],
      });
    });

    it(`${format}: a stream whose pattern spans three events never delivers any of it and ends with an in-band GW_ERR_GUARDRAIL error`, async () => {
      next = { kind: 'stream', events: streamEvents(format, ['Your code is PRO', 'JECT-12', '34, keep it.']) };
      const answer = await post(path, requestBody(format, 'What is my code?', true));
      expect(answer.status).to.equal(200);
      for (const piece of ['PROJECT', 'PRO', 'JECT-12', '34, keep']) expect(answer.text).not.to.contain(piece);
      const events = answer.text.split(/\n\n/).filter(Boolean);
      const last = events.at(-1)!;
      expect(last).to.contain("Guardrail 'no-codes' blocked the answer");
      // The Messages error event carries a type and a message (as Anthropic's do); the others the code too.
      if (format === 'messages')
        expect(JSON.parse(last.slice(last.indexOf('data: ') + 6)).error).to.deep.include({
          type: 'invalid_request_error',
        });
      else expect(last).to.contain('"code":"GW_ERR_GUARDRAIL"');
      if (format !== 'chat-completions') expect(last).to.match(/^event: error\n/);
      expect(answer.text).not.to.contain('[DONE]');
      const [record] = (await records()).slice(-1);
      expect(record).to.deep.include({
        status: 200,
        outcome: 'guardrail_blocked',
        guardrails: [{ name: 'no-codes', phase: 'response', action: 'block' }],
      });
    });

    it(`${format}: a clean stream reaches the client byte for byte as the upstream sent it`, async () => {
      const events = streamEvents(format, ['Your code is PRO', 'JECT-12', 'ab, keep it', ' safe.']);
      next = { kind: 'stream', events };
      const answer = await post(path, requestBody(format, 'What is my code?', true));
      expect(answer.status).to.equal(200);
      expect(answer.text).to.equal(events.join(''));
    });

    it(`${format}: redacts a secret split across events inside the events, keeping each one valid`, async () => {
      const events = streamEvents(format, ['Use sk-abcdefgh', 'ijklmnop1234', 'qrstuv now.']);
      next = { kind: 'stream', events };
      const answer = await post(path, requestBody(format, 'Which key?', true));
      expect(answer.status).to.equal(200);
      expect(answer.text).not.to.contain('abcdefgh').and.not.to.contain('qrstuv');
      const payloads = answer.text
        .split(/\n\n/)
        .filter(Boolean)
        .map((event) =>
          event
            .split('\n')
            .find((line) => line.startsWith('data: '))!
            .slice(6),
        )
        .filter((data) => data !== '[DONE]');
      const parsed = payloads.map((data) => JSON.parse(data) as Record<string, any>);
      const text = parsed
        .map(
          (chunk) =>
            chunk.choices?.[0]?.delta?.content ??
            (chunk.type === 'content_block_delta'
              ? chunk.delta.text
              : chunk.type === 'response.output_text.delta'
                ? chunk.delta
                : ''),
        )
        .join('');
      expect(text).to.equal('Use [SECRET] now.');
      if (format === 'responses') {
        // The text repeated whole as its part ends, and in the finished response: redacted there too.
        expect(parsed.find((event) => event.type === 'response.output_text.done')!.text).to.equal('Use [SECRET] now.');
        expect(parsed.at(-1)!.response.output[0].content[0].text).to.equal('Use [SECRET] now.');
      } else
        expect(answer.text.endsWith(events.at(-1)!), "the events after the text are the upstream's own bytes").to.equal(
          true,
        );
    });
  }

  it('counts each action in gateway_guardrail_actions_total and logs each block without the text', async () => {
    const metrics = await (await request(`${test.url}/metrics`)).body.text();
    expect(metrics).to.match(
      /^gateway_guardrail_actions_total\{guardrail="no-emails",phase="request",action="redact"\} \d+$/m,
    );
    expect(metrics).to.match(
      /^gateway_guardrail_actions_total\{guardrail="no-codes",phase="response",action="block"\} 6$/m,
    );
    expect(metrics).to.match(
      /^gateway_guardrail_actions_total\{guardrail="no-secrets",phase="response",action="redact"\} 3$/m,
    );
    const blocks = logs
      .join('')
      .split('\n')
      .filter((line) => line.includes("guardrail 'no-codes' blocked"));
    expect(blocks).to.have.length(6);
    for (const line of blocks)
      expect(JSON.parse(line)).to.include({ guardrail: 'no-codes', phase: 'response', action: 'block' });
    const all = logs.join('');
    for (const text of ['PROJECT-1234', 'ada@example.com', 'abcdefgh']) expect(all).not.to.contain(text);
  });

  it('applies only the guardrails a key names ([]: none), else those of its team, else every one', async () => {
    const { gateway } = test;
    const as = async (key: string, format: Format, text: string, stream = false) => {
      const response = await request(`${test.url}${ROUTES[format].path}`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${key}`,
          'content-type': 'application/json',
          'anthropic-version': '2023-06-01',
        },
        body: JSON.stringify(requestBody(format, text, stream)),
      });
      return { status: response.statusCode, text: await response.body.text() };
    };
    const trusted = (await gateway.keys.create({ name: 'trusted', guardrails: [] })).key;
    const answersOnly = (
      await gateway.keys.create({ name: 'answers only', guardrails: ['no-codes', 'not-configured'] })
    ).key;
    next = { kind: 'json', body: jsonAnswer('chat-completions', 'Your code is PROJECT-1234.') };
    expect((await as(trusted, 'chat-completions', 'Mail ada@example.com')).status).to.equal(200);
    expect(upstream.lastBody().messages).to.deep.equal([{ role: 'user', content: 'Mail ada@example.com' }]);
    next = { kind: 'json', body: jsonAnswer('chat-completions', 'Your code is PROJECT-1234.') };
    expect((await as(answersOnly, 'chat-completions', 'Mail ada@example.com')).status).to.equal(400);
    expect(upstream.lastBody().messages).to.deep.equal([{ role: 'user', content: 'Mail ada@example.com' }]);
    const [record] = (await records()).slice(-1);
    expect(record).to.deep.include({ guardrails: [{ name: 'no-codes', phase: 'response', action: 'block' }] });
  });

  describe('webhook guardrails', () => {
    let hook: Server;
    let hookUrl: string;
    const asked: Record<string, unknown>[] = [];
    before(async () => {
      hook = createServer((req, res) => {
        let body = '';
        req.on('data', (chunk: Buffer) => (body += chunk.toString()));
        req.on('end', () => {
          const payload = JSON.parse(body) as { texts: string[] };
          asked.push(payload);
          if (req.url === '/silent') return; // never answers
          if (req.url === '/block')
            return res.writeHead(200, { 'content-type': 'application/json' }).end('{"action":"block"}');
          if (req.url === '/rewrite')
            return res
              .writeHead(200, { 'content-type': 'application/json' })
              .end(JSON.stringify({ action: 'rewrite', texts: payload.texts.map((text) => text.toUpperCase()) }));
          res.writeHead(200, { 'content-type': 'application/json' }).end('{"action":"allow"}');
        });
      });
      await new Promise<void>((resolve) => hook.listen(0, '127.0.0.1', resolve));
      hookUrl = `http://127.0.0.1:${(hook.address() as AddressInfo).port}`;
    });
    after(async () => {
      hook.closeAllConnections();
      await new Promise((resolve) => hook.close(resolve));
    });
    beforeEach(() => (asked.length = 0));

    async function use(entries: string): Promise<void> {
      await writeFile(configFile, `logLevel: info\nguardrails:\n${entries}`);
      const result = test.gateway.reloadConfig('test');
      expect(result.applied, result.error).to.equal(true);
    }

    it('one that times out lets the text through when it fails open', async () => {
      await use(
        `  - { name: moderation, use: webhook, on: request, url: ${hookUrl}/silent, timeoutMs: 50, failMode: open }\n`,
      );
      next = { kind: 'json', body: jsonAnswer('chat-completions', 'Fine.') };
      const answer = await post('/v1/chat/completions', requestBody('chat-completions', 'Is this fine?', false));
      expect(answer.status, answer.text).to.equal(200);
      expect(upstream.requests).to.have.length(1);
      expect(asked[0]).to.deep.include({ guardrail: 'moderation', phase: 'request', texts: ['Is this fine?'] });
      expect(asked[0]!.context as Record<string, unknown>).to.include({
        route: 'chat-completions',
        model: 'alpha/gen-5.5',
        stream: false,
      });
      expect(logs.join('')).to.contain(
        "guardrail 'moderation' let a request pass unchecked: its webhook no answer within 50 ms (it fails open)",
      );
    });

    it('one that times out refuses the request (503 GW_ERR_GUARDRAIL) when it fails closed, before anything went upstream', async () => {
      await use(
        `  - { name: moderation, use: webhook, on: request, url: ${hookUrl}/silent, timeoutMs: 50, failMode: closed }\n`,
      );
      const answer = await post('/v1/chat/completions', requestBody('chat-completions', 'Is this fine?', false));
      expect(answer.status).to.equal(503);
      expect(JSON.parse(answer.text)).to.deep.include({
        error: {
          message:
            "Guardrail 'moderation' could not check the request (its service did not answer) and refuses what it cannot check; retry later",
          type: 'server_error',
          param: null,
          code: 'GW_ERR_GUARDRAIL',
        },
      });
      expect(upstream.requests).to.have.length(0);
    });

    it('one that blocks, blocks: the request (400) and a streamed answer (in band)', async () => {
      await use(`  - { name: moderation, use: webhook, on: both, url: ${hookUrl}/block, failMode: open }\n`);
      const refused = await post('/v1/messages', requestBody('messages', 'Anything', false));
      expect(refused.status).to.equal(400);
      expect(JSON.parse(refused.text)).to.deep.include({
        type: 'error',
        error: {
          type: 'invalid_request_error',
          message:
            "Guardrail 'moderation' blocked the request: it holds content this gateway does not let reach a model",
        },
      });
      expect(upstream.requests).to.have.length(0);

      await use(`  - { name: moderation, use: webhook, on: response, url: ${hookUrl}/block, failMode: open }\n`);
      next = { kind: 'stream', events: streamEvents('responses', ['Some', ' answer']) };
      const stream = await post('/v1/responses', requestBody('responses', 'Anything', true));
      expect(stream.status).to.equal(200);
      expect(stream.text).not.to.contain('"delta"');
      expect(stream.text).to.contain('GW_ERR_GUARDRAIL');
      expect(asked.at(-1)).to.deep.include({ phase: 'response' });
    });

    it('one that rewrites, rewrites the prompt and a JSON answer', async () => {
      await use(`  - { name: shout, use: webhook, on: both, url: ${hookUrl}/rewrite, failMode: closed }\n`);
      next = { kind: 'json', body: jsonAnswer('chat-completions', 'quiet answer') };
      const answer = await post('/v1/chat/completions', requestBody('chat-completions', 'quiet please', false));
      expect(answer.status, answer.text).to.equal(200);
      expect((upstream.lastBody().messages as { content: string }[])[0]!.content).to.equal('QUIET PLEASE');
      expect(
        (JSON.parse(answer.text) as { choices: { message: { content: string } }[] }).choices[0]!.message.content,
      ).to.equal('QUIET ANSWER');
    });
  });
});
