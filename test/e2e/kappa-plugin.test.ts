import { expect } from 'chai';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { eventually } from '../helpers/eventually.ts';
import { KAPPA_DIR } from '../helpers/external-plugin.ts';
import { GatewayProcess } from '../helpers/gateway-process.ts';
import { ScriptedUpstream } from '../helpers/scripted-upstream.ts';

const CLIENT_KEY = 'sk-kappa-e2e-client-0001-0123456789abcdef';
const KEY_A = 'kappa-endpoint-a-key-0001';
const KEY_B = 'kappa-endpoint-b-key-0002';
const KEY_A2 = 'kappa-endpoint-a-key-reloaded-0003';
const QUERY_KEY = 'kq-secret/0004+abc=def';

/** A Chat Completions stream as kappa's upstream sends it: upper case STOP, usage last. */
function kappaStream(content: string): string {
  const chunk = (delta: object, finish: string | null) =>
    `data: ${JSON.stringify({ id: 'k', object: 'chat.completion.chunk', created: 1, model: 'kappa-1', choices: [{ index: 0, delta, finish_reason: finish }] }).replace('"finish_reason":"STOP"', '"finish_reason": "STOP"')}\n\n`;
  return [
    chunk({ role: 'assistant', content: '' }, null),
    chunk({ content }, null),
    chunk({ content: '!' }, null),
    chunk({}, 'STOP'),
    `data: ${JSON.stringify({ id: 'k', object: 'chat.completion.chunk', created: 1, model: 'kappa-1', choices: [], usage: { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 } })}\n\n`,
    'data: [DONE]\n\n',
  ].join('');
}

describe('the compiled kappa plugins from GATEWAY_PLUGIN_PATH, in the compiled gateway', function () {
  this.timeout(60_000);
  let a: ScriptedUpstream;
  let b: ScriptedUpstream;
  let q: ScriptedUpstream;
  let dir: string;
  let configPath: string;
  let gateway: GatewayProcess;
  // Affinity off: the reload test sends one same body until endpoint a took it (random spread).
  const config = (keyA: string) =>
    JSON.stringify({
      routing: { affinity: false },
      providers: {
        kappa: {
          endpoints: [
            { name: 'a', baseUrl: a.url, apiKey: keyA },
            { name: 'b', baseUrl: b.url, apiKey: KEY_B },
          ],
        },
        kappaq: { baseUrl: q.url, apiKey: QUERY_KEY },
      },
    });

  before(async () => {
    [a, b, q] = await Promise.all([ScriptedUpstream.start(), ScriptedUpstream.start(), ScriptedUpstream.start()]);
    for (const upstream of [a, b]) {
      upstream.script = (req, res, body) => {
        const content = (JSON.parse(body) as { messages: { content: string }[] }).messages[0]!.content;
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.end(kappaStream(content));
      };
    }
    // The query upstream echoes the URL it was called with in its error, as some vendors do.
    q.script = (req, res) => {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          error: { message: `bad request to ${req.url} (key ${QUERY_KEY})`, type: 'invalid_request_error' },
        }),
      );
    };
    dir = await mkdtemp(join(tmpdir(), 'gateway-kappa-'));
    configPath = join(dir, 'gateway.json');
    await writeFile(configPath, config(KEY_A));
    gateway = await GatewayProcess.start(
      {
        GATEWAY_PLUGIN_PATH: KAPPA_DIR,
        GATEWAY_API_KEYS: CLIENT_KEY,
        GATEWAY_DATA_DIR: join(dir, 'data'),
        GATEWAY_CONFIG: configPath,
      },
      'compiled',
    );
  });
  after(async () => {
    await gateway?.stop();
    await Promise.all([a, b, q].map((upstream) => upstream?.close()));
    await rm(dir, { recursive: true, force: true });
  });

  const client = () => new OpenAI({ baseURL: `${gateway.url}/v1`, apiKey: CLIENT_KEY, maxRetries: 0 });
  const streamed = async (model: string, content: string) => {
    const stream = await client().chat.completions.create({
      model,
      messages: [{ role: 'user', content }],
      stream: true,
    });
    let text = '';
    let finish: string | null | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    return { text, finish };
  };

  it("sends each endpoint's key in x-kappa-key and no Authorization; STOP arrives as stop through the SDK", async () => {
    // The pool picks at random, weighted: six requests all went to one endpoint once in about 30 runs.
    // Sent until both have served (at most 40: both unused after that is a chance of 2 in 10^12).
    for (let index = 0; index < 40 && (index < 6 || a.requests.length === 0 || b.requests.length === 0); index++) {
      expect(await streamed('kappa/kappa-1', `hello ${index}`)).to.deep.equal({
        text: `hello ${index}!`,
        finish: 'stop',
      });
    }
    expect(a.requests.length).to.be.greaterThan(0);
    expect(b.requests.length).to.be.greaterThan(0);
    for (const [upstream, key] of [
      [a, KEY_A],
      [b, KEY_B],
    ] as const) {
      for (const seen of upstream.requests) {
        expect(seen.headers['x-kappa-key']).to.equal(key);
        expect(seen.headers).not.to.have.property('authorization');
        expect(seen.headers).not.to.have.property('x-api-key');
        expect(seen.path).to.equal('/v1/chat/completions');
      }
    }
  });

  it('uses a key changed by a config reload (SIGHUP) on the next request', async () => {
    await writeFile(configPath, config(KEY_A2));
    gateway.signal('SIGHUP');
    await eventually(async () => {
      a.requests.length = 0;
      for (let index = 0; index < 4 && a.requests.length === 0; index++) await streamed('kappa/kappa-1', 'again');
      return a.requests.at(-1)?.headers['x-kappa-key'] === KEY_A2;
    }, 'the reloaded key on endpoint a');
  });

  it("sends ?key=<key> for a query credential, and the key never reaches the client's answer", async () => {
    const answer = await fetch(`${gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'kappaq/kappaq-1', messages: [{ role: 'user', content: 'hi' }] }),
    });
    const text = await answer.text();
    expect(q.requests.at(-1)!.path).to.equal(`/v1/chat/completions?key=${encodeURIComponent(QUERY_KEY)}`);
    expect(q.requests.at(-1)!.headers).not.to.have.property('authorization');
    expect(text).to.contain('[REDACTED]');
    expect(text).not.to.contain(QUERY_KEY);
    expect(text).not.to.contain(encodeURIComponent(QUERY_KEY));
  });

  it('ends a stream whose fixup throws with the in-band plugin fault, logs one error line and counts it by plugin and hook', async () => {
    let caught: unknown;
    try {
      await streamed('kappa/kappa-fragile', 'explode');
    } catch (error) {
      caught = error;
    }
    expect(String((caught as Error | undefined)?.message)).to.contain(
      "Gateway plugin 'kappa' failed in its hook 'streamFixups.fragile'",
    );
    const faultLines = () =>
      gateway.logs
        .join('')
        .split('\n')
        .filter((line) => line.includes('"hook":"streamFixups.fragile"'));
    await eventually(() => faultLines().length > 0, 'the plugin fault log line');
    {
      const lines = faultLines();
      expect(lines).to.have.length(1);
      const line = JSON.parse(lines[0]!) as Record<string, unknown>;
      expect(line).to.include({
        level: 50,
        plugin: 'kappa',
        hook: 'streamFixups.fragile',
        route: 'chat-completions',
        model: 'kappa/kappa-fragile',
      });
      expect(line.request_id).to.be.a('string');
      expect(JSON.stringify(line.err)).to.contain('kappa fragile fixup: third event');
      // Its usage record says whose fault it was, estimated as a cut stream's.
      const recordOf = async () => {
        const journal = await readFile(join(dir, 'data', 'usage.jsonl'), 'utf8').catch(() => '');
        return journal
          .split('\n')
          .filter(Boolean)
          .map((entry) => JSON.parse(entry) as Record<string, unknown>)
          .find((entry) => entry.requestId === line.request_id);
      };
      await eventually(async () => (await recordOf()) !== undefined, 'the usage record of the faulted stream');
      expect(await recordOf()).to.include({ outcome: 'plugin_error', model: 'kappa/kappa-fragile', estimated: true });
    }
    const metrics = await (await fetch(`${gateway.url}/metrics`)).text();
    expect(metrics).to.match(/gateway_plugin_errors_total\{plugin="kappa",hook="streamFixups.fragile"\} 1/);
  });

  it('never logs a key, raw or encoded', () => {
    const logs = gateway.logs.join('');
    for (const key of [KEY_A, KEY_B, KEY_A2, QUERY_KEY, encodeURIComponent(QUERY_KEY)])
      expect(logs).not.to.contain(key);
  });
});
