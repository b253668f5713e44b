import { expect } from 'chai';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { request } from 'undici';
import { CHAT_COMPLETIONS_CORPUS } from '../../conformance/request-corpus/chat-completions.ts';
import { COUNT_TOKENS_CORPUS, MESSAGES_CORPUS } from '../../conformance/request-corpus/messages.ts';
import { RESPONSES_CORPUS } from '../../conformance/request-corpus/responses.ts';
import { startTestGateway, TEST_KEY, type TestGateway } from '../../helpers/test-gateway.ts';
import { MANAGEMENT_ROUTES, SESSION_ROUTES } from '../../../src/control-plane/access/permissions.ts';
import { routesOf } from '../../../src/control-plane/access/route-list.ts';
import { startAccessFixture } from '../access/access-fixture.ts';
import { eventually } from '../../helpers/eventually.ts';

type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';
const ADMIN_TOKEN = 'openapi-admin-token-0001-0123456789abcdef';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

/** JSON pointer escaping of one path segment. */
const segment = (text: string) => text.replace(/~/g, '~0').replace(/\//g, '~1');

describe('OpenAPI document', function () {
  this.timeout(60_000);
  let test: TestGateway;
  let document: Record<string, any>;
  let ajv: InstanceType<typeof Ajv2020>;
  const checked = new Set<string>();

  before(async () => {
    test = await startTestGateway({ env: { GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN } });
    const response = await request(`${test.url}/openapi.json`);
    expect(response.statusCode).to.equal(200);
    expect(response.headers['content-type']).to.contain('application/json');
    document = (await response.body.json()) as Record<string, any>;
    ajv = new Ajv2020({ strict: false, allErrors: true });
    // `date` and `date-time` are checked, not only named.
    addFormats.default(ajv, ['date', 'date-time']);
    ajv.addSchema(document, 'openapi');
  });
  after(async () => test.close());

  /** Sends a request and checks its answer against the document's schema for that path, method and status. */
  async function conforms(
    method: Method,
    path: string,
    body?: unknown,
    headers: Record<string, string> = { authorization: `Bearer ${TEST_KEY}` },
    expected?: number,
    template?: string,
  ) {
    const response = await request(`${test.url}${path}`, {
      method,
      headers: { 'content-type': 'application/json', ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.body.text();
    if (expected !== undefined) expect(response.statusCode, text).to.equal(expected);
    const route = template ?? path.split('?')[0]!;
    const operation = document.paths[route]?.[method.toLowerCase()];
    expect(operation, `${method} ${route} is described`).to.be.an('object');
    const status = String(response.statusCode);
    expect(operation.responses, `${method} ${route} ${status} is described`).to.have.property(status);
    const type = String(response.headers['content-type']).split(';')[0]!;
    const content = operation.responses[status].content;
    expect(content, `${method} ${route} ${status} ${type}`).to.have.property(type);
    expect(response.headers['x-request-id']).to.be.a('string');
    const pointer = `openapi#/paths/${segment(route)}/${method.toLowerCase()}/responses/${status}/content/${segment(type)}/schema`;
    // A JSON answer is checked as JSON; any other (CSV, Prometheus text) as the string it is.
    const answer = type === 'application/json' ? JSON.parse(text) : text;
    const validate = ajv.compile({ $ref: pointer });
    expect(validate(answer), `${method} ${route} ${status}: ${ajv.errorsText(validate.errors)}\n${text}`).to.equal(
      true,
    );
    // The request schema agrees with the gateway on which bodies are valid.
    if (body !== undefined && (status === '200' || status === '201' || status === '400')) {
      const validate = ajv.compile({
        $ref: `openapi#/paths/${segment(route)}/${method.toLowerCase()}/requestBody/content/application~1json/schema`,
      });
      expect(validate(body), `${route} request ${JSON.stringify(body)}`).to.equal(status !== '400');
    }
    checked.add(`${method} ${route} ${status}`);
    return response.statusCode;
  }

  it('is OpenAPI 3.1 with info.version 1.0.0, and every request schema compiles', () => {
    expect(document.openapi).to.equal('3.1.0');
    expect(document.info.version).to.equal('1.0.0');
    for (const name of Object.keys(document.components.schemas))
      ajv.compile({ $ref: `openapi#/components/schemas/${name}` });
  });

  it("accepts every body of the request conformance corpus (valid, per the providers' SDKs) in its route's request schema", () => {
    const corpora = {
      '/v1/chat/completions': CHAT_COMPLETIONS_CORPUS,
      '/v1/responses': RESPONSES_CORPUS,
      '/v1/messages': MESSAGES_CORPUS,
      '/v1/messages/count_tokens': COUNT_TOKENS_CORPUS,
    };
    for (const [route, corpus] of Object.entries(corpora)) {
      const validate = ajv.compile({
        $ref: `openapi#/paths/${segment(route)}/post/requestBody/content/application~1json/schema`,
      });
      for (const entry of corpus)
        expect(validate(JSON.parse(entry.body)), `${route} ${entry.name}: ${ajv.errorsText(validate.errors)}`).to.equal(
          true,
        );
    }
  });

  it('describes the real answers of the Chat Completions, Responses, Messages and count_tokens routes', async () => {
    await conforms(
      'POST',
      '/v1/chat/completions',
      { model: 'zeta/zeta-k3', messages: [{ role: 'user', content: 'hi' }] },
      undefined,
      200,
    );
    await conforms('POST', '/v1/chat/completions', { model: 'zeta/zeta-k3', messages: [] }, undefined, 400);
    await conforms('POST', '/v1/chat/completions', { model: 'zeta/zeta-k3', messages: [{ role: 'user' }] }, {}, 401);
    await conforms('POST', '/v1/responses', { model: 'alpha-latest', input: 'hi' }, undefined, 200);
    await conforms('POST', '/v1/responses', { model: 'alpha-latest' }, undefined, 400);
    await conforms(
      'POST',
      '/v1/messages',
      { model: 'beta-latest', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] },
      undefined,
      200,
    );
    await conforms(
      'POST',
      '/v1/messages',
      { model: 'beta-latest', messages: [{ role: 'user', content: 'hi' }] },
      undefined,
      400,
    );
    await conforms(
      'POST',
      '/v1/messages',
      { model: 'beta-latest', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] },
      { 'x-api-key': 'sk-unknown-key-000000' },
      401,
    );
    await conforms(
      'POST',
      '/v1/messages/count_tokens',
      { model: 'beta-latest', messages: [{ role: 'user', content: 'hi' }] },
      undefined,
      200,
    );
    await conforms('POST', '/v1/messages/count_tokens', { model: 'beta-latest' }, undefined, 400);
  });

  it('describes the real answers of the native chat, catalog, usage, health, readiness, metrics and itself', async () => {
    await conforms('POST', '/v1/chat', { model: 'zeta/zeta-k3', input: 'hi' }, undefined, 200);
    await conforms('POST', '/v1/chat', { model: 'zeta/zeta-k3', input: '' }, undefined, 400);
    await conforms('POST', '/v1/chat', { model: 'zeta/zeta-k3', input: 'hi' }, {}, 401);
    await conforms('GET', '/v1/models', undefined, {}, 200);
    await conforms('GET', '/v1/usage', undefined, undefined, 200);
    await conforms('GET', '/v1/usage?group_by=nonsense', undefined, undefined, 400);
    await conforms('GET', '/v1/usage', undefined, {}, 401);
    await conforms('GET', '/healthz', undefined, {}, 200);
    await conforms('GET', '/readyz', undefined, {}, 200);
    await conforms('GET', '/metrics', undefined, {}, 200);
    await conforms('GET', '/openapi.json', undefined, {}, 200);
  });

  it('describes the real answers of the admin limits route, use included', async () => {
    const created = await request(`${test.url}/admin/keys`, {
      method: 'POST',
      headers: { ...admin, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'metered', tpm: 5000, budget: { daily_usd: 2 } }),
    });
    const { key } = (await created.body.json()) as { key: string };
    // A key with a tpm reserves the request's whole estimate: an output cap keeps it within 5000.
    const chat = await request(`${test.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}` },
      body: JSON.stringify({ model: 'zeta/zeta-k3', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(chat.statusCode).to.equal(200);
    await chat.body.text();
    await test.gateway.flushUsage();
    await conforms('GET', '/admin/limits', undefined, admin, 200);
    const body = (await (await request(`${test.url}/admin/limits`, { headers: admin })).body.json()) as {
      keys: { name: string; use: { kind: string; used: number }[] }[];
    };
    const metered = body.keys.find((entry) => entry.name === 'metered')!;
    expect(metered.use.map((entry) => entry.kind)).to.deep.equal(['rpm', 'tpm', 'budget']);
    expect(metered.use.every((entry) => entry.used > 0)).to.equal(true);
    // The one request, as the rate limiter counted it.
    expect(metered.use[0]).to.deep.include({ kind: 'rpm', unit: 'requests', used: 1 });
    await conforms('GET', '/admin/limits', undefined, {}, 401);
  });

  it('describes the real answers of the admin key routes, PATCH included', async () => {
    const one = '/admin/keys/{id}';
    await conforms('POST', '/admin/teams', { name: 'keyed' }, admin, 201);
    const status = await conforms(
      'POST',
      '/admin/keys',
      { name: 'documented', rpm: 5, quota: { daily: 100 }, team: 'keyed', expires_at: '2031-01-01T00:00:00Z' },
      admin,
      201,
    );
    expect(status).to.equal(201);
    await conforms('POST', '/admin/keys', { name: 'documented', rpm: 0, owner: 'x' }, admin, 400);
    await conforms(
      'POST',
      '/admin/keys',
      { name: 'per end user', end_user: { rpm: 5, budget: { daily_usd: 0.25 } } },
      admin,
      201,
    );
    await conforms('POST', '/admin/keys', { name: 'per end user', end_user: { rmp: 5 } }, admin, 400);
    await conforms('POST', '/admin/keys', { name: 'documented' }, {}, 401);
    await conforms('GET', '/admin/keys', undefined, admin, 200);
    await conforms('GET', '/admin/keys', undefined, {}, 401);
    const listed = (await (await request(`${test.url}/admin/keys`, { headers: admin })).body.json()) as {
      data: { id: string; name: string }[];
    };
    const id = listed.data.find((key) => key.name === 'documented')!.id;
    await conforms(
      'PATCH',
      `/admin/keys/${id}`,
      {
        rpm: null,
        tpm: 100,
        quota: { monthly: 9 },
        budget: { daily_usd: 1.5 },
        team: null,
        cache: false,
        models: ['zeta/zeta-k3'],
      },
      admin,
      200,
      one,
    );
    await conforms(
      'PATCH',
      `/admin/keys/${id}`,
      { name: 'renamed', expires_at: null, cache: null, models: null },
      admin,
      200,
      one,
    );
    await conforms('PATCH', `/admin/keys/${id}`, {}, admin, 400, one);
    await conforms('PATCH', `/admin/keys/${id}`, { name: null }, admin, 400, one);
    await conforms('PATCH', `/admin/keys/${id}`, { rpm: 0, budget: { monthly_usd: -1 }, owner: 'x' }, admin, 400, one);
    await conforms('PATCH', '/admin/keys/key_nobody', { rpm: 1 }, admin, 404, one);
    await conforms('PATCH', `/admin/keys/${id}`, { rpm: 1 }, {}, 401, one);
    await conforms('POST', `/admin/keys/${id}/revoke`, undefined, admin, 200, '/admin/keys/{id}/revoke');
    await conforms('POST', '/admin/keys/key_nobody/revoke', undefined, admin, 404, '/admin/keys/{id}/revoke');
    await conforms('POST', `/admin/keys/${id}/revoke`, undefined, {}, 401, '/admin/keys/{id}/revoke');
    await conforms('PATCH', `/admin/keys/${id}`, { rpm: 1 }, admin, 409, one);
    await conforms('DELETE', `/admin/keys/${id}`, undefined, admin, 200, one);
    await conforms('DELETE', '/admin/keys/key_nobody', undefined, admin, 404, one);
    await conforms('DELETE', `/admin/keys/${id}`, undefined, {}, 401, one);
  });

  it('describes the real answers of the admin cache route', async () => {
    await conforms('DELETE', '/admin/cache', undefined, admin, 200);
    await conforms('POST', '/admin/teams', { name: 'cached', cache: false }, admin, 201);
    const key = await request(`${test.url}/admin/keys`, {
      method: 'POST',
      headers: { ...admin, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'cached member', team: 'cached', cache: true }),
    });
    const { id, cache } = (await key.body.json()) as { id: string; cache: boolean };
    expect(cache).to.equal(true);
    await conforms('DELETE', `/admin/cache?key_id=${id}`, undefined, admin, 200);
    await conforms('DELETE', '/admin/cache?team=cached', undefined, admin, 200);
    await conforms('DELETE', '/admin/cache?team=nobody', undefined, admin, 404);
    await conforms('DELETE', '/admin/cache?key_id=key_nobody', undefined, admin, 404);
    await conforms('DELETE', `/admin/cache?key_id=${id}&team=cached`, undefined, admin, 400);
    await conforms('DELETE', '/admin/cache', undefined, {}, 401);
  });

  it('describes the real answers of the admin guardrail actions route', async () => {
    // A guardrail for this test only: its block is the action listed.
    const configFile = join(test.dataDir, 'no-config.yaml');
    await writeFile(
      configFile,
      "logLevel: silent\nguardrails:\n  - { name: no-codes, use: regex, on: request, action: block, patterns: ['PROJECT-[0-9]{4}'] }\n",
    );
    try {
      expect(test.gateway.reloadConfig('test').applied).to.equal(true);
      const blocked = await request(`${test.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'zeta/zeta-k3', messages: [{ role: 'user', content: 'PROJECT-1234' }] }),
      });
      expect(blocked.statusCode, await blocked.body.text()).to.equal(400);
    } finally {
      await writeFile(configFile, 'logLevel: silent\n');
      expect(test.gateway.reloadConfig('test').applied).to.equal(true);
    }
    await conforms('GET', '/admin/guardrails/actions', undefined, admin, 200);
    const body = (await (
      await request(`${test.url}/admin/guardrails/actions?limit=1`, { headers: admin })
    ).body.json()) as { data: { guardrail: string }[] };
    expect(body.data.map((entry) => entry.guardrail)).to.deep.equal(['no-codes']);
    await conforms('GET', '/admin/guardrails/actions?limit=0', undefined, admin, 400);
    await conforms('GET', '/admin/guardrails/actions', undefined, {}, 401);
  });

  it('describes the real answers of the limit alert routes and alerts on keys', async () => {
    const body = { name: 'alerted', quota: { daily: 1000 }, alerts: [1, 90] };
    await conforms('POST', '/admin/keys', { ...body, alerts: [90, 90] }, admin, 400);
    await conforms('POST', '/admin/keys', { ...body, alerts: [0] }, admin, 400);
    const created = await request(`${test.url}/admin/keys`, {
      method: 'POST',
      headers: { ...admin, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const { key, alerts } = (await created.body.json()) as { key: string; alerts: number[] };
    expect(alerts).to.deep.equal([1, 90]);
    const chat = { model: 'zeta/zeta-k3', messages: [{ role: 'user', content: 'Count to three' }], max_tokens: 20 };
    const answered = await request(`${test.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(chat),
    });
    expect(answered.statusCode).to.equal(200);
    await answered.body.dump();
    await test.gateway.flushUsage();
    await test.gateway.flushAlerts();
    await conforms('GET', '/admin/alerts', undefined, admin, 200);
    const firings = (await (await request(`${test.url}/admin/alerts`, { headers: admin })).body.json()) as {
      data: { threshold: number }[];
    };
    expect(firings.data.map((firing) => firing.threshold)).to.deep.equal([1]);
    await conforms('GET', '/admin/alerts?owner=x', undefined, admin, 400);
    await conforms('GET', '/admin/alerts/deliveries?limit=5', undefined, admin, 200, '/admin/alerts/deliveries');
    await conforms('GET', '/admin/alerts/deliveries?limit=0', undefined, admin, 400, '/admin/alerts/deliveries');
    await conforms('GET', '/admin/alerts', undefined, {}, 401);
  });

  it('describes the real answers of the admin usage and guardrail list routes', async () => {
    for (const grouping of ['model', 'day', 'key', 'team', 'end_user'])
      await conforms('GET', `/admin/usage?group_by=${grouping}`, undefined, admin, 200);
    await conforms('GET', '/admin/usage?group_by=week', undefined, admin, 400);
    await conforms('GET', '/admin/usage', undefined, {}, 401);
    await conforms('GET', '/v1/usage?group_by=team', undefined, undefined, 400);
    const configFile = join(test.dataDir, 'no-config.yaml');
    await writeFile(
      configFile,
      "logLevel: silent\nguardrails:\n  - { name: no-codes, use: regex, on: request, action: block, patterns: ['PROJECT-[0-9]{4}'] }\n  - { name: no-emails, use: pii, on: both, action: redact, entities: [email] }\n",
    );
    try {
      expect(test.gateway.reloadConfig('test').applied).to.equal(true);
      await conforms('GET', '/admin/guardrails', undefined, admin, 200);
      const body = (await (await request(`${test.url}/admin/guardrails`, { headers: admin })).body.json()) as {
        data: unknown[];
      };
      expect(body.data).to.deep.equal([
        { name: 'no-codes', use: 'regex', on: 'request', action: 'block' },
        { name: 'no-emails', use: 'pii', on: 'both', action: 'redact' },
      ]);
    } finally {
      await writeFile(configFile, 'logLevel: silent\n');
      expect(test.gateway.reloadConfig('test').applied).to.equal(true);
    }
    await conforms('GET', '/admin/guardrails', undefined, {}, 401);
  });

  /** Makes a service token with the admin token; its bearer header. */
  async function serviceToken(grant: { role: string; teams?: string[] }): Promise<{ authorization: string }> {
    const made = await request(`${test.url}/admin/tokens`, {
      method: 'POST',
      headers: { ...admin, 'content-type': 'application/json' },
      body: JSON.stringify({ name: `as ${grant.role}`, ...grant }),
    });
    expect(made.statusCode).to.equal(201);
    return { authorization: `Bearer ${((await made.body.json()) as { token: string }).token}` };
  }

  it('describes the real answers of who am I, the models, health and the usage CSV', async () => {
    await conforms('GET', '/admin/whoami', undefined, admin, 200);
    await conforms('GET', '/admin/whoami', undefined, {}, 401);
    await conforms('POST', '/admin/teams', { name: 'watched' }, admin, 201);
    const viewer = await serviceToken({ role: 'viewer', teams: ['watched'] });
    await conforms('GET', '/admin/whoami', undefined, viewer, 200);
    const seen = (await (await request(`${test.url}/admin/whoami`, { headers: viewer })).body.json()) as {
      actor: { kind: string };
      permissions: Record<string, unknown>;
    };
    expect(seen.actor.kind).to.equal('service-token');
    expect(seen.permissions).to.deep.include({ 'keys.read': ['watched'], 'signed-in': 'all' });
    expect(seen.permissions).to.not.have.property('keys.write');
    await conforms('GET', '/admin/models', undefined, admin, 200);
    await conforms('GET', '/admin/models', undefined, {}, 401);
    await conforms('GET', '/admin/health', undefined, admin, 200);
    await conforms('GET', '/admin/health', undefined, {}, 401);
    for (const grouping of ['model', 'day', 'key', 'team'])
      await conforms('GET', `/admin/usage.csv?group_by=${grouping}`, undefined, admin, 200);
    await conforms('GET', '/admin/usage.csv?group_by=week', undefined, admin, 400);
    await conforms('GET', '/admin/usage.csv', undefined, {}, 401);
    // A viewer of one team reads the usage of that team's keys only.
    await conforms('GET', `/admin/usage.csv?key_id=${await keyIn('nobody-watches')}`, undefined, viewer, 403);
  });

  /** The id of a new key in a new team. */
  async function keyIn(team: string): Promise<string> {
    await conforms('POST', '/admin/teams', { name: team }, admin, 201);
    const created = await request(`${test.url}/admin/keys`, {
      method: 'POST',
      headers: { ...admin, 'content-type': 'application/json' },
      body: JSON.stringify({ name: `in ${team}`, team }),
    });
    return ((await created.body.json()) as { id: string }).id;
  }

  it('describes the real answers of the service token routes, refusals by role included', async () => {
    const one = '/admin/tokens/{id}';
    const inAMonth = new Date(Date.now() + 30 * 86_400_000).toISOString();
    await conforms('POST', '/admin/tokens', { name: 'ci', role: 'viewer', expires_at: inAMonth }, admin, 201);
    await conforms('POST', '/admin/tokens', { name: 'blue ci', role: 'team-admin', teams: ['tokened'] }, admin, 201);
    await conforms('POST', '/admin/tokens', { name: 'root', role: 'root' }, admin, 400);
    await conforms('POST', '/admin/tokens', { name: 'lead', role: 'team-admin' }, admin, 400);
    await conforms('POST', '/admin/tokens', { name: 'odd', role: 'admin', teams: ['tokened'] }, admin, 400);
    await conforms('POST', '/admin/tokens', { name: '', role: 'viewer', owner: 'x' }, admin, 400);
    await conforms('POST', '/admin/tokens', { name: 'ci', role: 'viewer' }, {}, 401);
    await conforms('GET', '/admin/tokens', undefined, admin, 200);
    await conforms('GET', '/admin/tokens', undefined, {}, 401);
    const listed = (await (await request(`${test.url}/admin/tokens`, { headers: admin })).body.json()) as {
      data: { id: string; name: string }[];
    };
    const ci = listed.data.find((token) => token.name === 'ci')!.id;

    const lead = await serviceToken({ role: 'team-admin', teams: ['tokened'] });
    const viewer = await serviceToken({ role: 'viewer' });
    // Neither may make an admin: the viewer holds no tokens.write (the gate), the team admin
    // not over every team (the route).
    await conforms('POST', '/admin/tokens', { name: 'root please', role: 'admin' }, viewer, 403);
    await conforms('POST', '/admin/tokens', { name: 'root please', role: 'admin' }, lead, 403);
    await conforms('POST', '/admin/tokens', { name: 'own', role: 'viewer', teams: ['tokened'] }, lead, 201);
    await conforms('GET', '/admin/tokens', undefined, lead, 200);
    // A viewer of every team is beyond a team admin's role, and the viewer may revoke nothing.
    await conforms('DELETE', `/admin/tokens/${ci}`, undefined, lead, 403, one);
    await conforms('DELETE', `/admin/tokens/${ci}`, undefined, viewer, 403, one);
    await conforms('PATCH', `/admin/keys/${await keyIn('tokened-keys')}`, { rpm: 5 }, viewer, 403, '/admin/keys/{id}');
    await conforms('DELETE', `/admin/tokens/${ci}`, undefined, admin, 200, one);
    await conforms('DELETE', '/admin/tokens/tok_0000000000000000', undefined, admin, 404, one);
    await conforms('DELETE', `/admin/tokens/${ci}`, undefined, {}, 401, one);
    const after = (await (await request(`${test.url}/admin/tokens`, { headers: admin })).body.json()) as {
      data: { id: string; status: string }[];
    };
    expect(after.data.find((token) => token.id === ci)!.status).to.equal('revoked');
  });

  it('describes the real answers of the audit log, filtered and paged', async () => {
    await (
      await request(`${test.url}/admin/tokens`, {
        method: 'POST',
        headers: { ...admin, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'audited', role: 'viewer' }),
      })
    ).body.text();
    await conforms('GET', '/admin/audit', undefined, admin, 200);
    await conforms(
      'GET',
      '/admin/audit?action=token.&outcome=ok&via=admin&limit=1',
      undefined,
      admin,
      200,
      '/admin/audit',
    );
    type Record = { seq: number; action: string; after: { name?: string } | null };
    type Page = { data: Record[]; next_before: number | null };
    let first: Page = { data: [], next_before: null };
    // The audit log keeps each change as its event arrives, just after the answer.
    await eventually(async () => {
      first = (await (
        await request(`${test.url}/admin/audit?action=token.&limit=1`, { headers: admin })
      ).body.json()) as Page;
      return first.data[0]?.after?.name === 'audited';
    }, 'the new token in the audit log');
    expect(first.data.map((record) => record.action)).to.deep.equal(['token.create']);
    expect(first.next_before).to.equal(first.data[0]!.seq);
    await conforms(
      'GET',
      `/admin/audit?action=token.&limit=1&before=${first.next_before}`,
      undefined,
      admin,
      200,
      '/admin/audit',
    );
    await conforms(
      'GET',
      `/admin/audit?from=2020-01-01&to=${new Date(Date.now() + 60_000).toISOString()}&team=tokened`,
      undefined,
      admin,
      200,
      '/admin/audit',
    );
    await conforms('GET', '/admin/audit?limit=0&from=yesterday&nonsense=1', undefined, admin, 400, '/admin/audit');
    await conforms('GET', '/admin/audit', undefined, {}, 401);
    const everything = await request(`${test.url}/admin/audit?limit=1000`, { headers: admin });
    expect(await everything.body.text())
      .to.not.include(ADMIN_TOKEN)
      .and.not.include('gwt_')
      .and.not.include('sk-');
  });

  it('describes every route the management router serves at /admin, and the account page serves no other at /account/api', async () => {
    const fixture = await startAccessFixture();
    try {
      const described = (method: string, path: string) =>
        document.paths[`/admin${path.replace(/:([A-Za-z]+)/g, '{$1}')}`]?.[method.toLowerCase()] !== undefined;
      const served = routesOf(fixture.admin);
      expect(served.length).to.be.greaterThan(20);
      const missing = [...served, ...MANAGEMENT_ROUTES]
        .filter((route) => !described(route.method, route.path))
        .map((route) => `${route.method} /admin${route.path}`);
      expect(missing, 'management routes the document does not describe').to.deep.equal([]);
      const own = new Set(SESSION_ROUTES.map((route) => `${route.method} ${route.path}`));
      const admins = new Set(served.map((route) => `${route.method} ${route.path}`));
      const account = routesOf(fixture.account)
        .filter((route) => route.path.startsWith('/api/'))
        .map((route) => `${route.method} ${route.path.slice('/api'.length)}`);
      expect(
        account.filter((route) => !own.has(route) && !admins.has(route)),
        'account API routes not served at /admin',
      ).to.deep.equal([]);
    } finally {
      await fixture.close();
    }
  });

  it('describes the real answers of the admin budget group routes, and a key or team naming a group', async () => {
    const one = '/admin/groups/{name}';
    const dept = { name: 'dept', tpm: 5000, budget: { daily_usd: 2.5 }, alerts: [50, 90] };
    await conforms('POST', '/admin/groups', dept, admin, 201);
    await conforms('POST', '/admin/groups', { name: 'dept' }, admin, 409);
    await conforms('POST', '/admin/groups', { name: 'dept', alerts: [150] }, admin, 400);
    await conforms('POST', '/admin/groups', { name: 'dept' }, {}, 401);
    await conforms('GET', '/admin/groups', undefined, admin, 200);
    await conforms('GET', '/admin/groups/dept', undefined, admin, 200, one);
    await conforms('GET', '/admin/groups/nobody', undefined, admin, 404, one);
    await conforms('PATCH', '/admin/groups/dept', { tpm: null, quota: { daily: 9 } }, admin, 200, one);
    await conforms('PATCH', '/admin/groups/dept', { budget: { daily_usd: 0 } }, admin, 400, one);
    await conforms('PATCH', '/admin/groups/nobody', { tpm: 1 }, admin, 404, one);
    await conforms('POST', '/admin/teams', { name: 'grouped', group: 'dept' }, admin, 201);
    await conforms('POST', '/admin/keys', { name: 'grouped key', group: 'dept' }, admin, 201);
    await conforms('DELETE', '/admin/groups/dept', undefined, admin, 409, one);
    await conforms('PATCH', '/admin/teams/grouped', { group: null }, admin, 200, '/admin/teams/{name}');
    const listed = await request(`${test.url}/admin/keys`, { headers: admin });
    const keys = (await listed.body.json()) as { data: { id: string; group: string | null }[] };
    for (const key of keys.data.filter((entry) => entry.group === 'dept')) {
      await conforms('PATCH', `/admin/keys/${key.id}`, { group: null }, admin, 200, '/admin/keys/{id}');
    }
    await conforms('DELETE', '/admin/groups/dept', undefined, admin, 200, one);
    await conforms('DELETE', '/admin/groups/dept', undefined, admin, 404, one);
  });

  it('describes the real answers of the admin team routes', async () => {
    const one = '/admin/teams/{name}';
    await conforms('POST', '/admin/teams', { name: 'docs', rpm: 5, budget: { daily_usd: 1.5 } }, admin, 201);
    await conforms('POST', '/admin/teams', { name: 'docs' }, admin, 409);
    await conforms('POST', '/admin/teams', { name: 'docs', rpm: 0 }, admin, 400);
    await conforms('POST', '/admin/teams', { name: 'docs' }, {}, 401);
    await conforms('GET', '/admin/teams', undefined, admin, 200);
    await conforms('GET', '/admin/teams', undefined, {}, 401);
    await conforms('GET', '/admin/teams/docs', undefined, admin, 200, one);
    await conforms('GET', '/admin/teams/nobody', undefined, admin, 404, one);
    await conforms('GET', '/admin/teams/docs', undefined, {}, 401, one);
    await conforms('PATCH', '/admin/teams/docs', { rpm: null, tpm: 100, quota: { monthly: 9 } }, admin, 200, one);
    await conforms('PATCH', '/admin/teams/docs', { budget: { monthly_usd: -1 } }, admin, 400, one);
    await conforms('PATCH', '/admin/teams/docs', { cache: false }, admin, 200, one);
    await conforms('PATCH', '/admin/teams/docs', { cache: null }, admin, 200, one);
    await conforms('PATCH', '/admin/teams/docs', { cache: 'off' }, admin, 400, one);
    await conforms('PATCH', '/admin/teams/nobody', { rpm: 1 }, admin, 404, one);
    await conforms('PATCH', '/admin/teams/docs', { rpm: 1 }, {}, 401, one);
    const key = await request(`${test.url}/admin/keys`, {
      method: 'POST',
      headers: { ...admin, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'member', team: 'docs' }),
    });
    const { id } = (await key.body.json()) as { id: string };
    await conforms('DELETE', '/admin/teams/docs', undefined, admin, 409, one);
    await (await request(`${test.url}/admin/keys/${id}`, { method: 'DELETE', headers: admin })).body.text();
    await conforms('DELETE', '/admin/teams/docs', undefined, admin, 200, one);
    await conforms('DELETE', '/admin/teams/docs', undefined, admin, 404, one);
    await conforms('DELETE', '/admin/teams/docs', undefined, {}, 401, one);
    for (let attempt = 0; attempt < 30; attempt += 1) {
      const answer = await request(`${test.url}/admin/teams`, { headers: { authorization: 'Bearer wrong' } });
      await answer.body.text();
      if (answer.statusCode === 429) break;
    }
    await conforms('GET', '/admin/teams', undefined, { authorization: 'Bearer wrong' }, 429);
  });

  it('describes a path only when the gateway serves it', async () => {
    for (const [path, operations] of Object.entries(document.paths as Record<string, Record<string, unknown>>)) {
      for (const method of Object.keys(operations)) {
        expect(
          [...checked].some((entry) => entry.startsWith(`${method.toUpperCase()} ${path} `)),
          `${method} ${path} was exercised`,
        ).to.equal(true);
      }
    }
  });
});
