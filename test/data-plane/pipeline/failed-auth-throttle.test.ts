import { expect } from 'chai';
import { request } from 'undici';
import { newKeyRecord, type ApiKeyRecord } from '../../../src/core/api-keys.ts';
import { createAuthenticator, FailedAuthThrottle } from '../../../src/data-plane/pipeline/authenticate.ts';
import type { KeyStore } from '../../../src/stores/keys/key-store.ts';
import { isGatewayError } from '../../../src/core/gateway-errors.ts';
import { startTestGateway, TEST_KEY, type TestGateway } from '../../helpers/test-gateway.ts';

const ADMIN_TOKEN = 'admin-token-for-throttle-tests-0001';

interface Call {
  readonly status: number;
  readonly retryAfter?: string;
  readonly body: any;
}

/** A GET with an optional bearer; `from` is the client address a trusted proxy (loopback) names. */
async function call(url: string, key: string | undefined, from?: string): Promise<Call> {
  const headers: Record<string, string> = {};
  if (key !== undefined) headers.authorization = `Bearer ${key}`;
  if (from !== undefined) headers['x-forwarded-for'] = from;
  const response = await request(url, { headers });
  return {
    status: response.statusCode,
    retryAfter: response.headers['retry-after'] as string | undefined,
    body: await response.body.json(),
  };
}

async function signIn(url: string, token: string, from?: string): Promise<Call> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (from !== undefined) headers['x-forwarded-for'] = from;
  const response = await request(`${url}/account/api/session`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ token }),
  });
  return {
    status: response.statusCode,
    retryAfter: response.headers['retry-after'] as string | undefined,
    body: await response.body.json(),
  };
}

async function statuses(count: number, attempt: (index: number) => Promise<Call>): Promise<number[]> {
  const seen = [];
  for (let index = 0; index < count; index += 1) seen.push((await attempt(index)).status);
  return seen;
}

describe('failed credentials are throttled per client address, one budget per kind of credential', function () {
  this.timeout(30_000);
  let gateway: TestGateway;

  beforeEach(async () => {
    gateway = await startTestGateway({
      env: {
        GATEWAY_AUTH_FAILURES_PER_MINUTE: '5',
        GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN,
        GATEWAY_TRUSTED_PROXIES: 'loopback',
      },
    });
  });
  afterEach(async () => gateway.close());

  it('answers 429 with Retry-After after the documented number of unknown API keys, to every key from that address only', async () => {
    expect(
      await statuses(5, (index) => call(`${gateway.url}/v1/usage`, `sk-unknown-key-${index}-000000`)),
    ).to.deep.equal([401, 401, 401, 401, 401]);
    const refused = await call(`${gateway.url}/v1/usage`, 'sk-unknown-key-6-000000');
    expect(refused.status).to.equal(429);
    expect(Number(refused.retryAfter)).to.be.within(1, 60);
    expect(refused.body.detail).to.equal('Too many failed API key attempts from this address: at most 5 per minute');
    // A valid key from the throttled address is not even looked at: a right guess must look like a wrong one.
    expect((await call(`${gateway.url}/v1/usage`, TEST_KEY)).status).to.equal(429);
    expect((await call(`${gateway.url}/v1/usage`, TEST_KEY, '203.0.113.9')).status).to.equal(200);
  });

  it('does not count a missing header as a failed attempt', async () => {
    for (let index = 0; index < 8; index += 1)
      expect((await call(`${gateway.url}/v1/usage`, undefined)).status).to.equal(401);
    expect((await call(`${gateway.url}/v1/usage`, 'sk-unknown-key-1-000000')).status).to.equal(401);
  });

  it('leaves the admin token and the account sign-in working after the API-key budget of the same address is spent', async () => {
    expect(
      await statuses(6, (index) => call(`${gateway.url}/v1/usage`, `sk-unknown-key-${index}-000000`)),
    ).to.deep.equal([401, 401, 401, 401, 401, 429]);
    expect((await call(`${gateway.url}/admin/keys`, ADMIN_TOKEN)).status).to.equal(200);
    expect((await call(`${gateway.url}/admin/keys`, 'wrong-token-0')).status).to.equal(401);
    expect((await signIn(gateway.url, ADMIN_TOKEN)).status).to.equal(201);
  });

  it('refuses wrong admin tokens past the limit before comparing any token, from that address only, leaving API keys and sign-in alone', async () => {
    expect(await statuses(6, (index) => call(`${gateway.url}/admin/keys`, `wrong-token-${index}`))).to.deep.equal([
      401, 401, 401, 401, 401, 429,
    ]);
    const blocked = await call(`${gateway.url}/admin/keys`, ADMIN_TOKEN);
    expect(blocked.status).to.equal(429);
    expect(blocked.body.detail).to.equal(
      'Too many failed admin token attempts from this address: at most 5 per minute',
    );
    expect(Number(blocked.retryAfter)).to.be.within(1, 60);
    expect((await call(`${gateway.url}/admin/keys`, ADMIN_TOKEN, '203.0.113.9')).status).to.equal(200);
    expect((await call(`${gateway.url}/v1/usage`, TEST_KEY)).status).to.equal(200);
    expect((await call(`${gateway.url}/v1/usage`, 'sk-unknown-key-0-000000')).status).to.equal(401);
    expect((await signIn(gateway.url, ADMIN_TOKEN)).status).to.equal(201);
  });

  it('counts failed sign-ins on a budget of their own (10 per 15 minutes), leaving the admin API and API keys alone', async () => {
    expect(await statuses(11, () => signIn(gateway.url, 'wrong-token'))).to.deep.equal([...Array(10).fill(401), 429]);
    const throttled = await signIn(gateway.url, ADMIN_TOKEN);
    expect(throttled.status).to.equal(429);
    expect(throttled.body.detail).to.equal(
      'Too many failed sign-ins from this address: 10 per 15 minutes; wait and retry',
    );
    expect((await signIn(gateway.url, ADMIN_TOKEN, '203.0.113.9')).status).to.equal(201);
    expect((await call(`${gateway.url}/admin/keys`, ADMIN_TOKEN)).status).to.equal(200);
    expect((await call(`${gateway.url}/v1/usage`, TEST_KEY)).status).to.equal(200);
  });
});

describe('failed credentials at the default limit', function () {
  this.timeout(30_000);

  it('leaves the admin token working after 20 bad API keys and more from the same address', async () => {
    const gateway = await startTestGateway({ env: { GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN } });
    try {
      expect(
        await statuses(21, (index) => call(`${gateway.url}/v1/usage`, `sk-unknown-key-${index}-000000`)),
      ).to.deep.equal([...Array(20).fill(401), 429]);
      expect((await call(`${gateway.url}/admin/keys`, ADMIN_TOKEN)).status).to.equal(200);
    } finally {
      await gateway.close();
    }
  });
});

/** Managed keys in memory, counting every lookup. */
class CountingKeyStore implements KeyStore {
  lookups = 0;
  private readonly records = new Map<string, ApiKeyRecord>();

  add(key: string): void {
    const record = newKeyRecord(key, { name: 'counted' });
    this.records.set(record.hash, record);
  }

  async findByHash(hash: string): Promise<ApiKeyRecord | undefined> {
    this.lookups += 1;
    return this.records.get(hash);
  }

  async create(): Promise<never> {
    throw new Error('not used');
  }

  async list(): Promise<ApiKeyRecord[]> {
    return [...this.records.values()];
  }

  async revoke(): Promise<boolean> {
    return false;
  }

  async update(): Promise<undefined> {
    return undefined;
  }

  async close(): Promise<void> {}
}

describe('a throttled address', () => {
  const MANAGED = 'sk-managed-key-for-counting-0001-0123456789';
  const STATIC = 'sk-static-key-for-counting-0001-0123456789';

  async function outcome(result: unknown): Promise<number> {
    try {
      await result;
      return 200;
    } catch (error) {
      if (isGatewayError(error)) return error.status;
      throw error;
    }
  }

  it('is refused before any key lookup, its valid keys included, while other addresses are looked up as before', async () => {
    const store = new CountingKeyStore();
    store.add(MANAGED);
    const throttle = new FailedAuthThrottle(2);
    // trustMs 0: every check of a managed key asks the store, so a lookup cannot hide in the cache.
    const authenticator = createAuthenticator({ store, staticKeys: [STATIC], throttle, trustMs: 0 });
    const check = (key: string, address: string) =>
      outcome(
        (async () => authenticator.check({ authorization: `Bearer ${key}` }, '/v1/chat/completions', () => address))(),
      );

    expect([await check('sk-unknown-key-0-000000', 'a'), await check('sk-unknown-key-1-000000', 'a')]).to.deep.equal([
      401, 401,
    ]);
    expect(store.lookups).to.equal(2);
    expect(await check('sk-unknown-key-2-000000', 'a')).to.equal(429);
    expect(await check(MANAGED, 'a')).to.equal(429);
    expect(await check(STATIC, 'a')).to.equal(429);
    expect(await check('not-a-key', 'a')).to.equal(429);
    expect(store.lookups).to.equal(2);

    expect(await check(MANAGED, 'b')).to.equal(200);
    expect(await check(STATIC, 'b')).to.equal(200);
    expect(store.lookups).to.equal(3);
  });
});

describe('FailedAuthThrottle', () => {
  it('counts per address in fixed windows and forgets a window once it is over', () => {
    let now = 0;
    const throttle = new FailedAuthThrottle(2, { windowMs: 60_000, now: () => now });
    expect(throttle.idle).to.equal(true);
    expect([throttle.failed('a'), throttle.failed('a')]).to.deep.equal([undefined, undefined]);
    expect(throttle.idle).to.equal(false);
    expect(throttle.failed('a')?.status).to.equal(429);
    expect(throttle.refusal('b')).to.equal(undefined);
    now = 30_000;
    expect(throttle.refusal('a')?.headers).to.deep.equal({ 'Retry-After': '30' });
    expect(throttle.refusal('a')?.detail).to.equal(
      'Too many failed authentication attempts from this address: at most 2 per minute',
    );
    now = 60_000;
    expect(throttle.idle).to.equal(true);
    expect(throttle.refusal('a')).to.equal(undefined);
    expect(throttle.failed('a')).to.equal(undefined);
  });

  it('stays busy until the last window counted is over', () => {
    let now = 0;
    const throttle = new FailedAuthThrottle(1, { windowMs: 60_000, now: () => now, subject: 'admin token attempts' });
    throttle.failed('a');
    now = 40_000;
    throttle.failed('b');
    now = 60_000;
    expect(throttle.idle).to.equal(false);
    expect(throttle.failed('b')?.detail).to.equal(
      'Too many failed admin token attempts from this address: at most 1 per minute',
    );
    now = 100_000;
    expect(throttle.idle).to.equal(true);
  });
});
