import { expect } from 'chai';
import OpenAI from 'openai';
import { withinOneWindow } from '../helpers/limit-window.ts';
import { startTestGateway, TEST_KEY, type TestGateway } from '../helpers/test-gateway.ts';

// `GET /v1/usage` through the official OpenAI client, as an app reads its own usage beside its requests.
describe('GET /v1/usage on a running gateway', function () {
  this.timeout(60_000);
  let test: TestGateway;
  let client: OpenAI;
  const limit = 3;

  beforeEach(async () => {
    test = await startTestGateway({ env: { RATE_LIMIT_MAX: String(limit) } });
    client = new OpenAI({ apiKey: TEST_KEY, baseURL: `${test.url}/v1`, maxRetries: 0 });
  });
  afterEach(async () => test.close());

  const chat = () =>
    client.chat.completions.create({ model: 'zeta/zeta-k3', messages: [{ role: 'user', content: 'hello' }] });
  const usage = () => client.get<{ object: string; data: { requests: number }[] }>('/usage');

  // It is counted per client address instead (as the catalog is), at the same rate limit.
  it("spends none of the key's requests per minute, and still answers once the key is limited", async () => {
    await withinOneWindow(20_000);
    for (let index = 0; index < limit - 1; index += 1) expect((await usage()).object).to.equal('list');
    for (let index = 0; index < limit; index += 1) await chat();
    const refused = await chat().catch((error: unknown) => error);
    expect(refused).to.be.instanceOf(OpenAI.RateLimitError);
    await test.gateway.flushUsage();
    const rows = (await usage()).data;
    expect(rows.reduce((sum, row) => sum + row.requests, 0)).to.equal(limit);
  });

  it("answers errors in the OpenAI-compatible routes' envelope, which the official client reads", async () => {
    const invalid = await client.get('/usage', { query: { group_by: 'key' } }).catch((error: unknown) => error);
    expect(invalid).to.be.instanceOf(OpenAI.BadRequestError);
    const bad = invalid as InstanceType<typeof OpenAI.BadRequestError>;
    expect(bad.code).to.equal('GW_ERR_VALIDATION');
    expect(bad.type).to.equal('invalid_request_error');
    expect(bad.message).to.contain("Field 'query.group_by': cannot be 'key' here");
    const stranger = new OpenAI({
      apiKey: 'sk-not-a-known-key-0123456789abcdef',
      baseURL: `${test.url}/v1`,
      maxRetries: 0,
    });
    const unknown = await stranger.get('/usage').catch((error: unknown) => error);
    expect(unknown).to.be.instanceOf(OpenAI.AuthenticationError);
    expect((unknown as InstanceType<typeof OpenAI.AuthenticationError>).code).to.equal('GW_ERR_UNAUTHENTICATED');
    // The same body a model route gives for the same mistake.
    const [fromUsage, fromChat] = await Promise.all(
      ['/v1/usage', '/v1/chat/completions'].map(async (path) => {
        const response = await fetch(`${test.url}${path}`, {
          method: path === '/v1/usage' ? 'GET' : 'POST',
          headers: { authorization: 'Bearer sk-not-a-known-key-0123456789abcdef' },
        });
        return { status: response.status, body: (await response.json()) as Record<string, unknown> };
      }),
    );
    expect(fromUsage).to.deep.equal(fromChat);
  });
});
