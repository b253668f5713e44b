import { expect } from 'chai';
import { request } from 'undici';
import { startTestGateway, TEST_KEY, type TestGateway } from '../../helpers/test-gateway.ts';

async function call(
  url: string,
  path: string,
  headers: Record<string, string>,
  body: unknown = { model: 'alpha-latest', messages: [{ role: 'user', content: 'x' }] },
) {
  const response = await request(`${url}${path}`, { method: 'POST', headers, body: JSON.stringify(body) });
  return { status: response.statusCode, body: (await response.body.json()) as Record<string, any> };
}

describe('bearer authentication', () => {
  let test: TestGateway;
  let managedKey: string;
  let revokedKey: string;
  let expiredKey: string;
  let restrictedKey: string;

  before(async () => {
    test = await startTestGateway({ env: { GATEWAY_ADMIN_TOKEN: 'admin-token-for-tests-0123456789abcdef' } });
    managedKey = (await test.gateway.keys.create({ name: 'app' })).key;
    const revoked = await test.gateway.keys.create({ name: 'old' });
    await test.gateway.keys.revoke(revoked.record.id);
    revokedKey = revoked.key;
    expiredKey = (await test.gateway.keys.create({ name: 'past', expiresAt: '2020-01-01T00:00:00.000Z' })).key;
    restrictedKey = (await test.gateway.keys.create({ name: 'narrow', models: ['alpha/gen-5.5'] })).key;
  });
  after(async () => test.close());

  const unauthorized: [string, Record<string, string>, string][] = [
    ['no header', {}, 'Missing bearer token'],
    ['an empty header', { authorization: '' }, 'Missing bearer token'],
    ['a Basic scheme', { authorization: 'Basic dXNlcjpwYXNz' }, 'must use the Bearer scheme'],
    ['an empty bearer', { authorization: 'Bearer ' }, 'Missing bearer token'],
    ['a malformed key', { authorization: 'Bearer not-a-key' }, 'Invalid API key'],
    ['an unknown key', { authorization: 'Bearer sk-unknownunknownunknown' }, 'Invalid API key'],
  ];
  for (const [name, headers, detail] of unauthorized) {
    it(`answers 401 for ${name}, with each route family's envelope`, async () => {
      const chat = await call(test.url, '/v1/chat/completions', headers);
      expect(chat.status).to.equal(401);
      expect(chat.body.detail).to.contain(detail);
      expect(chat.body.error.type).to.equal('authentication_error');
      const messages = await call(test.url, '/v1/messages', headers, {});
      expect(messages.status).to.equal(401);
      expect(messages.body).to.deep.include({ type: 'error' });
      expect((await call(test.url, '/v1/chat', headers, {})).body).to.deep.equal({ detail: chat.body.detail });
    });
  }

  it('guards the usage read-back too, and leaves the catalog public', async () => {
    expect((await request(`${test.url}/v1/usage`)).statusCode).to.equal(401);
    expect((await request(`${test.url}/v1/models`)).statusCode).to.equal(200);
  });

  it('accepts static and managed keys', async () => {
    expect((await call(test.url, '/v1/chat/completions', { authorization: `Bearer ${TEST_KEY}` })).status).to.equal(
      200,
    );
    expect((await call(test.url, '/v1/chat/completions', { authorization: `bearer ${managedKey}` })).status).to.equal(
      200,
    );
  });

  it('answers 403 for revoked and expired keys and for a model the key may not use', async () => {
    const revoked = await call(test.url, '/v1/chat/completions', { authorization: `Bearer ${revokedKey}` });
    expect(revoked).to.deep.include({ status: 403 });
    expect(revoked.body.detail).to.equal('This API key has been revoked');
    const expired = await call(test.url, '/v1/chat/completions', { authorization: `Bearer ${expiredKey}` });
    expect(expired.status).to.equal(403);
    expect(expired.body.detail).to.equal('This API key expired at 2020-01-01T00:00:00.000Z');
    const narrow = await call(test.url, '/v1/chat/completions', { authorization: `Bearer ${restrictedKey}` });
    expect(narrow.status).to.equal(403);
    expect(narrow.body.detail).to.equal("This API key may not use the model 'alpha/gen-6-astra'");
    expect(
      (
        await call(
          test.url,
          '/v1/responses',
          { authorization: `Bearer ${restrictedKey}` },
          { model: 'gen-5.5', input: 'x' },
        )
      ).status,
    ).to.equal(200);
  });

  it('manages keys over the admin API behind the admin token, showing a new key once and never a hash', async () => {
    const admin = {
      authorization: 'Bearer admin-token-for-tests-0123456789abcdef',
      'content-type': 'application/json',
    };
    expect(
      (await request(`${test.url}/admin/keys`, { headers: { authorization: 'Bearer wrong' } })).statusCode,
    ).to.equal(401);
    const created = await request(`${test.url}/admin/keys`, {
      method: 'POST',
      headers: admin,
      body: JSON.stringify({ name: 'svc', rpm: 10, models: ['beta/beta-fable-5-1'] }),
    });
    expect(created.statusCode).to.equal(201);
    const record = (await created.body.json()) as Record<string, any>;
    expect(record.key).to.match(/^sk-[A-Za-z0-9_-]{43}$/);
    expect(record).not.to.have.property('hash');
    const listed = await (await request(`${test.url}/admin/keys`, { headers: admin })).body.text();
    expect(listed).to.contain(record.id);
    expect(listed).not.to.contain(record.key);
    expect(listed).not.to.contain('"hash"');
    const bad = await request(`${test.url}/admin/keys`, {
      method: 'POST',
      headers: admin,
      body: JSON.stringify({ rpm: 0, models: ['beta-latest'], extra: 1 }),
    });
    expect(bad.statusCode).to.equal(400);
    expect(((await bad.body.json()) as { errors: string[] }).errors).to.include.members([
      "Field 'name': is required",
      "Field 'rpm': must be a positive integer",
    ]);
    const revoked = await request(`${test.url}/admin/keys/${record.id}`, { method: 'DELETE', headers: admin });
    expect(revoked.statusCode).to.equal(200);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((await call(test.url, '/v1/chat/completions', { authorization: `Bearer ${record.key}` })).status).to.equal(
      403,
    );
  });
});

describe('admin API without a token', () => {
  it('does not exist', async () => {
    const test = await startTestGateway();
    try {
      const response = await request(`${test.url}/admin/keys`);
      expect(response.statusCode).to.equal(404);
      expect(await response.body.json()).to.deep.equal({ detail: 'No route for GET /admin/keys' });
    } finally {
      await test.close();
    }
  });
});
