import { expect } from 'chai';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ScriptedUpstream } from '../helpers/scripted-upstream.ts';
import { startTestGateway, TEST_KEY, type TestGateway } from '../helpers/test-gateway.ts';

/** A plugin whose stream fixup writes text of its own: each `{{code}}` in an event becomes a project code. */
const PLUGIN = `export default {
  contract: 1,
  vendor: 'sigma',
  routes: { 'chat-completions': { path: '/chat/completions', format: 'chat-completions', auth: 'bearer' } },
  models: [{ id: 'sigma-1', listed: true, routes: ['chat-completions'], pricing: { input: 1, cachedInput: 0, output: 2 } }],
  streamFixups: [{
    name: 'expand-code',
    route: 'chat-completions',
    models: ['sigma/sigma-1'],
    fixup: (event) => (event.data.includes('{{code}}') ? { ...event, data: event.data.replaceAll('{{code}}', 'PROJECT-1234') } : undefined),
  }],
};
`;

const chunk = (delta: object, finish: string | null = null) =>
  `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'sigma-1', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;

/** A stream whose text is `deltas`, one event each, then the finish, the usage and `[DONE]`. */
const stream = (deltas: readonly string[]) =>
  chunk({ role: 'assistant', content: '' }) +
  deltas.map((delta) => chunk({ content: delta })).join('') +
  chunk({}, 'stop') +
  `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'sigma-1', choices: [], usage: { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 } })}\n\n` +
  'data: [DONE]\n\n';

describe("guardrails read what the client gets: a stream as the plugin's fixups leave it, an answer of any shape", function () {
  this.timeout(60_000);
  let dir: string;
  let upstream: ScriptedUpstream;
  let test: TestGateway;

  const start = async (action: 'block' | 'redact') => {
    await writeFile(
      join(dir, 'gateway.yaml'),
      `guardrails:\n  - name: no-codes\n    use: regex\n    on: response\n    action: ${action}\n    patterns: ['PROJECT-[0-9]{4}']\n`,
    );
    test = await startTestGateway({
      configFile: join(dir, 'gateway.yaml'),
      env: { GATEWAY_PLUGIN_PATH: join(dir, 'plugins'), SIGMA_BASE_URL: upstream.url, SIGMA_API_KEY: 'sigma-key' },
    });
  };
  const ask = async (content = 'my code?', stream = true) => {
    const response = await fetch(`${test.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'sigma/sigma-1', stream, messages: [{ role: 'user', content }] }),
    });
    return { status: response.status, text: await response.text() };
  };

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gateway-guardrail-fixups-'));
    await mkdir(join(dir, 'plugins', 'sigma'), { recursive: true });
    await writeFile(join(dir, 'plugins', 'package.json'), JSON.stringify({ type: 'module' }));
    await writeFile(join(dir, 'plugins', 'manifest.json'), JSON.stringify({ plugins: ['sigma'] }));
    await writeFile(join(dir, 'plugins', 'sigma', 'index.js'), PLUGIN);
    upstream = await ScriptedUpstream.start();
    upstream.script = (_req, res, text) => {
      const request = JSON.parse(text) as { stream?: boolean; messages: { content: string }[] };
      // A vendor answering in a shape Chat Completions does not have: its text is in no place the format reads.
      if (request.messages[0]!.content === 'odd shape') {
        if (!request.stream) {
          const odd = {
            result: { say: 'Your code is PROJECT-1234.' },
            usage: { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 },
          };
          return res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(odd));
        }
        return res
          .writeHead(200, { 'content-type': 'text/event-stream' })
          .end(
            chunk({ role: 'assistant', content: '' }) +
              `data: ${JSON.stringify({ say: 'Your code is PROJECT-1234.' })}\n\n` +
              'data: [DONE]\n\n',
          );
      }
      res
        .writeHead(200, { 'content-type': 'text/event-stream' })
        .end(stream(['Your code is ', '{{code}}', ', keep it safe.']));
    };
  });
  afterEach(async () => {
    await test?.close();
  });
  after(async () => {
    await upstream?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('blocks a finding a fixup wrote: the client never gets it, the stream ends with the refusal in band', async () => {
    await start('block');
    const answer = await ask();
    expect(answer.status).to.equal(200);
    expect(answer.text).not.to.contain('PROJECT-1234');
    expect(answer.text).to.contain('Your code is ');
    expect(answer.text).to.contain('GW_ERR_GUARDRAIL');
  });

  it('blocks a finding in an answer of a shape the format does not read (JSON): every string of it is checked', async () => {
    await start('block');
    const answer = await ask('odd shape', false);
    expect(answer.status).to.equal(400);
    expect(answer.text).not.to.contain('PROJECT-1234');
    expect(answer.text).to.contain('GW_ERR_GUARDRAIL');
  });

  it('blocks a finding in a stream event of a shape the format does not read', async () => {
    await start('block');
    const answer = await ask('odd shape');
    expect(answer.text).not.to.contain('PROJECT-1234');
    expect(answer.text).to.contain('GW_ERR_GUARDRAIL');
  });

  it('redacts a finding a fixup wrote, and the rest of the stream goes on', async () => {
    await start('redact');
    const answer = await ask();
    expect(answer.status).to.equal(200);
    expect(answer.text).not.to.contain('PROJECT-1234');
    expect(answer.text).to.contain('keep it safe.');
    expect(answer.text).to.contain('data: [DONE]');
  });
});
