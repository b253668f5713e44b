import { expect } from 'chai';
import OpenAI from 'openai';
import { ScriptedUpstream } from '../helpers/scripted-upstream.ts';
import { startTestGateway, TEST_KEY, type TestGateway } from '../helpers/test-gateway.ts';

// What docs/reliability.md says of a stream that ends after its first content event.
describe('a stream the upstream ends after it started', function () {
  this.timeout(30_000);
  let upstream: ScriptedUpstream;
  let test: TestGateway;
  let openai: OpenAI;
  const chunk = (content: string) => {
    const choice = { index: 0, delta: { content }, finish_reason: null };
    const event = { id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'gen-5.5', choices: [choice] };
    return `data: ${JSON.stringify(event)}\n\n`;
  };

  beforeEach(async () => {
    upstream = await ScriptedUpstream.start();
    test = await startTestGateway({ env: { ALPHA_BASE_URL: upstream.url } });
    openai = new OpenAI({ baseURL: `${test.url}/v1`, apiKey: TEST_KEY, maxRetries: 0 });
  });
  afterEach(async () => {
    await test.close();
    await upstream.close();
  });

  const read = async () => {
    let text = '';
    const messages = [{ role: 'user' as const, content: 'Tell me all of it.' }];
    const stream = await openai.chat.completions.create({ model: 'alpha-latest', messages, stream: true });
    for await (const part of stream) text += part.choices[0]?.delta.content ?? '';
    return text;
  };

  it('relays a clean end halfway as it came, adding no error: the client gets the text so far, no [DONE]', async () => {
    const sent = chunk('Half') + chunk(' an answer');
    upstream.script = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(sent);
    };
    expect(await read()).to.equal('Half an answer');
    const raw = await fetch(`${test.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'alpha-latest', messages: [{ role: 'user', content: 'x' }], stream: true }),
    });
    expect(await raw.text()).to.equal(sent);
  });

  it('ends a stream that breaks off with an in-band error the SDK raises', async () => {
    upstream.script = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(chunk('Half'), () => setTimeout(() => res.destroy(), 20));
    };
    const failure = await read().then(
      () => undefined,
      (error: Error) => error,
    );
    expect(failure).to.be.instanceOf(OpenAI.APIError);
    expect(failure!.message).to.contain('the stream broke off');
  });
});
