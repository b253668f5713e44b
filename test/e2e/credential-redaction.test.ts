import { expect } from 'chai';
import fc from 'fast-check';
import { mkdtemp, rm } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { request } from 'undici';
import { loadConfig } from '../../src/config/gateway-config.ts';
import { startGateway, type Gateway } from '../../src/server/gateway.ts';
import { createLogger } from '../../src/core/logger.ts';
import { REDACTED } from '../../src/data-plane/upstream/redact-credential.ts';
import { encodeKey, keyEncodings, realisticKey, revealsSecret } from '../helpers/credential-readings.ts';
import { ScriptedUpstream } from '../helpers/scripted-upstream.ts';
import { TEST_KEY } from '../helpers/test-gateway.ts';

type Case = 'ok' | 'stream' | 'error' | 'busy';
type Format = 'chat-completions' | 'responses' | 'messages' | 'count-tokens';

const FORMAT_OF: Record<string, Format> = {
  '/v1/chat/completions': 'chat-completions',
  '/v1/responses': 'responses',
  '/v1/messages': 'messages',
  '/v1/messages/count_tokens': 'count-tokens',
};

const sse = (name: string | undefined, data: unknown) =>
  `${name ? `event: ${name}\n` : ''}data: ${JSON.stringify(data)}\n\n`;

/**
 * What the upstream answers, `FORM` standing where it echoes the key: the caller puts the written form
 * there as it is (a JSON-string-safe text), so the upstream's bytes carry exactly that form.
 */
function upstreamAnswer(format: Format, kind: Case): { status: number; type: string; body: string } {
  const text = 'key FORM here';
  if (kind === 'error')
    return {
      status: 400,
      type: 'application/json',
      body: JSON.stringify({ error: { type: 'invalid_request_error', message: `Incorrect API key provided: FORM` } }),
    };
  if (kind === 'busy')
    return {
      status: 429,
      type: 'application/json',
      body: JSON.stringify({ error: { type: 'rate_limit_error', message: `Slow down, FORM` } }),
    };
  if (kind === 'stream') {
    const events =
      format === 'chat-completions'
        ? [
            sse(undefined, { choices: [{ index: 0, delta: { content: text } }] }),
            sse(undefined, { choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] }),
            sse(undefined, { choices: [], usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } }),
            'data: [DONE]\n\n',
          ]
        : format === 'responses'
          ? [
              sse('response.output_text.delta', { type: 'response.output_text.delta', delta: text }),
              sse('response.completed', {
                type: 'response.completed',
                response: { usage: { input_tokens: 3, output_tokens: 2, total_tokens: 5 } },
              }),
            ]
          : [
              sse('message_start', {
                type: 'message_start',
                message: { usage: { input_tokens: 3, output_tokens: 1 } },
              }),
              sse('content_block_delta', {
                type: 'content_block_delta',
                index: 0,
                delta: { type: 'text_delta', text },
              }),
              sse('message_delta', {
                type: 'message_delta',
                delta: { stop_reason: 'end_turn' },
                usage: { output_tokens: 2 },
              }),
              sse('message_stop', { type: 'message_stop' }),
            ];
    return { status: 200, type: 'text/event-stream', body: events.join('') };
  }
  const body =
    format === 'chat-completions'
      ? {
          id: 'c1',
          object: 'chat.completion',
          choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }],
          usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 },
        }
      : format === 'responses'
        ? {
            id: 'r1',
            object: 'response',
            status: 'completed',
            output: [{ type: 'message', role: 'assistant', content: [{ type: 'output_text', text }] }],
            usage: { input_tokens: 3, output_tokens: 2, total_tokens: 5 },
          }
        : format === 'messages'
          ? {
              id: 'm1',
              type: 'message',
              role: 'assistant',
              content: [{ type: 'text', text }],
              usage: { input_tokens: 3, output_tokens: 2 },
            }
          : { input_tokens: 3, note: text };
  return { status: 200, type: 'application/json', body: JSON.stringify(body) };
}

/** The client requests: each names its case in its text, which the upstream receives. */
const REQUESTS: { path: string; kind: Case; body: (marker: string) => Record<string, unknown> }[] = [];
for (const kind of ['ok', 'stream', 'error', 'busy'] as const) {
  const stream = kind === 'stream';
  REQUESTS.push(
    {
      path: '/v1/chat/completions',
      kind,
      body: (marker) => ({ model: 'alpha/gen-5.5', stream, messages: [{ role: 'user', content: marker }] }),
    },
    { path: '/v1/responses', kind, body: (marker) => ({ model: 'alpha/gen-5.5', stream, input: marker }) },
    {
      path: '/v1/messages',
      kind,
      body: (marker) => ({
        model: 'beta-opus-4-8',
        stream,
        max_tokens: 5,
        messages: [{ role: 'user', content: marker }],
      }),
    },
  );
  if (!stream) {
    REQUESTS.push({
      path: '/v1/messages/count_tokens',
      kind,
      body: (marker) => ({ model: 'beta-opus-4-8', messages: [{ role: 'user', content: marker }] }),
    });
    REQUESTS.push({
      path: '/v1/chat',
      kind,
      body: (marker) => ({ model: 'alpha/gen-5.5', input: marker, max_retries: 0 }),
    });
  }
}

describe('upstream credential redaction through the gateway', function () {
  this.timeout(300_000);
  let upstream: ScriptedUpstream;
  let dataDir: string;

  before(async () => {
    upstream = await ScriptedUpstream.start();
    dataDir = await mkdtemp(join(tmpdir(), 'gateway-redaction-'));
  });
  after(async () => {
    await upstream.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  async function startWithKey(key: string, logs: string[]): Promise<Gateway> {
    const env: NodeJS.ProcessEnv = {
      PORT: '0',
      HOST: '127.0.0.1',
      GATEWAY_DATA_DIR: dataDir,
      GATEWAY_API_KEYS: TEST_KEY,
      GATEWAY_CONFIG: join(dataDir, 'no-config.yaml'),
      LOG_LEVEL: 'info',
      ALPHA_BASE_URL: upstream.url,
      ALPHA_API_KEY: key,
      BETA_BASE_URL: upstream.url,
      BETA_API_KEY: key,
    };
    const config = { ...loadConfig({ ...env, GATEWAY_CONFIG: undefined }, process.cwd()), dataDir };
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        logs.push(chunk.toString());
        done();
      },
    });
    return startGateway(config, env, createLogger('info', sink));
  }

  it('property: no written form of the key (raw, JSON-escaped, percent-encoded, mixed) reaches a body, header, event or log line, on any route', async () => {
    const run = realisticKey.chain((key) =>
      fc.record({
        key: fc.constant(key),
        encodings: fc.array(keyEncodings(key.length), { minLength: REQUESTS.length, maxLength: REQUESTS.length }),
        chunk: fc.integer({ min: 1, max: 9 }),
      }),
    );
    await fc.assert(
      fc.asyncProperty(run, async ({ key, encodings, chunk }) => {
        const forms = encodings.map((encoding) => encodeKey(key, encoding));
        // The form of each case, found by its marker in what the upstream receives.
        upstream.script = async (req: IncomingMessage, res: ServerResponse, body: string) => {
          const index = Number(/case-(\d+)/.exec(body)![1]);
          const form = forms[index]!;
          const answer = upstreamAnswer(FORMAT_OF[req.url!]!, REQUESTS[index]!.kind);
          res.writeHead(answer.status, {
            'content-type': `${answer.type}; trace=${form}`,
            'x-request-id': `req-${form}`,
            'request-id': form,
            'retry-after-ms': form,
            'x-should-retry': form,
            ...(answer.status === 200 ? { 'retry-after': form } : {}),
          });
          // Streams and bodies alike go out cut every `chunk` bytes, the key split across writes.
          const bytes = Buffer.from(answer.body.replace('FORM', form));
          for (let at = 0; at < bytes.length; at += chunk) {
            res.write(bytes.subarray(at, at + chunk));
            if (answer.type === 'text/event-stream') await new Promise((resolve) => setImmediate(resolve));
          }
          res.end();
        };
        const logs: string[] = [];
        const gateway = await startWithKey(key, logs);
        const seen: { what: string; text: string }[] = [];
        try {
          for (const [index, entry] of REQUESTS.entries()) {
            const response = await request(`${gateway.url}${entry.path}`, {
              method: 'POST',
              headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' },
              body: JSON.stringify(entry.body(`case-${index}`)),
            });
            const text = await response.body.text();
            const what = `${entry.path} ${entry.kind}`;
            seen.push(
              { what: `${what} body`, text },
              { what: `${what} headers`, text: JSON.stringify(response.headers) },
            );
            const expected = upstreamAnswer(FORMAT_OF[entry.path] ?? 'responses', entry.kind).body.replace(
              'FORM',
              REDACTED,
            );
            if (entry.path === '/v1/chat') {
              const answer = JSON.parse(text) as { result?: { text: string }; detail?: string };
              if (entry.kind === 'ok') expect(answer.result?.text, what).to.equal(`key ${REDACTED} here`);
              else expect(answer.detail, what).to.contain(REDACTED);
            } else {
              // Every other byte relayed as it came.
              expect(text, what).to.equal(expected);
              expect(response.headers['x-upstream-request-id'], what).to.equal(`req-${REDACTED}`);
              expect(response.headers['request-id'], what).to.equal(REDACTED);
              expect(response.headers['retry-after-ms'], what).to.equal(REDACTED);
            }
          }
        } finally {
          await gateway.close();
        }
        seen.push({ what: 'logs', text: logs.join('') });
        // The log check is not vacuous: the access lines and /v1/chat's logged 502s are there.
        expect(logs.join(''))
          .to.contain('"route":"chat-completions"')
          .and.to.contain(`upstream answered 400: Incorrect API key provided: ${REDACTED}`);
        for (const { what, text } of seen) expect(revealsSecret(text, key), what).to.equal(false);
      }),
      { numRuns: 40 },
    );
  });

  it('a key split across the text deltas of a stream (2 and 3 deltas, chunked, CRLF) never reaches the client joined, on each stream route', async () => {
    const key = 'sk-up/stream+key-7Hq2Zr9Xw4Lm';
    const before = 'Your key: ';
    const after = ' (keep it safe).';
    const at = before.length;
    // Where the deltas end: the first with 5 characters of the key (held until the next shows it goes on),
    // then three deltas, the first with 2 (sent) and the middle inside the key.
    const splits = [[at + 5], [at + 2, at + 11]];
    const text = `${before}${key}${after}`;
    const deltasOf = (ends: number[]) =>
      [0, ...ends, text.length].slice(1).map((end, index, all) => text.slice(index === 0 ? 0 : all[index - 1], end));
    const eventsOf = (format: Format, deltas: string[]): string[] =>
      format === 'chat-completions'
        ? [
            ...deltas.map((content) =>
              sse(undefined, {
                id: 'chatcmpl-1',
                object: 'chat.completion.chunk',
                choices: [{ index: 0, delta: { content }, finish_reason: null }],
              }),
            ),
            sse(undefined, {
              id: 'chatcmpl-1',
              object: 'chat.completion.chunk',
              choices: [{ index: 0, delta: {}, finish_reason: 'stop' }],
            }),
            sse(undefined, {
              id: 'chatcmpl-1',
              object: 'chat.completion.chunk',
              choices: [],
              usage: { prompt_tokens: 3, completion_tokens: 9, total_tokens: 12 },
            }),
            'data: [DONE]\n\n',
          ]
        : format === 'responses'
          ? [
              ...deltas.map((delta) =>
                sse('response.output_text.delta', {
                  type: 'response.output_text.delta',
                  item_id: 'msg_1',
                  output_index: 0,
                  content_index: 0,
                  delta,
                }),
              ),
              sse('response.output_text.done', {
                type: 'response.output_text.done',
                item_id: 'msg_1',
                output_index: 0,
                content_index: 0,
                text,
              }),
              sse('response.completed', {
                type: 'response.completed',
                response: { usage: { input_tokens: 3, output_tokens: 9, total_tokens: 12 } },
              }),
            ]
          : [
              sse('message_start', {
                type: 'message_start',
                message: { usage: { input_tokens: 3, output_tokens: 1 } },
              }),
              sse('content_block_start', {
                type: 'content_block_start',
                index: 0,
                content_block: { type: 'text', text: '' },
              }),
              ...deltas.flatMap((delta, index) => [
                sse('content_block_delta', {
                  type: 'content_block_delta',
                  index: 0,
                  delta: { type: 'text_delta', text: delta },
                }),
                ...(index === 0 ? [sse('ping', { type: 'ping' })] : []),
              ]),
              sse('content_block_stop', { type: 'content_block_stop', index: 0 }),
              sse('message_delta', {
                type: 'message_delta',
                delta: { stop_reason: 'end_turn' },
                usage: { output_tokens: 9 },
              }),
              sse('message_stop', { type: 'message_stop' }),
            ];
    /** The text a client joins from the deltas it received. */
    const joined = (format: Format, body: string): string =>
      body
        .split(/\r\n\r\n/)
        .flatMap((block) =>
          block
            .split(/\r\n/)
            .filter((line) => line.startsWith('data: ') && line !== 'data: [DONE]')
            .map((line) => JSON.parse(line.slice(6)) as Record<string, any>),
        )
        .map((payload) =>
          format === 'chat-completions'
            ? (payload.choices?.[0]?.delta?.content ?? '')
            : format === 'responses'
              ? payload.type === 'response.output_text.delta'
                ? payload.delta
                : ''
              : payload.type === 'content_block_delta'
                ? payload.delta.text
                : '',
        )
        .join('');

    let split = splits[0]!;
    upstream.script = async (req: IncomingMessage, res: ServerResponse) => {
      const format = FORMAT_OF[req.url!]!;
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      // CRLF line endings, the bytes cut every 7, each piece its own socket write.
      const bytes = Buffer.from(eventsOf(format, deltasOf(split)).join('').replace(/\n/g, '\r\n'));
      for (let offset = 0; offset < bytes.length; offset += 7) {
        res.write(bytes.subarray(offset, offset + 7));
        await new Promise((resolve) => setImmediate(resolve));
      }
      res.end();
    };
    const logs: string[] = [];
    const gateway = await startWithKey(key, logs);
    try {
      for (const ends of splits) {
        split = ends;
        for (const [path, model] of [
          ['/v1/chat/completions', 'alpha/gen-5.5'],
          ['/v1/responses', 'alpha/gen-5.5'],
          ['/v1/messages', 'beta-opus-4-8'],
        ] as const) {
          const body =
            path === '/v1/responses'
              ? { model, stream: true, input: 'hi' }
              : { model, stream: true, max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] };
          const response = await request(`${gateway.url}${path}`, {
            method: 'POST',
            headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' },
            body: JSON.stringify(body),
          });
          const received = await response.body.text();
          const what = `${path} split at ${ends.join(',')}`;
          expect(response.statusCode, what).to.equal(200);
          const format = FORMAT_OF[path]!;
          // At most a start of the key shorter than the hold threshold (here 2 characters) shows before the marker.
          expect(joined(format, received), what).to.equal(
            `${before}${ends[0]! - at < 4 ? key.slice(0, ends[0]! - at) : ''}${REDACTED}${after}`,
          );
          expect(revealsSecret(received, key), what).to.equal(false);
          expect(received, what).not.to.contain(key.slice(0, 4));
        }
      }
    } finally {
      await gateway.close();
    }
    expect(revealsSecret(logs.join(''), key)).to.equal(false);
  });
});
