import { expect } from 'chai';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { request } from 'undici';
import { GUARDRAIL_ACTIONS_KEY } from '../../src/stores/guardrail-actions/redis-guardrail-action-log.ts';
import { eventually } from '../helpers/eventually.ts';
import { TestRedisServer } from '../helpers/redis-server.ts';
import { startTestGateway, type TestGateway } from '../helpers/test-gateway.ts';

const ADMIN_TOKEN = 'guardrail-actions-admin-token-0001-0123456789abcdef';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
const CODE = 'PROJECT-4711';
const EMAIL = 'ada@example.com';
const GUARDRAILS = `guardrails:
  - { name: no-codes, use: regex, on: request, action: block, patterns: ['PROJECT-[0-9]{4}'] }
  - { name: no-emails, use: pii, on: request, action: redact, entities: [email] }
`;

interface Reply {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly text: string;
}

for (const store of ['embedded', 'Redis'] as const) {
  describe(`guardrail actions end to end (${store})`, function () {
    this.timeout(60_000);
    let redis: TestRedisServer | undefined;
    let test: TestGateway;
    let dir: string;

    before(async () => {
      if (store === 'Redis') redis = await TestRedisServer.start();
      dir = await mkdtemp(join(tmpdir(), 'gateway-guardrail-actions-'));
      const configFile = join(dir, 'gateway.yaml');
      await writeFile(configFile, `logLevel: silent\n${GUARDRAILS}`);
      test = await startTestGateway({
        configFile,
        env: { GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN, ...(redis ? { REDIS_URL: redis.url } : {}) },
      });
    });
    after(async () => {
      await test?.close();
      await redis?.close();
      await rm(dir, { recursive: true, force: true });
    });

    async function call(method: string, path: string, headers: Record<string, string>, body?: unknown): Promise<Reply> {
      const response = await request(`${test.url}${path}`, {
        method: method as 'GET',
        headers: { 'content-type': 'application/json', ...headers },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: response.statusCode, headers: response.headers, text: await response.body.text() };
    }

    it('shows a blocked request and a redacted one in GET /admin/guardrails/actions (and the account API), who and where but never the text', async () => {
      expect((await call('POST', '/admin/teams', admin, { name: 'research' })).status).to.equal(201);
      const created = await call('POST', '/admin/keys', admin, { name: 'researcher', team: 'research' });
      expect(created.status, created.text).to.equal(201);
      const { key, id } = JSON.parse(created.text) as { key: string; id: string };
      const caller = { authorization: `Bearer ${key}` };

      const blocked = await call('POST', '/v1/chat/completions', caller, {
        model: 'zeta/zeta-k3',
        messages: [{ role: 'user', content: `My code is ${CODE}, mail ${EMAIL}` }],
      });
      expect(blocked.status, blocked.text).to.equal(400);
      expect(blocked.text).to.contain("Guardrail 'no-codes' blocked the request");
      const redacted = await call('POST', '/v1/chat/completions', caller, {
        model: 'zeta/zeta-k3',
        messages: [{ role: 'user', content: `Mail ${EMAIL}` }],
      });
      expect(redacted.status, redacted.text).to.equal(200);

      const read = () => call('GET', '/admin/guardrails/actions', admin);
      // Recording never waits for the store: with Redis, the write lands a moment after the answer.
      await eventually(
        async () => (JSON.parse((await read()).text) as { data: unknown[] }).data.length === 2,
        'both actions kept',
      );
      const answer = await read();
      expect(answer.status).to.equal(200);
      const body = JSON.parse(answer.text) as {
        object: string;
        by_guardrail: Record<string, unknown>[];
        data: Record<string, unknown>[];
      };
      expect(body.object).to.equal('list');
      const where = { route: 'chat-completions', model: 'zeta/zeta-k3', key_id: id, team: 'research' };
      expect(body.data[0]).to.deep.include({
        guardrail: 'no-emails',
        phase: 'request',
        action: 'redact',
        cause: 'finding',
        ...where,
        request_id: redacted.headers['x-request-id'],
      });
      expect(body.data[1]).to.deep.include({
        guardrail: 'no-codes',
        phase: 'request',
        action: 'block',
        cause: 'finding',
        ...where,
        request_id: blocked.headers['x-request-id'],
      });
      for (const entry of body.data) {
        expect(Object.keys(entry).sort()).to.deep.equal([
          'action',
          'at',
          'cause',
          'guardrail',
          'key_id',
          'model',
          'phase',
          'request_id',
          'route',
          'team',
        ]);
        expect(Date.parse(entry.at as string)).to.be.closeTo(Date.now(), 60_000);
      }
      expect(body.by_guardrail).to.deep.equal([
        { guardrail: 'no-codes', phase: 'request', action: 'block', count: 1, last_at: body.data[1]!.at },
        { guardrail: 'no-emails', phase: 'request', action: 'redact', count: 1, last_at: body.data[0]!.at },
      ]);
      for (const text of [CODE, 'PROJECT', EMAIL, 'ada@']) expect(answer.text).not.to.contain(text);

      expect(JSON.parse((await call('GET', '/admin/guardrails/actions?limit=1', admin)).text).data).to.deep.equal([
        body.data[0],
      ]);
      const refused = await call('GET', '/admin/guardrails/actions?limit=0', admin);
      expect(refused.status).to.equal(400);
      expect(JSON.parse(refused.text).errors).to.deep.equal([
        "Field 'query.limit': must be a whole number from 1 to 1000",
      ]);
      expect((await call('GET', '/admin/guardrails/actions', {})).status).to.equal(401);

      // The account page's API answers the same behind its session.
      expect((await call('GET', '/account/api/guardrails/actions', {})).status).to.equal(401);
      const signIn = await call('POST', '/account/api/session', {}, { token: ADMIN_TOKEN });
      expect(signIn.status, signIn.text).to.equal(201);
      const cookie = String(signIn.headers['set-cookie']).split(';')[0]!;
      const account = await call('GET', '/account/api/guardrails/actions', { cookie });
      expect(account.status, account.text).to.equal(200);
      expect(JSON.parse(account.text)).to.deep.equal(body);

      if (redis) {
        const raw = new Redis(redis.url);
        try {
          const stored = await raw.lrange(GUARDRAIL_ACTIONS_KEY, 0, -1);
          expect(stored).to.have.length(2);
          for (const text of [CODE, EMAIL]) expect(stored.join('')).not.to.contain(text);
        } finally {
          raw.disconnect();
        }
      }
    });
  });
}
