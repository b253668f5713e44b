import Anthropic from '@anthropic-ai/sdk';
import { expect } from 'chai';
import OpenAI from 'openai';
import { startTestGateway, TEST_KEY, UPSTREAM_KEY, type TestGateway } from '../helpers/test-gateway.ts';

describe('end to end: the official SDK clients against the running gateway', () => {
  let test: TestGateway;
  let openai: OpenAI;
  let anthropic: Anthropic;

  before(async () => {
    test = await startTestGateway();
    openai = new OpenAI({ baseURL: `${test.url}/v1`, apiKey: TEST_KEY, maxRetries: 0 });
    anthropic = new Anthropic({ baseURL: test.url, apiKey: TEST_KEY, maxRetries: 0 });
  });
  after(async () => test.close());
  beforeEach(() => Object.values(test.upstreams).forEach((upstream) => upstream.reset()));

  describe('Chat Completions (openai)', () => {
    it('answers JSON through an alias, sending the concrete upstream model', async () => {
      const completion = await openai.chat.completions.create({
        model: 'alpha-latest',
        messages: [{ role: 'user', content: 'Hello gateway' }],
      });
      expect(completion.choices[0]!.message.content).to.equal('Mock reply to: Hello gateway');
      const seen = test.upstreams.alpha.requests[0]!;
      expect(seen.path).to.equal('/v1/chat/completions');
      expect(seen.body.model).to.equal('gen-6-astra');
      expect(seen.headers.authorization).to.equal(`Bearer ${UPSTREAM_KEY}`);
      expect(completion.usage).to.deep.include({ prompt_tokens: seen.reportedUsage!.inputTokens });
    });

    it('streams, with the usage chunk the gateway asked for', async () => {
      const stream = await openai.chat.completions.create({
        model: 'gamma/gamma-3.8-flash',
        messages: [{ role: 'user', content: 'Stream me' }],
        stream: true,
      });
      let text = '';
      let usage: OpenAI.CompletionUsage | null | undefined;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta.content ?? '';
        usage = chunk.usage ?? usage;
      }
      expect(text).to.equal('Mock reply to: Stream me');
      expect(test.upstreams.gamma.requests[0]!.body.stream_options).to.deep.equal({ include_usage: true });
      expect(usage?.completion_tokens).to.be.greaterThan(0);
    });

    it('routes every Set C ID to its own vendor', async () => {
      const { data } = (await (await fetch(`${test.url}/v1/models`)).json()) as { data: { id: string }[] };
      const hidden = ['alpha/gen-6.1-sol', 'alpha/gen-6-sol', 'alpha/gen-6-luna', 'beta/beta-opus-5-5'];
      for (const id of [...data.map((entry) => entry.id), ...hidden]) {
        await openai.chat.completions.create({ model: id, messages: [{ role: 'user', content: 'x' }] });
        const vendor = id.includes('/') ? id.split('/')[0]! : id.replace('-latest', '');
        const seen = test.upstreams[vendor as keyof TestGateway['upstreams']].requests.at(-1)!;
        expect(seen.body.model, id).to.equal(
          id.includes('/')
            ? id.split('/')[1]
            : { alpha: 'gen-6-astra', beta: 'beta-fable-5-1', gamma: 'gamma-3.1-pro-preview' }[vendor],
        );
      }
      expect(test.allRequests()).to.have.length(26);
    });

    it('lets the openai stream helper finish an epsilon stream whose upstream sends an empty function_call', async () => {
      const body = {
        model: 'epsilon/epsilon-5.3-flash',
        messages: [{ role: 'user' as const, content: 'call a tool' }],
        mock_profile: 'empty-function-call',
      };
      const run = (client: OpenAI) =>
        client.chat.completions
          .stream(body as Parameters<OpenAI['chat']['completions']['stream']>[0])
          .finalChatCompletion();
      const final = await run(openai);
      expect(final.choices[0]!.finish_reason).to.equal('tool_calls');
      expect(final.choices[0]!.message.tool_calls?.[0]).to.deep.include({
        id: 'call_mock',
        function: { name: 'lookup', arguments: '{"q":"x"}' },
      });
      // The same stream straight from the upstream breaks the helper: the fixup is what makes it work.
      const direct = new OpenAI({ baseURL: test.upstreams.epsilon.url, apiKey: UPSTREAM_KEY, maxRetries: 0 });
      const error = await run(direct).then(
        () => undefined,
        (caught: Error) => caught,
      );
      expect(error?.message).to.contain('missing function_call.name');
    });

    it("shows the gateway's validation message through the SDK error", async () => {
      const error = await openai.chat.completions.create({ model: 'nope', messages: [] }).then(
        () => undefined,
        (caught: unknown) => caught,
      );
      expect(error).to.be.instanceOf(OpenAI.BadRequestError);
      expect((error as InstanceType<typeof OpenAI.BadRequestError>).message).to.contain(
        "Field 'model': unknown model 'nope'",
      );
    });

    it('refuses a missing key with 401 the SDK understands', async () => {
      const anonymous = new OpenAI({ baseURL: `${test.url}/v1`, apiKey: 'sk-not-a-real-key-000', maxRetries: 0 });
      const error = await anonymous.models.list().then(
        () => undefined,
        (caught: unknown) => caught,
      );
      expect(error).to.equal(undefined);
      const refused = await anonymous.chat.completions
        .create({ model: 'alpha-latest', messages: [{ role: 'user', content: 'x' }] })
        .then(
          () => undefined,
          (caught: unknown) => caught,
        );
      expect(refused).to.be.instanceOf(OpenAI.AuthenticationError);
    });
  });

  describe('Responses (openai)', () => {
    it('answers JSON for a native ID and streams for the prefixed one', async () => {
      const response = await openai.responses.create({ model: 'gen-5.5', input: 'Native id' });
      expect(response.output_text).to.equal('Mock reply to: Native id');
      expect(test.upstreams.alpha.requests[0]!.path).to.equal('/v1/responses');
      expect(test.upstreams.alpha.requests[0]!.body.model).to.equal('gen-5.5');
      const stream = await openai.responses.create({ model: 'alpha/gen-5.5', input: 'Prefixed id', stream: true });
      const types: string[] = [];
      for await (const event of stream) types.push(event.type);
      expect(types.at(-1)).to.equal('response.completed');
      expect(types).to.include('response.output_text.delta');
    });

    it('routes every Set R ID, native or prefixed, to the alpha upstream', async () => {
      const native = [
        'gen-6-astra',
        'gen-6.1-sol',
        'gen-6-sol',
        'gen-6-luna',
        'gen-5.6-terra',
        'gen-5.6-luna',
        'gen-5.5',
      ];
      for (const id of ['alpha-latest', ...native, ...native.map((name) => `alpha/${name}`)]) {
        await openai.responses.create({ model: id, input: 'x' });
        expect(test.upstreams.alpha.requests.at(-1)!.body.model, id).to.equal(
          id === 'alpha-latest' ? 'gen-6-astra' : id.replace('alpha/', ''),
        );
      }
      expect(test.allRequests()).to.have.length(15);
    });

    it('points other vendors to Chat Completions', async () => {
      const error = await openai.responses.create({ model: 'beta-latest', input: 'x' }).then(
        () => undefined,
        (caught: Error) => caught,
      );
      expect(error?.message).to.contain('/v1/chat/completions');
    });
  });

  describe('Messages (@anthropic-ai/sdk)', () => {
    it('answers JSON and streams through beta-latest with x-api-key upstream', async () => {
      const message = await anthropic.messages.create({
        model: 'beta-latest',
        max_tokens: 100,
        messages: [{ role: 'user', content: 'Hi beta' }],
      });
      expect(message.content[0]).to.deep.include({ type: 'text', text: 'Mock reply to: Hi beta' });
      const seen = test.upstreams.beta.requests[0]!;
      expect(seen.path).to.equal('/v1/messages');
      expect(seen.body.model).to.equal('beta-fable-5-1');
      expect(seen.headers['x-api-key']).to.equal(UPSTREAM_KEY);
      // The client's own version header is passed on (the route default applies only when none is sent).
      expect(seen.headers['anthropic-version']).to.match(/^\d{4}-\d{2}-\d{2}$/);
      const stream = anthropic.messages.stream({
        model: 'beta-opus-4-8',
        max_tokens: 100,
        messages: [{ role: 'user', content: 'Stream beta' }],
      });
      const final = await stream.finalMessage();
      expect(final.content[0]).to.deep.include({ text: 'Mock reply to: Stream beta' });
      expect(final.usage.output_tokens).to.equal(test.upstreams.beta.requests[1]!.reportedUsage!.outputTokens);
    });

    it('routes every Set M ID to the beta upstream, on messages and count_tokens', async () => {
      const setM = [
        'beta-latest',
        'beta-fable-5-1',
        'beta-opus-5-5',
        'beta-fable-5',
        'beta-opus-5',
        'beta-opus-4-8',
        'beta-opus-4-7',
        'beta-opus-4-6',
        'beta-sonnet-4-6',
      ];
      for (const id of setM) {
        await anthropic.messages.create({ model: id, max_tokens: 10, messages: [{ role: 'user', content: 'x' }] });
        await anthropic.messages.countTokens({ model: id, messages: [{ role: 'user', content: 'x' }] });
        const expected = id === 'beta-latest' ? 'beta-fable-5-1' : id;
        expect(test.upstreams.beta.requests.slice(-2).map((entry) => [entry.path, entry.body.model])).to.deep.equal([
          ['/v1/messages', expected],
          ['/v1/messages/count_tokens', expected],
        ]);
      }
      expect(test.allRequests()).to.have.length(18);
    });

    it('counts tokens', async () => {
      const count = await anthropic.messages.countTokens({
        model: 'beta-latest',
        messages: [{ role: 'user', content: 'count me' }],
      });
      expect(count.input_tokens).to.be.greaterThan(0);
      expect(test.upstreams.beta.requests[0]!.path).to.equal('/v1/messages/count_tokens');
    });

    it("shows the gateway's errors in the Anthropic envelope", async () => {
      const error = await anthropic.messages
        .create({ model: 'alpha/gen-5.5', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] })
        .then(
          () => undefined,
          (caught: unknown) => caught,
        );
      expect(error).to.be.instanceOf(Anthropic.BadRequestError);
      expect((error as Error).message).to.contain('/v1/chat/completions');
    });

    it('returns upstream errors unchanged', async () => {
      test.upstreams.beta.enqueue({
        kind: 'status',
        status: 529,
        body: { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } },
      });
      const error = await anthropic.messages
        .create({ model: 'beta-latest', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] })
        .then(
          () => undefined,
          (caught: unknown) => caught,
        );
      expect((error as { status?: number }).status).to.equal(529);
      expect((error as Error).message).to.contain('Overloaded');
    });
  });
});
