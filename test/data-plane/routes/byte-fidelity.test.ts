import { expect } from 'chai';
import fc from 'fast-check';
import { request } from 'undici';
import { samplePlugins } from '../../plugins/sample-plugins.ts';
import { ScriptedUpstream } from '../../helpers/scripted-upstream.ts';
import { startRouteTestApp, type RouteTestApp } from './route-test-app.ts';

async function post(app: RouteTestApp, path: string, body: string | Buffer) {
  const response = await request(`${app.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
  });
  const text = await response.body.text();
  return { status: response.statusCode, text, json: () => JSON.parse(text) as Record<string, any> };
}

// Sample plugins: `acme/hidden` goes upstream as `hidden-2026` (Chat Completions), `two` as `two-r`
// (Responses), `bolt-latest` as `bolt-1` (Messages).
const ROUTES = {
  'chat-completions': {
    path: '/v1/chat/completions',
    model: '"acme/hidden"',
    upstream: '"hidden-2026"',
    required: [['"messages"', '[{"role":"user","content":"hi"}]']],
  },
  responses: { path: '/v1/responses', model: '"two"', upstream: '"two-r"', required: [['"input"', '"hi"']] },
  messages: {
    path: '/v1/messages',
    model: '"bolt-latest"',
    upstream: '"bolt-1"',
    required: [
      ['"max_tokens"', '16'],
      ['"messages"', '[{"role":"user","content":"hi"}]'],
    ],
  },
} as const;

describe('byte fidelity of forwarded bodies', function () {
  this.timeout(120_000);
  let upstream: ScriptedUpstream;
  let app: RouteTestApp;

  before(async () => {
    upstream = await ScriptedUpstream.start();
    upstream.script = (_req, res) =>
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"usage":{"n":1}}');
    app = await startRouteTestApp(samplePlugins(), { acme: upstream.url, bolt: upstream.url });
  });
  beforeEach(() => {
    upstream.requests.length = 0;
  });
  after(async () => {
    await app.close();
    await upstream.close();
  });

  const cases: [string, string][] = [
    [
      'int64 max and a 17-digit integer',
      '{"model":"acme/hidden","messages":[{"role":"user","content":"hi"}],"seed":9223372036854775807,"metadata":{"n":12345678901234567}}',
    ],
    [
      'integer-like keys in logit_bias, kept in their order',
      '{"model":"acme/hidden","messages":[{"role":"user","content":"hi"}],"logit_bias":{"50256":-100,"1734":5,"0":1}}',
    ],
    [
      'JSON-schema properties named "2024","2023"',
      '{"model":"acme/hidden","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"years","schema":{"type":"object","properties":{"2024":{"type":"string"},"2023":{"type":"string"}},"required":["2024","2023"]}}}}',
    ],
    [
      'whitespace, escapes and number forms',
      '\n\t{ "messages" :\r\n [ { "role":"user" , "content" : "caf\\u00e9 \\/ \\"q\\" 😀 é\\n" } ],\n "model":"acme/hidden" , "temperature":1.0, "top_p":1e0, "x":-0.0, "y":1E+2 }\n',
    ],
    [
      'unknown fields of every type',
      '{"model":"acme/hidden","vendor_extra":{"a":[null,true,false,{"b":[]}]},"messages":[{"role":"user","content":[{"type":"text","text":"hi"}],"name":"n"}],"z":""}',
    ],
    [
      'content null with tool_calls, and a function message with null content',
      '{"model":"acme/hidden","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_1","content":"42"},{"role":"assistant","content":null,"function_call":{"name":"g","arguments":"{}"}},{"role":"function","name":"g","content":null}],"stream":null,"stream_options":null}',
    ],
  ];
  for (const [name, body] of cases) {
    it(`forwards ${name} byte for byte, only model replaced`, async () => {
      const response = await post(app, '/v1/chat/completions', body);
      expect(response.status, response.text).to.equal(200);
      expect(upstream.requests).to.have.length(1);
      expect(upstream.requests[0]!.bytes.equals(Buffer.from(body.replace('"acme/hidden"', '"hidden-2026"')))).to.equal(
        true,
        upstream.requests[0]!.body,
      );
    });
  }

  it('sets include_usage on a streaming Chat Completions body and changes nothing else', async () => {
    const streams: [string, string][] = [
      [
        '{"model":"acme/hidden","messages":[{"role":"user","content":"hi"}],"stream":true}',
        '{"model":"hidden-2026","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}',
      ],
      [
        '{"model":"acme/hidden", "stream":true, "stream_options":null, "messages":[{"role":"user","content":"hi"}]}',
        '{"model":"hidden-2026", "stream":true, "stream_options":{"include_usage":true}, "messages":[{"role":"user","content":"hi"}]}',
      ],
      [
        '{"stream_options":{"include_obfuscation":false},"model":"acme/hidden","stream":true,"messages":[{"role":"user","content":"hi"}]}',
        '{"stream_options":{"include_obfuscation":false,"include_usage":true},"model":"hidden-2026","stream":true,"messages":[{"role":"user","content":"hi"}]}',
      ],
      [
        '{"stream_options":{"include_usage":false},"model":"acme/hidden","stream":true,"messages":[{"role":"user","content":"hi"}]}',
        '{"stream_options":{"include_usage":true},"model":"hidden-2026","stream":true,"messages":[{"role":"user","content":"hi"}]}',
      ],
      // Not streaming: stream_options goes as sent.
      [
        '{"stream_options":{"include_usage":false},"model":"acme/hidden","stream":false,"messages":[{"role":"user","content":"hi"}]}',
        '{"stream_options":{"include_usage":false},"model":"hidden-2026","stream":false,"messages":[{"role":"user","content":"hi"}]}',
      ],
    ];
    for (const [body, expected] of streams) {
      upstream.requests.length = 0;
      expect((await post(app, '/v1/chat/completions', body)).status).to.equal(200);
      expect(upstream.requests[0]!.body).to.equal(expected);
    }
    upstream.requests.length = 0;
    const responses = '{"model":"two","input":"hi","stream":true}';
    await post(app, '/v1/responses', responses);
    expect(upstream.requests[0]!.body).to.equal('{"model":"two-r","input":"hi","stream":true}');
  });

  it('refuses a top level that repeats model, stream or stream_options with a 400 naming the key', async () => {
    const repeated: [string, string][] = [
      ['model', '{"model":"acme/hidden","messages":[{"role":"user","content":"hi"}],"model":"acme/one"}'],
      ['model', '{"model":"acme/hidden","messages":[{"role":"user","content":"hi"}],"mod\\u0065l":"acme/one"}'],
      ['stream', '{"model":"acme/hidden","stream":false,"messages":[{"role":"user","content":"hi"}],"stream":true}'],
      [
        'stream_options',
        '{"model":"acme/hidden","stream_options":{},"messages":[{"role":"user","content":"hi"}],"stream_options":null}',
      ],
    ];
    for (const [key, body] of repeated) {
      const response = await post(app, '/v1/chat/completions', body);
      expect(response.status).to.equal(400);
      expect(response.json()).to.deep.include({ detail: `The body gives '${key}' more than once; send it once` });
      expect(response.json().error).to.include({ param: key, type: 'invalid_request_error' });
    }
    // Repeats of other keys, and of these names below the top level, go as sent.
    const others =
      '{"model":"acme/hidden","messages":[{"role":"user","content":"hi","model":"a","model":"b"}],"x":1,"x":2}';
    expect((await post(app, '/v1/chat/completions', others)).status).to.equal(200);
    expect(upstream.requests).to.have.length(1);
    expect(upstream.requests[0]!.body).to.equal(others.replace('"acme/hidden"', '"hidden-2026"'));
  });

  it('refuses deep nesting and huge element counts with a clear JSON 400, before any recursive work', async () => {
    const deep = `{"model":"acme/hidden","messages":[{"role":"user","content":"hi"}],"x":${'['.repeat(5000)}${']'.repeat(5000)}}`;
    for (const path of ['/v1/chat/completions', '/v1/responses', '/v1/messages', '/v1/chat']) {
      const response = await post(app, path, deep);
      expect(response.status, path).to.equal(400);
      expect(response.json().detail).to.equal(
        'Request body is nested deeper than the limit of 256 levels of objects and arrays',
      );
    }
    const atLimit = `{"model":"acme/hidden","messages":[{"role":"user","content":"hi"}],"x":${'['.repeat(255)}${']'.repeat(255)}}`;
    expect((await post(app, '/v1/chat/completions', atLimit)).status).to.equal(200);
    const many = `{"model":"acme/hidden","messages":[{"role":"user","content":"hi"}],"x":[${'0,'.repeat(1_000_000)}0]}`;
    const roomy = await startRouteTestApp(samplePlugins(), { acme: upstream.url }, { bodyLimitBytes: 4 * 1024 * 1024 });
    const response = await post(roomy, '/v1/chat/completions', many).finally(() => roomy.close());
    expect(response.status).to.equal(400);
    expect(response.json().detail).to.equal(
      'Request body holds more than the limit of 1000000 array items and object members',
    );
    expect(upstream.requests).to.have.length(1);
  });

  describe('property: random bodies with a valid model reach the upstream as the client sent them', () => {
    const space = fc.constantFrom('', ' ', '  ', '\n', '\t', '\r\n ');
    const numberText = fc.oneof(
      fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }).map(String),
      fc.double({ noNaN: true, noDefaultInfinity: true }).map((value) => JSON.stringify(value)),
      fc.constantFrom('9223372036854775807', '12345678901234567', '1.0', '1e2', '-0', '1E+400', '0.1e-7'),
    );
    const unicodeEscaped = (text: string) =>
      JSON.stringify(text).replace(/[^\x20-\x7e]/g, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`);
    const stringText = fc.oneof(
      fc.string().map((text) => JSON.stringify(text)),
      fc.string({ unit: 'binary' }).map(unicodeEscaped),
      fc.constantFrom('"\\/"', '"😀"', '"\\ud83d\\ude00"'),
    );
    const keyText = fc.oneof(
      stringText,
      fc.integer({ min: 0, max: 99999 }).map((n) => `"${n}"`),
    );
    const value: fc.Arbitrary<string> = fc.letrec<{ value: string }>((tie) => ({
      value: fc.oneof(
        { depthSize: 'small' },
        fc.constantFrom('null', 'true', 'false'),
        numberText,
        stringText,
        fc
          .tuple(fc.array(fc.tuple(space, tie('value'), space), { maxLength: 4 }), space)
          .map(([items, end]) => `[${items.map((item) => item.join('')).join(',')}${items.length ? '' : end}]`),
        fc
          .tuple(fc.array(fc.tuple(space, keyText, space, space, tie('value'), space), { maxLength: 4 }), space)
          .map(
            ([members, end]) =>
              `{${members.map(([a, k, b, c, v, d]) => `${a}${k}${b}:${c}${v}${d}`).join(',')}${members.length ? '' : end}}`,
          ),
      ),
    })).value;
    // Extra top-level fields: any name but the ones each route checks (their shapes are tested elsewhere).
    const CHECKED = new Set([
      'model',
      'messages',
      'input',
      'max_tokens',
      'stream',
      'stream_options',
      'tools',
      'tool_choice',
      'response_format',
      'system',
      'thinking',
      'instructions',
      'reasoning',
      'previous_response_id',
    ]);
    const extraKey = keyText.filter((text) => {
      try {
        return !CHECKED.has(JSON.parse(text) as string);
      } catch {
        return false;
      }
    });
    const streamMember = fc.constantFrom<[string, string][]>(
      [],
      [['"stream"', 'false']],
      [['"stream"', 'null']],
      [
        ['"stream"', 'true'],
        ['"stream_options"', '{ "include_usage" : true, "x":1 }'],
      ],
    );

    for (const [route, spec] of Object.entries(ROUTES)) {
      it(route, async () => {
        const modelKey = fc.constantFrom('"model"', '"mod\\u0065l"');
        const extra = fc.uniqueArray(fc.tuple(extraKey, value), {
          maxLength: 6,
          selector: ([key]) => JSON.parse(key) as string,
        });
        await fc.assert(
          fc.asyncProperty(
            modelKey,
            extra,
            route === 'messages' ? fc.constant([]) : streamMember,
            fc.nat(),
            fc.array(space, { minLength: 4, maxLength: 4 }),
            async (model, others, stream, at, [a, b, c, d]) => {
              const members: [string, string][] = [
                ...spec.required.map(([key, text]) => [key, text] as [string, string]),
                ...others,
                ...stream,
              ];
              const position = at % (members.length + 1);
              const build = (modelValue: string) => {
                const all = [...members.slice(0, position), [model, modelValue], ...members.slice(position)];
                return `${a}{${all.map(([key, text]) => `${b}${key}${c}:${d}${text}${b}`).join(',')}}${a}`;
              };
              upstream.requests.length = 0;
              const response = await post(app, spec.path, Buffer.from(build(spec.model), 'utf8'));
              expect(response.status, `${build(spec.model)} → ${response.text}`).to.equal(200);
              expect(upstream.requests).to.have.length(1);
              expect(
                upstream.requests[0]!.bytes.equals(Buffer.from(build(spec.upstream), 'utf8')),
                upstream.requests[0]!.body,
              ).to.equal(true);
            },
          ),
          { numRuns: 150 },
        );
      });
    }
  });
});
