import { expect } from 'chai';
import { request } from 'undici';
import { FailedAuthThrottle } from '../../src/auth/failed-auth-throttle.ts';
import { startTestGateway, TEST_KEY, type TestGateway } from '../helpers/test-gateway.ts';

const ADMIN_TOKEN = 'admin-token-for-throttle-tests-0001';

async function call(url: string, key: string | undefined): Promise<{ status: number; retryAfter?: string; body: any }> {
  const response = await request(url, { headers: key === undefined ? {} : { authorization: `Bearer ${key}` } });
  return { status: response.statusCode, retryAfter: response.headers['retry-after'] as string | undefined, body: await response.body.json() };
}

describe('failed credentials are throttled per client address', function () {
  this.timeout(30_000);
  let gateway: TestGateway;

  beforeEach(async () => {
    gateway = await startTestGateway({ env: { GATEWAY_AUTH_FAILURES_PER_MINUTE: '5', GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN } });
  });
  afterEach(async () => gateway.close());

  it('answers 429 with Retry-After after the documented number of unknown API keys, and never slows a valid key', async () => {
    const statuses = [];
    for (let index = 0; index < 5; index += 1) statuses.push((await call(`${gateway.url}/v1/usage`, `sk-unknown-key-${index}-000000`)).status);
    expect(statuses).to.deep.equal([401, 401, 401, 401, 401]);
    const refused = await call(`${gateway.url}/v1/usage`, 'sk-unknown-key-6-000000');
    expect(refused.status).to.equal(429);
    expect(Number(refused.retryAfter)).to.be.within(1, 60);
    expect(refused.body.detail).to.equal('Too many failed authentication attempts from this address: at most 5 per minute');
    expect((await call(`${gateway.url}/v1/usage`, TEST_KEY)).status).to.equal(200);
    expect((await call(`${gateway.url}/v1/usage`, 'sk-unknown-key-7-000000')).status).to.equal(429);
  });

  it('does not count a missing header as a failed attempt', async () => {
    for (let index = 0; index < 8; index += 1) expect((await call(`${gateway.url}/v1/usage`, undefined)).status).to.equal(401);
    expect((await call(`${gateway.url}/v1/usage`, 'sk-unknown-key-1-000000')).status).to.equal(401);
  });

  it('refuses wrong admin tokens past the limit before comparing any token', async () => {
    const statuses = [];
    for (let index = 0; index < 6; index += 1) statuses.push((await call(`${gateway.url}/admin/keys`, `wrong-token-${index}`)).status);
    expect(statuses).to.deep.equal([401, 401, 401, 401, 401, 429]);
    const blocked = await call(`${gateway.url}/admin/keys`, ADMIN_TOKEN);
    expect(blocked.status).to.equal(429);
    expect(Number(blocked.retryAfter)).to.be.within(1, 60);
  });
});

describe('FailedAuthThrottle', () => {
  it('counts per address in fixed windows and forgets a window once it is over', () => {
    let now = 0;
    const throttle = new FailedAuthThrottle(2, 60_000, () => now);
    expect([throttle.failed('a'), throttle.failed('a')]).to.deep.equal([undefined, undefined]);
    expect(throttle.failed('a')?.status).to.equal(429);
    expect(throttle.refusal('b')).to.equal(undefined);
    now = 30_000;
    expect(throttle.refusal('a')?.headers).to.deep.equal({ 'Retry-After': '30' });
    now = 60_000;
    expect(throttle.refusal('a')).to.equal(undefined);
    expect(throttle.failed('a')).to.equal(undefined);
  });
});
