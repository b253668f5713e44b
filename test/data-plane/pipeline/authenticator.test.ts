import { expect } from 'chai';
import { assertModelAllowed } from '../../../src/data-plane/upstream/upstream-client.ts';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hashApiKey, sameHash, sameSecret, type ApiKeyRecord } from '../../../src/core/api-keys.ts';
import { createAuthenticator, staticKeyRecord } from '../../../src/data-plane/pipeline/authenticate.ts';
import { staticKeyId } from '../../../src/core/static-key-id.ts';
import { FileKeyStore } from '../../../src/stores/keys/file-key-store.ts';
import type { KeyStore } from '../../../src/stores/keys/key-store.ts';
import { ConfigError, parseStaticKeys } from '../../../src/config/gateway-config.ts';
import { isGatewayError } from '../../../src/core/gateway-errors.ts';
import { captureLogs, send, startGuardedApp, type GuardedApp } from './guarded-app.ts';

const STATIC_KEY = 'sk-static-key-for-tests-0001-0123456789abcdef';
const ID_SECRET = randomBytes(32).toString('base64url');

describe('bearer authenticator', () => {
  let dataDir: string;
  let store: FileKeyStore;
  let app: GuardedApp;
  const logs = captureLogs();
  const keys: Record<'active' | 'revoked' | 'expired' | 'narrow' | 'limited', string> = {
    active: '',
    revoked: '',
    expired: '',
    narrow: '',
    limited: '',
  };

  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'gateway-auth-'));
    store = new FileKeyStore(dataDir);
    keys.active = (await store.create({ name: 'app' })).key;
    const revoked = await store.create({ name: 'old' });
    await store.revoke(revoked.record.id);
    keys.revoked = revoked.key;
    keys.expired = (await store.create({ name: 'past', expiresAt: '2020-01-01T00:00:00.000Z' })).key;
    keys.narrow = (await store.create({ name: 'narrow', models: ['alpha/gen-5.5'] })).key;
    keys.limited = (await store.create({ name: 'limited', rpm: 7 })).key;
    app = await startGuardedApp({
      model: [createAuthenticator({ store, staticKeys: [STATIC_KEY], keyIdSecret: ID_SECRET, logger: logs.logger })],
      logger: logs.logger,
    });
  });
  after(async () => {
    await app.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  const refused: [string, Record<string, string>, string][] = [
    ['no Authorization header', {}, 'Missing bearer token: send the header Authorization: Bearer <API key>'],
    ['an empty header', { authorization: '' }, 'Missing bearer token: send the header Authorization: Bearer <API key>'],
    [
      'a bearer without a token',
      { authorization: 'Bearer   ' },
      'Missing bearer token: send the header Authorization: Bearer <API key>',
    ],
    [
      'a Basic scheme',
      { authorization: 'Basic dXNlcjpwYXNz' },
      "The Authorization header must use the Bearer scheme: 'Authorization: Bearer <API key>'",
    ],
    [
      'a bare key without a scheme',
      { authorization: STATIC_KEY },
      "The Authorization header must use the Bearer scheme: 'Authorization: Bearer <API key>'",
    ],
    [
      'a key without the sk- prefix',
      { authorization: 'Bearer pk-0123456789abcdef' },
      "Invalid API key: keys start with 'sk-' followed by letters, digits, '-' or '_'",
    ],
    [
      'a key with spaces',
      { authorization: 'Bearer sk-abcdefgh ijkl' },
      "Invalid API key: keys start with 'sk-' followed by letters, digits, '-' or '_'",
    ],
    ['an unknown key', { authorization: 'Bearer sk-unknownunknownunknown' }, 'Invalid API key'],
  ];
  for (const [name, headers, detail] of refused) {
    it(`answers 401 for ${name}`, async () => {
      const answer = await send(app.url, '/v1/chat/completions', headers);
      expect(answer.status).to.equal(401);
      expect(answer.body).to.deep.equal({ detail });
    });
  }

  it('tells a missing key from an invalid one', () => {
    const details = refused.map(([, , detail]) => detail);
    expect(new Set(details).size).to.equal(4);
  });

  it('answers 403 for a revoked key and for an expired key', async () => {
    expect(await send(app.url, '/v1/chat/completions', { key: keys.revoked })).to.deep.include({
      status: 403,
      body: { detail: 'This API key has been revoked' },
    });
    expect(await send(app.url, '/v1/chat/completions', { key: keys.expired })).to.deep.include({
      status: 403,
      body: { detail: 'This API key expired at 2020-01-01T00:00:00.000Z' },
    });
  });

  it('lets static and managed keys through, leaving id, name and permissions (never the key or hash) in res.locals.apiKey', async () => {
    const managed = await send(app.url, '/v1/chat/completions', { authorization: `bearer ${keys.limited}` });
    expect(managed.status).to.equal(200);
    expect(managed.body.caller).to.deep.equal({ id: managed.body.caller.id, name: 'limited', rpm: 7 });
    expect(managed.body.caller.id).to.match(/^key_[0-9a-f]{16}$/);
    const narrow = await send(app.url, '/v1/chat/completions', { key: keys.narrow });
    expect(narrow.body.caller).to.include({ name: 'narrow' }).and.to.have.deep.property('models', ['alpha/gen-5.5']);
    const fixed = await send(app.url, '/v1/chat/completions', { key: STATIC_KEY });
    expect(fixed.status).to.equal(200);
    expect(fixed.body.caller).to.deep.equal({ id: staticKeyId(STATIC_KEY, ID_SECRET), name: 'static key 1' });
    expect(JSON.stringify([managed.body, fixed.body])).not.to.match(/sk-|[0-9a-f]{64}/);
  });

  describe('x-api-key on the Messages paths', () => {
    for (const path of ['/v1/messages', '/v1/messages/count_tokens']) {
      it(`accepts a gateway key in x-api-key on ${path}, like a bearer token`, async () => {
        const answer = await send(app.url, path, { apiKey: keys.limited });
        expect(answer.status).to.equal(200);
        expect(answer.body.caller).to.include({ name: 'limited', rpm: 7 });
        expect((await send(app.url, path, { apiKey: STATIC_KEY })).body.caller).to.include({ name: 'static key 1' });
      });
    }

    it('lets Authorization win when both headers are sent', async () => {
      const both = await send(app.url, '/v1/messages', { key: keys.narrow, apiKey: keys.limited });
      expect(both.body.caller).to.include({ name: 'narrow' });
      const badBearer = await send(app.url, '/v1/messages', {
        authorization: 'Bearer sk-unknownunknownunknown',
        apiKey: keys.limited,
      });
      expect(badBearer).to.deep.include({ status: 401, body: { detail: 'Invalid API key' } });
    });

    it('keeps the 401 and 403 texts for x-api-key', async () => {
      expect(await send(app.url, '/v1/messages', { apiKey: 'sk-unknownunknownunknown' })).to.deep.include({
        status: 401,
        body: { detail: 'Invalid API key' },
      });
      expect(await send(app.url, '/v1/messages', { apiKey: 'pk-0123456789abcdef' })).to.deep.include({
        status: 401,
        body: { detail: "Invalid API key: keys start with 'sk-' followed by letters, digits, '-' or '_'" },
      });
      expect(await send(app.url, '/v1/messages', { apiKey: keys.revoked })).to.deep.include({
        status: 403,
        body: { detail: 'This API key has been revoked' },
      });
      expect(await send(app.url, '/v1/messages', { apiKey: '  ' })).to.deep.include({
        status: 401,
        body: { detail: refused[0]![2] },
      });
    });

    it('ignores x-api-key on the other model routes', async () => {
      expect(await send(app.url, '/v1/chat/completions', { apiKey: keys.active })).to.deep.include({
        status: 401,
        body: { detail: refused[0]![2] },
      });
    });
  });

  it("assertModelAllowed refuses a model outside the key's list with 403, by canonical ID", () => {
    expect(() => assertModelAllowed({ id: 'key_1', models: ['alpha/gen-5.5'] }, 'alpha/gen-5.5')).not.to.throw();
    expect(() => assertModelAllowed({ id: 'key_1' }, 'beta/anything')).not.to.throw();
    expect(() => assertModelAllowed(undefined, 'beta/anything')).not.to.throw();
    try {
      assertModelAllowed({ id: 'key_1', models: ['alpha/gen-5.5'] }, 'alpha/gen-6-astra');
      expect.fail('should throw');
    } catch (error) {
      expect(isGatewayError(error) && [error.status, error.detail]).to.deep.equal([
        403,
        "This API key may not use the model 'alpha/gen-6-astra'",
      ]);
    }
  });

  it('never writes a key or its hash into logs or error bodies', async () => {
    const bodies = [];
    for (const key of [...Object.values(keys), STATIC_KEY, 'sk-unknownunknownunknown']) {
      bodies.push(JSON.stringify((await send(app.url, '/v1/chat/completions', { key })).body));
    }
    const failing = await startGuardedApp({
      model: [createAuthenticator({ store: unreachableStore(), logger: logs.logger })],
      logger: logs.logger,
    });
    try {
      const answer = await send(failing.url, '/v1/chat/completions', { key: keys.active });
      expect(answer).to.deep.include({
        status: 503,
        body: { detail: 'The key store is unavailable; please retry shortly' },
      });
      expect(answer.headers.get('retry-after')).to.equal('1');
      bodies.push(JSON.stringify(answer.body));
    } finally {
      await failing.close();
    }
    const written = `${logs.text()}\n${bodies.join('\n')}`;
    expect(logs.text()).to.contain('key store unavailable');
    for (const key of [...Object.values(keys), STATIC_KEY, 'sk-unknownunknownunknown']) {
      expect(written).not.to.contain(key);
      expect(written).not.to.contain(hashApiKey(key));
    }
  });

  it("compares the found record's hash in constant time, refusing a record that is not the key's", async () => {
    const other = staticKeyRecord('sk-some-other-key-0000-0123456789abcdef', 0, 'static_0123456789abcdef');
    const lying: KeyStore = { ...unreachableStore(), findByHash: async () => other };
    const strict = await startGuardedApp({ model: [createAuthenticator({ store: lying })] });
    try {
      expect(await send(strict.url, '/v1/chat/completions', { key: keys.active })).to.deep.include({
        status: 401,
        body: { detail: 'Invalid API key' },
      });
    } finally {
      await strict.close();
    }
    expect(sameHash(hashApiKey('a'), hashApiKey('a'))).to.equal(true);
    expect(sameHash(hashApiKey('a'), hashApiKey('b'))).to.equal(false);
    expect(sameHash(hashApiKey('a'), 'abcd')).to.equal(false);
    expect(sameHash('', '')).to.equal(false);
    expect(sameSecret('admin-token', 'admin-token')).to.equal(true);
    expect(sameSecret('admin-token', 'admin-token-but-longer')).to.equal(false);
  });
});

describe('static keys (GATEWAY_API_KEYS)', () => {
  it('parses a comma-separated list of sk- keys', () => {
    expect(parseStaticKeys(undefined)).to.deep.equal([]);
    expect(
      parseStaticKeys(' sk-first-key-00001-0123456789abcdef , sk-second-key-0002-0123456789abcdef,'),
    ).to.deep.equal(['sk-first-key-00001-0123456789abcdef', 'sk-second-key-0002-0123456789abcdef']);
  });

  it('refuses an entry that is not an sk- key, naming its position but not its value', () => {
    expect(() => parseStaticKeys('sk-first-key-00001-0123456789abcdef,secret-value-1234')).to.throw(
      ConfigError,
      /GATEWAY_API_KEYS entry 2 is not a valid key: keys start with 'sk-'/,
    );
    expect(() => parseStaticKeys('secret-value-1234'))
      .to.throw(ConfigError, 'entry 1')
      .with.property('message')
      .that.does.not.contain('secret-value-1234');
  });

  it('refuses a key shorter than sk- and 32 characters (or longer than a presented key may be), naming its position but not its value', () => {
    const short = `sk-${'k'.repeat(31)}`;
    expect(() => parseStaticKeys(short))
      .to.throw(ConfigError, "GATEWAY_API_KEYS entry 1 is not a valid key: keys start with 'sk-' followed by 32 to 200")
      .with.property('message')
      .that.does.not.contain(short);
    expect(parseStaticKeys(`sk-${'k'.repeat(32)}`)).to.deep.equal([`sk-${'k'.repeat(32)}`]);
    expect(() => parseStaticKeys(`${STATIC_KEY},sk-${'k'.repeat(201)}`)).to.throw(
      ConfigError,
      'GATEWAY_API_KEYS entry 2',
    );
  });

  it('gives each static key a public id derived from the key alone (or under GATEWAY_KEY_ID_SECRET), which is no SHA-256 of the key', () => {
    const plain = staticKeyId(STATIC_KEY);
    expect(plain).to.match(/^static_[0-9a-f]{16}$/);
    expect(staticKeyId(STATIC_KEY), 'another process, another instance').to.equal(plain);
    expect(staticKeyId(`${STATIC_KEY}x`)).not.to.equal(plain);
    const secret = staticKeyId(STATIC_KEY, ID_SECRET);
    expect(secret).to.match(/^static_[0-9a-f]{16}$/);
    expect(secret).to.equal(staticKeyId(STATIC_KEY, ID_SECRET));
    expect(secret, 'a secret gives ids not computable from the key alone').not.to.equal(plain);
    expect(staticKeyId(STATIC_KEY, randomBytes(32).toString('hex'))).not.to.equal(secret);
    for (const digest of [plain, secret].map((id) => id.slice('static_'.length))) {
      // Neither the key's hash nor the salted hash ids used to be.
      expect(hashApiKey(STATIC_KEY)).not.to.contain(digest);
      expect(hashApiKey(`gateway static key id:${STATIC_KEY}`)).not.to.contain(digest);
    }
  });

  it('serves a static key without ever asking the key store, while the store cannot be read', async () => {
    let asked = 0;
    const broken: KeyStore = {
      ...unreachableStore(),
      findByHash: async () => {
        asked += 1;
        throw new Error('Redis is unavailable');
      },
    };
    const app = await startGuardedApp({
      model: [createAuthenticator({ store: broken, staticKeys: [STATIC_KEY], trustMs: 0 })],
    });
    try {
      for (let index = 0; index < 3; index += 1) {
        expect((await send(app.url, '/v1/chat/completions', { key: STATIC_KEY })).body.caller).to.deep.equal({
          id: staticKeyId(STATIC_KEY),
          name: 'static key 1',
        });
      }
      expect(asked).to.equal(0);
      // A key that is not static is looked up in the store, which fails: 503.
      expect(
        await send(app.url, '/v1/chat/completions', { key: 'sk-not-a-static-key-0000-0123456789abcdef' }),
      ).to.deep.include({ status: 503 });
      expect(asked).to.equal(1);
    } finally {
      await app.close();
    }
  });
});

function unreachableStore(): KeyStore {
  const fail = async (): Promise<never> => {
    throw new Error('connect ECONNREFUSED 127.0.0.1:1');
  };
  return {
    create: fail,
    list: fail,
    revoke: fail,
    update: fail,
    findByHash: fail as () => Promise<ApiKeyRecord | undefined>,
    close: async () => {},
  };
}
