import { expect } from 'chai';
import { pathologicalRedactionCases } from '../../fixtures/pathological-redaction.ts';
import fc from 'fast-check';
import type { ServerResponse } from 'node:http';
import { Writable } from 'node:stream';
import { relaySse, SseSplitter } from '../../../src/data-plane/sse/sse-relay.ts';
import {
  HOLD_MIN_CHARS,
  MAX_HELD_EVENTS,
  MAX_PERCENT_DEPTH,
  REDACTED,
  redactCredential,
  redactCredentialText,
  StreamRedactor,
} from '../../../src/data-plane/upstream/redact-credential.ts';
import { encodedKey, realisticKey, revealsSecret } from '../../helpers/credential-readings.ts';

const redact = (text: string, secret: string) => redactCredential(Buffer.from(text), secret).toString();

describe('redactCredential', () => {
  const secret = 'upstream-secret-key';

  it('replaces every occurrence of the secret and leaves the rest byte for byte', () => {
    const body = Buffer.from(`{"error":{"message":"Incorrect API key: ${secret}. Header was Bearer ${secret}"},"ü":1}`);
    expect(redactCredential(body, secret).toString()).to.equal(
      '{"error":{"message":"Incorrect API key: [REDACTED]. Header was Bearer [REDACTED]"},"ü":1}',
    );
    expect(redactCredentialText(`key ${secret}!`, secret)).to.equal('key [REDACTED]!');
  });

  it('returns the same buffer when the secret is absent, unset or too short to search for', () => {
    const body = Buffer.from('{"ok":true,"k":"abc"}');
    expect(redactCredential(body, secret)).to.equal(body);
    expect(redactCredential(body, undefined)).to.equal(body);
    expect(redactCredential(body, 'abc')).to.equal(body);
  });

  it('returns the same buffer when only escapes that stand for no character of the secret occur', () => {
    const body = Buffer.from('{"t":"line\\nquote\\" caf\\u00e9 \\u4e2d\\u6587 \\\\n 100% a%20b %zz \\u00"}');
    expect(redactCredential(body, secret)).to.equal(body);
    const text = 'a\\nb 50% off';
    expect(redactCredentialText(text, secret)).to.equal(text);
  });

  it('finds the secret with its characters JSON-escaped in either case, percent-encoded, or both mixed', () => {
    const cases = [
      'upstream\\u002dsecret\\u002dkey',
      'upstream\\u002Dsecret-key',
      '\\u0075\\u0070\\u0073\\u0074\\u0072\\u0065\\u0061\\u006d\\u002d\\u0073\\u0065\\u0063\\u0072\\u0065\\u0074\\u002d\\u006b\\u0065\\u0079',
      'upstream%2Dsecret%2dkey',
      '%75pstream-secret-ke%79',
      'up\\u0073tream%2dsecret\\u002Dk%65y',
    ];
    for (const written of cases) {
      expect(redact(`{"error":{"message":"bad key ${written}."}}`, secret), written).to.equal(
        '{"error":{"message":"bad key [REDACTED]."}}',
      );
    }
  });

  it('finds the secret escaped in JSON nested in a JSON string, at any depth', () => {
    expect(redact('{"message":"{\\"detail\\":\\"key upstream\\\\u002dsecret-key\\"}"}', secret)).to.equal(
      '{"message":"{\\"detail\\":\\"key [REDACTED]\\"}"}',
    );
    expect(redact('x upstream\\\\\\\\u002dsecret\\\\u002Dkey x', secret)).to.equal('x [REDACTED] x');
  });

  it('finds a secret with a slash written as \\/ (at any depth), and with non-ASCII characters escaped', () => {
    const slashed = 'key/with/slashes+and=';
    expect(redact('{"k":"key\\/with\\\\\\/slashes%2band\\u003d"}', slashed)).to.equal('{"k":"[REDACTED]"}');
    expect(redact('{"k":"key\\u002fwith/slashes+and="}', slashed)).to.equal('{"k":"[REDACTED]"}');
    const accented = 'clé-secrète-日本';
    expect(redact('{"k":"cl\\u00e9-secr\\u00E8te-\\u65e5\\u672c"}', accented)).to.equal('{"k":"[REDACTED]"}');
    expect(redact('{"k":"cl%C3%A9-secrète-%E6%97%A5%E6%9C%AC"}', accented)).to.equal('{"k":"[REDACTED]"}');
  });

  it('keeps JSON valid when the secret begins inside an escape: the escape goes with it', () => {
    // The key starts with hex digits, which a preceding `\u00` takes as the rest of its escape.
    const hexKey = '41bcdef-0123456789';
    const inEscape = redact(`{"k":"\\u00${hexKey}"}`, hexKey);
    expect(inEscape).to.equal('{"k":"[REDACTED]"}');
    // An unpaired backslash before it escapes its first character.
    const tKey = 'tabcdef-0123456789';
    expect(redact(`{"k":"x\\${tKey}"}`, tKey)).to.equal('{"k":"x[REDACTED]"}');
    expect(redact(`{"k":"x\\\\${tKey}"}`, tKey)).to.equal('{"k":"x\\\\[REDACTED]"}');
    for (const text of [inEscape, redact(`{"k":"x\\${tKey}"}`, tKey)]) expect(() => JSON.parse(text)).not.to.throw();
  });

  it('merges overlapping occurrences into one replacement', () => {
    expect(redact('aaaaaaaaaaa', 'aaaaaaaaaa')).to.equal(REDACTED);
    expect(redact('aaaaaaaaaa\\u0061', 'aaaaaaaaaa')).to.equal(REDACTED);
  });

  it('redacts text the same way and hands back the same string when nothing matched', () => {
    expect(redactCredentialText('Bearer upstream\\u002dsecret%2Dkey', secret)).to.equal('Bearer [REDACTED]');
    const plain = 'nothing to see \\u0041';
    expect(redactCredentialText(plain, secret)).to.equal(plain);
  });

  it('property: any written form of a realistic key, inside any JSON text, is replaced whole and the JSON stays valid', () => {
    fc.assert(
      fc.property(encodedKey, fc.string(), fc.string(), ({ key, encoded }, before, after) => {
        // Spaces keep the key from running into the text around it.
        const head = `{"message":${JSON.stringify(`${before} `).slice(0, -1)}`;
        const tail = `${JSON.stringify(` ${after}`).slice(1)},"n":1}`;
        fc.pre(!revealsSecret(head + tail, key));
        const out = redact(head + encoded + tail, key);
        expect(out).to.equal(head + REDACTED + tail);
        expect(revealsSecret(out, key)).to.equal(false);
        expect(JSON.parse(out)).to.deep.equal({ message: `${before} ${REDACTED} ${after}`, n: 1 });
      }),
      { numRuns: 500 },
    );
  });

  it('property: the key is found among long runs of escapes, those standing for its own characters included', () => {
    const fragment = fc.constantFrom(
      '\\u00e9',
      '\\u00E8',
      '\\u0041',
      '\\u002d',
      '\\\\u0062',
      '%20',
      '%2d',
      '%4A',
      '\\n',
      '\\"',
      '\\\\',
      '100% ',
      'ab',
      '-',
      ' ',
    );
    const run = fc.array(fragment, { maxLength: 80 }).map((parts) => parts.join(''));
    fc.assert(
      fc.property(encodedKey, run, run, ({ key, encoded }, before, after) => {
        const head = `{"t":"${before} `;
        const tail = ` ${after}"}`;
        fc.pre(!revealsSecret(head + tail, key));
        const out = redact(head + encoded + tail, key);
        expect(out).to.equal(head + REDACTED + tail);
        expect(() => JSON.parse(out)).not.to.throw();
      }),
      { numRuns: 300 },
    );
  });

  it('finds the secret percent-encoded again and again (a URL in a URL parameter), up to MAX_PERCENT_DEPTH levels, per character and mixed', () => {
    const key = 'sk-up/stream+key';
    const cases = [
      'sk-up%252Fstream%252Bkey',
      'sk-up%25252Fstream%25252bkey',
      'sk-up%2Fstream%25252Bkey',
      '%2573k-up%252fstream+key',
      '%252573%25256B%25252Dup/stream%2Bkey',
      'sk-up\\u002fstream%252Bkey',
      'sk\u002dup%252Fstream%25252B%256b%2565%2579',
    ];
    expect(MAX_PERCENT_DEPTH).to.equal(3);
    for (const written of cases) {
      expect(
        redact(`{"error":{"message":"GET /v1?next=https%3A%2F%2Fx%2Fy%3Fkey%3D${written}&a=1 failed"}}`, key),
        written,
      ).to.equal(`{"error":{"message":"GET /v1?next=https%3A%2F%2Fx%2Fy%3Fkey%3D${REDACTED}&a=1 failed"}}`);
      expect(redactCredentialText(`url ${written}`, key), written).to.equal(`url ${REDACTED}`);
    }
    // One level deeper than the bound is not searched.
    const tooDeep = 'sk-up%2525252Fstream+key';
    expect(redact(tooDeep, key)).to.equal(tooDeep);
  });

  it('finds a secret with `%` in it however deep its own `%` is encoded', () => {
    const key = 'pct%key%value';
    for (const written of ['pct%key%value', 'pct%25key%2525value', 'pct%252525key%value', '%70ct%2525key%25value']) {
      expect(redact(`[${written}]`, key), written).to.equal(`[${REDACTED}]`);
    }
  });

  it('property: any realistic key, each character raw, JSON-escaped or percent-encoded at a depth of 1 to 3, is replaced whole', () => {
    const way = fc.constantFrom('raw', 'json', 'percent', 'percent2', 'percent3');
    const written = realisticKey.chain((key) =>
      fc.array(way, { minLength: key.length, maxLength: key.length }).map((ways) => ({ key, ways })),
    );
    const hex = (code: number) => code.toString(16).padStart(2, '0').toUpperCase();
    fc.assert(
      fc.property(written, fc.string(), ({ key, ways }, around) => {
        const form = Array.from(key, (char, index) => {
          const code = char.charCodeAt(0);
          const way = ways[index]!;
          if (way === 'raw') return char;
          if (way === 'json') return `\\u00${hex(code)}`;
          return `%${'25'.repeat(Number(way.slice(7) || 1) - 1)}${hex(code)}`;
        }).join('');
        const head = `{"m":${JSON.stringify(`${around} `).slice(0, -1)}`;
        fc.pre(!revealsSecret(head, key));
        const out = redact(`${head}${form}"}`, key);
        expect(out).to.equal(`${head}${REDACTED}"}`);
        expect(revealsSecret(out, key)).to.equal(false);
      }),
      { numRuns: 300 },
    );
  });

  it('reads pathological input (2 MiB of nested percent escapes and near misses) whole, redacting nothing that is not the key', () => {
    // Its cost (linear in the input) is measured by `node --import tsx bench/redaction-cost.ts`, not here.
    const size = 2 * 1024 * 1024;
    const fill = (unit: string) => Buffer.from(unit.repeat(Math.ceil(size / unit.length)).slice(0, size));
    for (const [unit, key] of pathologicalRedactionCases()) {
      const input = fill(unit);
      expect(redactCredential(input, key).equals(input), unit).to.equal(true);
    }
  });

  it('property: text without the key comes back as the same buffer', () => {
    fc.assert(
      fc.property(encodedKey, fc.jsonValue(), ({ key }, value) => {
        const bytes = Buffer.from(JSON.stringify(value));
        fc.pre(!revealsSecret(bytes.toString(), key));
        expect(redactCredential(bytes, key)).to.equal(bytes);
      }),
      { numRuns: 300 },
    );
  });
});

describe('StreamRedactor: a key split across the text deltas of a stream', () => {
  const KEY = 'sk-up/stream+key-7Hq2Zr9Xw4Lm';
  type Format = 'chat-completions' | 'messages' | 'responses';
  const FORMATS: Format[] = ['chat-completions', 'messages', 'responses'];

  const sse = (name: string | undefined, data: unknown) =>
    `${name ? `event: ${name}\n` : ''}data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`;

  /**
   * An answer as the vendors stream it (recorded shapes: ids, fingerprints, pings, the done events that
   * repeat the whole text), its text in `deltas`; `end: false` stops right after the last delta.
   */
  function recorded(format: Format, deltas: readonly string[], { end = true } = {}): string[] {
    const whole = deltas.join('');
    if (format === 'chat-completions') {
      const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
        sse(undefined, {
          id: 'chatcmpl-AZ9kq1Jx',
          object: 'chat.completion.chunk',
          created: 1733000000,
          model: 'gpt-4o-mini-2024-07-18',
          system_fingerprint: 'fp_0aa8d3e20b',
          choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
        });
      const events = [
        chunk({ role: 'assistant', content: '', refusal: null }),
        ...deltas.map((content) => chunk({ content })),
      ];
      if (end)
        events.push(
          chunk({}, 'stop'),
          sse(undefined, {
            id: 'chatcmpl-AZ9kq1Jx',
            object: 'chat.completion.chunk',
            choices: [],
            usage: { prompt_tokens: 9, completion_tokens: 12, total_tokens: 21 },
          }),
          'data: [DONE]\n\n',
        );
      return events;
    }
    if (format === 'messages') {
      const events = [
        sse('message_start', {
          type: 'message_start',
          message: {
            id: 'msg_01XFDUDYJgAACzvnptvVoYEL',
            type: 'message',
            role: 'assistant',
            model: 'claude-sonnet-4-5',
            content: [],
            stop_reason: null,
            usage: { input_tokens: 25, output_tokens: 1 },
          },
        }),
        sse('content_block_start', {
          type: 'content_block_start',
          index: 0,
          content_block: { type: 'text', text: '' },
        }),
        sse('ping', '{"type": "ping"}'),
      ];
      deltas.forEach((text, index) => {
        events.push(
          sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } }),
        );
        // A ping between two deltas: a held event stays held past it.
        if (index === 0) events.push(sse('ping', '{"type": "ping"}'));
      });
      if (end)
        events.push(
          sse('content_block_stop', { type: 'content_block_stop', index: 0 }),
          sse('message_delta', {
            type: 'message_delta',
            delta: { stop_reason: 'end_turn', stop_sequence: null },
            usage: { output_tokens: 15 },
          }),
          sse('message_stop', { type: 'message_stop' }),
        );
      return events;
    }
    const item = {
      id: 'msg_67ccd3acc8d48190a77525dc6de64b4104becbd5',
      type: 'message',
      status: 'in_progress',
      role: 'assistant',
      content: [],
    };
    let sequence = 0;
    const event = (type: string, rest: Record<string, unknown>) =>
      sse(type, { type, sequence_number: sequence++, ...rest });
    const events = [
      event('response.created', {
        response: {
          id: 'resp_67ccd3a9da748190baa7f1570fe91ac6',
          object: 'response',
          status: 'in_progress',
          output: [],
        },
      }),
      event('response.output_item.added', { output_index: 0, item }),
      event('response.content_part.added', {
        item_id: item.id,
        output_index: 0,
        content_index: 0,
        part: { type: 'output_text', text: '', annotations: [] },
      }),
      ...deltas.map((delta) =>
        event('response.output_text.delta', {
          item_id: item.id,
          output_index: 0,
          content_index: 0,
          delta,
          logprobs: [],
        }),
      ),
    ];
    if (end) {
      events.push(
        event('response.output_text.done', {
          item_id: item.id,
          output_index: 0,
          content_index: 0,
          text: whole,
          logprobs: [],
        }),
        event('response.content_part.done', {
          item_id: item.id,
          output_index: 0,
          content_index: 0,
          part: { type: 'output_text', text: whole, annotations: [] },
        }),
        event('response.completed', {
          response: {
            id: 'resp_67ccd3a9da748190baa7f1570fe91ac6',
            status: 'completed',
            output: [{ ...item, status: 'completed', content: [{ type: 'output_text', text: whole }] }],
            usage: { input_tokens: 9, output_tokens: 12, total_tokens: 21 },
          },
        }),
      );
    }
    return events;
  }

  /** The text a client joins from the deltas of the stream it received (of one Chat choice). */
  function joinedText(format: Format, bytes: Buffer, choice = 0): string {
    let text = '';
    for (const { event } of new SseSplitter().push(bytes)) {
      if (!event || event.data === '[DONE]') continue;
      const payload = JSON.parse(event.data) as Record<string, any>;
      if (format === 'chat-completions')
        text += (payload.choices as any[]).find((one) => one.index === choice)?.delta?.content ?? '';
      else if (format === 'messages') text += payload.type === 'content_block_delta' ? payload.delta.text : '';
      else text += payload.type === 'response.output_text.delta' ? payload.delta : '';
    }
    return text;
  }

  /** What a client receives of `events` relayed with the key redacted, the upstream's bytes cut at `cuts`. */
  async function relayed(
    events: readonly string[],
    key: string,
    { crlf = false, cuts = [] as number[], breakOff = false, maxEventBytes = undefined as number | undefined } = {},
  ) {
    const bytes = Buffer.from(crlf ? events.join('').replace(/\n/g, '\r\n') : events.join(''));
    const points = [...new Set(cuts.map((cut) => cut % (bytes.length + 1)))].sort((a, b) => a - b);
    async function* upstream(): AsyncGenerator<Uint8Array> {
      let start = 0;
      for (const point of [...points, bytes.length]) {
        yield bytes.subarray(start, point);
        start = point;
      }
      if (breakOff) throw new Error('socket hang up');
    }
    const chunks: Buffer[] = [];
    const res = new Writable({
      write(chunk: Buffer, _encoding, callback) {
        chunks.push(Buffer.from(chunk));
        callback();
      },
    }) as unknown as ServerResponse;
    const redactor = new StreamRedactor(key);
    const outcome = await relaySse(upstream(), res, {
      onEvent: () => {},
      maxEventBytes,
      rewrite: (out) => redactor.rewrite(out),
      flush: () => redactor.flush(),
    }).catch((error: unknown) => ({ error }));
    return { sent: bytes, received: Buffer.concat(chunks), outcome, redactor };
  }

  /** `text` cut into pieces at `points` (offsets into it). */
  const cut = (text: string, points: readonly number[]) =>
    [0, ...points, text.length].slice(1).map((end, index, ends) => text.slice(index === 0 ? 0 : ends[index - 1], end));

  for (const format of FORMATS) {
    describe(format, () => {
      const before = 'Here is the value you asked for: ';
      const after = ' (keep it safe).';
      const text = `${before}${KEY}${after}`;
      const at = before.length;
      const splits: [string, number[], string][] = [
        // [what, where the deltas end, what of the key's start may show before the marker]
        ['2 deltas, the first ending with 5 characters of it (held)', [at + 5], ''],
        ['2 deltas, the first ending with 3 characters of it (a vendor prefix, sent)', [at + 3], KEY.slice(0, 3)],
        ['3 deltas, the middle one inside it', [at + 6, at + 14], ''],
        ['3 deltas, the first with 2 characters of it, the second with 9', [at + 2, at + 11], KEY.slice(0, 2)],
        ['3 deltas, the last one only its last character and the text after', [at - 4, at + KEY.length - 1], ''],
        [
          'one token a delta (tokens of 1 to 3 characters)',
          Array.from({ length: 14 }, (_, index) => at - 2 + index * 3 - (index % 2)),
          '',
        ],
      ];
      for (const [what, points, shown] of splits) {
        it(`redacts a key split across ${what}; the client's joined text never holds it`, async () => {
          for (const crlf of [false, true]) {
            const events = recorded(format, cut(text, points));
            const { received, outcome } = await relayed(events, KEY, { crlf, cuts: [7, 100, 101, 333, 600, 601, 900] });
            expect(outcome).to.deep.include({ completed: true });
            const joined = joinedText(format, received);
            expect(joined, `${what} crlf=${crlf}`).to.equal(`${before}${shown}${REDACTED}${after}`);
            expect(joined).not.to.contain(KEY.slice(0, HOLD_MIN_CHARS));
            expect(revealsSecret(received.toString(), KEY)).to.equal(false);
            // Every event still there (none dropped or merged), each still valid JSON with its line endings.
            const out = new SseSplitter().push(received).filter((block) => block.event);
            expect(out).to.have.length(events.length);
            for (const block of out)
              if (block.event!.data !== '[DONE]') expect(() => JSON.parse(block.event!.data)).not.to.throw();
            if (crlf) expect(received.toString()).not.to.match(/[^\r]\n/);
          }
        });
      }

      it('relays a stream without the key byte for byte, deltas ending with a start of the key that does not go on included', async () => {
        const pieces = [
          'The prefix is sk-up',
          '/stream but no key',
          ' follows; sk',
          '-u',
          'p then text',
          ' sk-up/stream+key-7Hq2',
          ' and more.',
        ];
        for (const crlf of [false, true]) {
          const { sent, received, outcome } = await relayed(recorded(format, pieces), KEY, {
            crlf,
            cuts: [1, 50, 51, 52, 400],
          });
          expect(outcome).to.deep.include({ completed: true });
          expect(received.equals(sent)).to.equal(true);
        }
      });

      it('property: a stream of fragments of the key that never make it up is relayed byte for byte, whatever the chunking', async () => {
        const fragment = (key: string) =>
          fc.oneof(
            fc
              .tuple(fc.nat(), fc.nat())
              .map(([from, length]) => key.slice(from % key.length, (from % key.length) + (length % 12))),
            fc.string({ maxLength: 6 }),
            fc.constantFrom(' ', '"', '\\', 'ü', '\n'),
          );
        await fc.assert(
          fc.asyncProperty(
            realisticKey.chain((key) =>
              fc.record({ key: fc.constant(key), pieces: fc.array(fragment(key), { minLength: 1, maxLength: 12 }) }),
            ),
            fc.array(fc.nat(), { maxLength: 8 }),
            fc.boolean(),
            async ({ key, pieces }, cuts, crlf) => {
              const joined = pieces.join('');
              // Not the key, nor the key but for a start shorter than the hold threshold.
              fc.pre(!revealsSecret(joined, key) && !joined.includes(key.slice(HOLD_MIN_CHARS - 1)));
              const { sent, received, outcome } = await relayed(recorded(format, pieces), key, { crlf, cuts });
              expect(outcome).to.deep.include({ completed: true });
              expect(received.toString()).to.equal(sent.toString());
            },
          ),
          { numRuns: 200 },
        );
      });

      it('releases a held event unchanged when the stream ends right after it', async () => {
        const { sent, received, outcome } = await relayed(recorded(format, ['Value: sk-up/st'], { end: false }), KEY);
        expect(outcome).to.deep.include({ completed: true });
        expect(received.equals(sent)).to.equal(true);
      });

      it('releases a held event before the relay fails when the upstream breaks off after it', async () => {
        const { sent, received, outcome } = await relayed(recorded(format, ['Value: sk-up/st'], { end: false }), KEY, {
          breakOff: true,
        });
        expect(outcome).to.have.property('error');
        expect(received.equals(sent)).to.equal(true);
      });

      it('releases a held event before the relay stops at an event over the cap', async () => {
        const events = recorded(format, ['Value: sk-up/st'], { end: false });
        const { sent, received, outcome } = await relayed([...events, sse(undefined, { big: 'x'.repeat(5000) })], KEY, {
          maxEventBytes: 4000,
        });
        expect(outcome).to.deep.include({ eventTooLarge: true });
        expect(received.toString()).to.equal(events.join(''));
        expect(sent.length).to.be.greaterThan(received.length);
      });

      it('property: a realistic key cut into any number of deltas, any chunking, LF or CRLF, never reaches the joined text', async () => {
        await fc.assert(
          fc.asyncProperty(
            realisticKey,
            fc.string({ maxLength: 20 }),
            fc.string({ maxLength: 20 }),
            fc.array(fc.nat(), { maxLength: 30 }),
            fc.array(fc.nat(), { maxLength: 8 }),
            fc.boolean(),
            async (key, head, tail, points, cuts, crlf) => {
              const around = `${head} ${tail}`;
              fc.pre(!revealsSecret(around, key) && !around.includes(key.slice(0, 2)));
              const whole = `${head} ${key} ${tail}`;
              const ends = [...new Set(points.map((point) => point % whole.length))]
                .filter((point) => point > 0)
                .sort((a, b) => a - b);
              const { received } = await relayed(recorded(format, cut(whole, ends)), key, { crlf, cuts });
              const joined = joinedText(format, received);
              expect(revealsSecret(received.toString(), key)).to.equal(false);
              expect(joined).not.to.contain(key.slice(0, HOLD_MIN_CHARS));
              // The text around the key as it was; of the key at most a vendor-prefix-long start before the marker.
              expect(joined.startsWith(`${head} `) && joined.endsWith(`${REDACTED} ${tail}`)).to.equal(true);
              expect(joined.length - head.length - tail.length - 2 - REDACTED.length).to.be.below(HOLD_MIN_CHARS);
            },
          ),
          { numRuns: 200 },
        );
      });
    });
  }

  it('follows each Chat choice on its own: a key split in one choice while another streams in between', async () => {
    const chunk = (index: number, content: string) =>
      sse(undefined, {
        id: 'c',
        object: 'chat.completion.chunk',
        choices: [{ index, delta: { content }, finish_reason: null }],
      });
    const events = [
      chunk(0, 'Key: sk-up/s'),
      chunk(1, 'Other text'),
      chunk(1, ' sk'),
      chunk(0, 'tream+key-'),
      chunk(1, '-up words'),
      chunk(0, '7Hq2Zr9Xw4Lm.'),
      'data: [DONE]\n\n',
    ];
    const { received } = await relayed(events, KEY);
    expect(joinedText('chat-completions', received, 0)).to.equal(`Key: ${REDACTED}.`);
    expect(joinedText('chat-completions', received, 1)).to.equal('Other text sk-up words');
    expect(revealsSecret(received.toString(), KEY)).to.equal(false);
  });

  it('keeps each stream apart when many streams of one endpoint share its key: interleaved, each is redacted alone', () => {
    // Every stream of an endpoint reads the same tables made from its key; what a stream holds is its own.
    const split = recorded('chat-completions', ['Key: sk-up/s', 'tream+key-', '7Hq2Zr9Xw4Lm.']).map((event) =>
      Buffer.from(event),
    );
    const plain = recorded('chat-completions', ['it is sk-up/', 'other', ' text']).map((event) => Buffer.from(event));
    const first = new StreamRedactor(KEY);
    const second = new StreamRedactor(KEY);
    const out: [Buffer[], Buffer[]] = [[], []];
    for (let index = 0; index < Math.max(split.length, plain.length); index += 1) {
      if (split[index]) out[0].push(first.rewrite(split[index]!));
      if (plain[index]) out[1].push(second.rewrite(plain[index]!));
    }
    out[0].push(first.flush());
    out[1].push(second.flush());
    expect(joinedText('chat-completions', Buffer.concat(out[0]), 0)).to.equal(`Key: ${REDACTED}.`);
    expect(Buffer.concat(out[1]).equals(Buffer.concat(plain))).to.equal(true);
  });

  it('reads no event that cannot be part of a split key: it comes back as the very buffer redactCredential gives', () => {
    const event = (text: string) => Buffer.from(recorded('chat-completions', [text])[1]!);
    // A key whose characters JSON writes only as `\u00XX`: ordinary escapes (`\n`, `\"`) tell nothing; a
    // delta ending with a start of the key shorter than the hold threshold (` sk`) is only noted.
    const plainKey = new StreamRedactor('sk-proj-Q2x9Lm7Zt4Hv8Rw1');
    for (const text of ['Hello', ' world, this is', ' sk', 'etchy but fine', ' "quoted" \n text ü', 'as keys go']) {
      const bytes = event(text);
      expect(plainKey.rewrite(bytes), text).to.equal(bytes);
    }
    // Read, and sent unchanged: a delta that may continue a noted start (`-`), an escape that may be one of the key's
    // characters.
    for (const bytes of [
      event('-x'),
      Buffer.from('data: {"choices":[{"index":0,"delta":{"content":"caf\\u00e9"}}]}\n\n'),
    ]) {
      const out = plainKey.rewrite(bytes);
      expect(out).not.to.equal(bytes);
      expect(out.equals(bytes)).to.equal(true);
    }
    // A key with a `/`, which JSON may write `\/`: an event with `\/` is read, one with only `\"` is not.
    const redactor = new StreamRedactor(KEY);
    const quoted = event(' "quoted" text');
    expect(redactor.rewrite(quoted)).to.equal(quoted);
    const slashed = Buffer.from(event(' a/b').toString().replace('a/b', 'a\\/b'));
    expect(redactor.rewrite(slashed)).not.to.equal(slashed);
    expect(redactor.rewrite(slashed).equals(slashed)).to.equal(true);
    // A delta ending with a start of the key long enough is held; the next one that does not go on releases it.
    const held = Buffer.from(recorded('chat-completions', ['it is sk-up/'])[1]!);
    expect(redactor.rewrite(held)).to.have.length(0);
    expect(redactor.heldEvents).to.equal(1);
    const next = Buffer.from(recorded('chat-completions', ['other'])[1]!);
    expect(redactor.rewrite(next).equals(Buffer.concat([held, next]))).to.equal(true);
    expect(redactor.heldEvents).to.equal(0);
    // Without a key long enough to search for, nothing is looked at.
    const plain = new StreamRedactor('short');
    expect(plain.rewrite(held)).to.equal(held);
  });

  it(`holds at most ${MAX_HELD_EVENTS} events: past that they go out, and the rest of the key is still redacted`, async () => {
    const ping = sse('ping', '{"type": "ping"}');
    const delta = (text: string) =>
      sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } });
    const events = [
      delta('Key: sk-up/str'),
      ...Array.from({ length: MAX_HELD_EVENTS + 10 }, () => ping),
      delta('eam+key-7Hq2Zr9Xw4Lm done'),
      sse('message_stop', { type: 'message_stop' }),
    ];
    const { received } = await relayed(events, KEY);
    expect(joinedText('messages', received)).to.equal(`Key: sk-up/str${REDACTED} done`);
    expect(revealsSecret(received.toString(), KEY)).to.equal(false);
  });
});
