import { expect } from 'chai';
import { startMockUpstream, type MockUpstream } from '../../mock-upstream/mock-upstream-server.ts';
import { TestRedisServer } from '../helpers/redis-server.ts';
import { startTestGateway, UPSTREAM_KEY, type TestGateway } from '../helpers/test-gateway.ts';

interface Answer {
  readonly status: number;
  readonly text: string;
}

async function post(url: string, path: string, key: string, body: unknown): Promise<Answer> {
  const answer = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: answer.status, text: await answer.text() };
}

const nativeChat = (extra: Record<string, unknown> = {}) => ({ model: 'zeta/zeta-k3', input: 'hi', ...extra });
const completions = { model: 'zeta/zeta-k3', messages: [{ role: 'user', content: 'a long answer, please' }] };

/**
 * Only an endpoint's own faults count against it: a caller's own deadline, a slow answer the caller
 * asked for, or one key's burst of failures cannot rest a provider for everyone else.
 */
describe("the circuit breaker counts only the endpoint's own faults", function () {
  this.timeout(60_000);
  let redis: TestRedisServer;
  let zeta: MockUpstream;
  let instances: TestGateway[];

  beforeEach(async () => {
    redis = await TestRedisServer.start();
    zeta = await startMockUpstream({ apiKey: UPSTREAM_KEY });
    // Two instances on one Redis, one zeta endpoint: a rest opened on one is shared with the other.
    const env = { REDIS_URL: redis.url, ZETA_BASE_URL: zeta.url, UPSTREAM_FIRST_BYTE_TIMEOUT_MS: '300' };
    instances = [await startTestGateway({ env }), await startTestGateway({ env })];
  });
  afterEach(async () => {
    await Promise.all(instances.map((instance) => instance.close()));
    await zeta.close();
    await redis.close();
  });

  const keyFor = async (name: string) => (await instances[0]!.gateway.keys.create({ name, rpm: 1000 })).key;

  it('five /v1/chat requests ended by their own 1 ms timeout (and one with 4 retries: five attempts) leave zeta serving other keys on every instance', async () => {
    const [abuser, other] = [await keyFor('abuser'), await keyFor('other')];
    for (let index = 0; index < 5; index += 1) {
      zeta.enqueue({ kind: 'delay', ms: 200 });
      const answer = await post(instances[0]!.url, '/v1/chat', abuser, nativeChat({ timeout: 0.001, max_retries: 0 }));
      expect(answer.status, answer.text).to.equal(504);
    }
    // Five attempts of one request, each ended by the caller's timeout (more retries only add backoff waits).
    for (let index = 0; index < 5; index += 1) zeta.enqueue({ kind: 'delay', ms: 200 });
    expect(
      (await post(instances[0]!.url, '/v1/chat', abuser, nativeChat({ timeout: 0.001, max_retries: 4 }))).status,
    ).to.equal(504);
    zeta.reset();
    for (const instance of instances) {
      const served = await post(instance.url, '/v1/chat', other, nativeChat());
      expect(served.status, served.text).to.equal(200);
    }
  });

  it('a JSON answer slower than the first-byte timeout is served, and five of them rest nothing', async () => {
    const [patient, other] = [await keyFor('patient'), await keyFor('other')];
    for (let index = 0; index < 5; index += 1) {
      // 600 ms to generate, twice the first-byte timeout: a JSON answer comes only when it is done.
      zeta.enqueue({ kind: 'delay', ms: 600 });
      const answer = await post(instances[0]!.url, '/v1/chat/completions', patient, completions);
      expect(answer.status, answer.text).to.equal(200);
    }
    for (const instance of instances)
      expect((await post(instance.url, '/v1/chat/completions', other, completions)).status).to.equal(200);
  });

  it("one key's burst of real failures counts once; the same failures from several keys rest zeta on every instance, as before", async () => {
    const lone = await keyFor('lone');
    for (let index = 0; index < 5; index += 1) {
      zeta.enqueue({ kind: 'status', status: 500, body: { error: { message: 'boom' } } });
      expect((await post(instances[0]!.url, '/v1/chat/completions', lone, completions)).status).to.equal(500);
    }
    const bystander = await keyFor('bystander');
    for (const instance of instances)
      expect(
        (await post(instance.url, '/v1/chat/completions', bystander, completions)).status,
        'one key cannot rest it',
      ).to.equal(200);
    const many = await Promise.all(Array.from({ length: 5 }, (_, index) => keyFor(`caller ${index}`)));
    for (const key of many) {
      zeta.enqueue({ kind: 'status', status: 500, body: { error: { message: 'boom' } } });
      expect((await post(instances[0]!.url, '/v1/chat/completions', key, completions)).status).to.equal(500);
    }
    // Five callers' failures in a row: a real outage. Every instance rests the endpoint (shared through Redis).
    let resting: Answer | undefined;
    for (let attempt = 0; attempt < 40 && resting?.status !== 503; attempt += 1) {
      resting = await post(instances[1]!.url, '/v1/chat/completions', bystander, completions);
      if (resting.status !== 503) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(resting!.status, resting!.text).to.equal(503);
    expect(resting!.text).to.contain('resting');
  });
});
