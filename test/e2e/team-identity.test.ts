import { expect } from 'chai';
import { request } from 'undici';
import { eventually } from '../helpers/eventually.ts';
import { TestRedisServer } from '../helpers/redis-server.ts';
import { ScriptedUpstream } from '../helpers/scripted-upstream.ts';
import { startTestGateway, type TestGateway } from '../helpers/test-gateway.ts';

const ADMIN = 'admin-token-0001-0123456789abcdef';
const adminHeaders = { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' };

interface Reply {
  readonly status: number;
  readonly body: any;
}

async function admin(test: TestGateway, method: string, path: string, body?: unknown): Promise<Reply> {
  const sent = body === undefined ? undefined : JSON.stringify(body);
  const options = { method: method as 'GET', headers: adminHeaders, body: sent };
  const response = await request(`${test.url}/admin${path}`, options);
  const text = await response.body.text();
  return { status: response.statusCode, body: text ? JSON.parse(text) : undefined };
}

const question = (text: string, stream = false) => ({
  model: 'alpha-latest',
  messages: [{ role: 'user', content: text }],
  stream,
});

interface Asked {
  readonly status: number;
  readonly cache: unknown;
  readonly text: string;
}

async function ask(test: TestGateway, key: string, body: unknown): Promise<Asked> {
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  const options = { method: 'POST' as const, headers, body: JSON.stringify(body) };
  const response = await request(`${test.url}/v1/chat/completions`, options);
  return { status: response.statusCode, cache: response.headers['x-gateway-cache'], text: await response.body.text() };
}

const USAGE = { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 };
const HEAD = { id: 'c1', created: 1, model: 'gen-5.5' };
const COMPLETION = JSON.stringify({
  ...HEAD,
  object: 'chat.completion',
  choices: [{ index: 0, message: { role: 'assistant', content: 'Hello' }, finish_reason: 'stop' }],
  usage: USAGE,
});
const event = (data: object) => `data: ${JSON.stringify({ ...HEAD, object: 'chat.completion.chunk', ...data })}\n\n`;
const chunk = (delta: unknown, finish: string | null) =>
  event({ choices: [{ index: 0, delta, finish_reason: finish }] });
const STREAM_END = `${chunk({}, 'stop')}${event({ choices: [], usage: USAGE })}data: [DONE]\n\n`;

/** Answers chat completions whole; a stream's first event at once and the rest once `hold` (when set) settles. */
function answerChats(upstream: ScriptedUpstream, hold: () => Promise<void> | undefined): void {
  upstream.script = async (_req, res, body) => {
    if (!(JSON.parse(body) as { stream?: boolean }).stream) {
      return void res.writeHead(200, { 'content-type': 'application/json' }).end(COMPLETION);
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(chunk({ role: 'assistant', content: 'Late' }, null));
    await hold();
    res.end(STREAM_END);
  };
}

async function newKey(test: TestGateway, name: string, team?: string): Promise<{ key: string; id: string }> {
  const created = await admin(test, 'POST', '/keys', { name, ...(team && { team }) });
  expect(created.status, JSON.stringify(created.body)).to.equal(201);
  return created.body;
}

/** The team's daily quota use as `GET /admin/limits` shows it, once every settlement is in. */
async function quotaUsed(test: TestGateway, team: string): Promise<number> {
  await test.gateway.flushUsage();
  type Uses = { teams: { name: string; use: { kind: string; used: number }[] }[] };
  const view = (await admin(test, 'GET', '/limits')).body as Uses;
  return view.teams.find((entry) => entry.name === team)!.use.find((use) => use.kind === 'quota')!.used;
}

/** Entries the cache holds for everyone, counted by emptying it. */
async function emptyAll(test: TestGateway): Promise<number> {
  const cleared = await admin(test, 'DELETE', '/cache');
  expect(cleared.status).to.equal(200);
  return cleared.body.deleted;
}

for (const store of ['embedded', 'redis'] as const) {
  describe(`team identity (${store} store)`, function () {
    this.timeout(60_000);
    let redis: TestRedisServer | undefined;
    let upstream: ScriptedUpstream;
    let hold: Promise<void> | undefined;
    let test: TestGateway;

    beforeEach(async () => {
      redis = store === 'redis' ? await TestRedisServer.start() : undefined;
      upstream = await ScriptedUpstream.start();
      hold = undefined;
      answerChats(upstream, () => hold);
      const env = { GATEWAY_ADMIN_TOKEN: ADMIN, GATEWAY_CACHE_TTL_S: '600', ALPHA_BASE_URL: upstream.url };
      test = await startTestGateway({ env: { ...env, ...(redis ? { REDIS_URL: redis.url } : {}) } });
    });
    afterEach(async () => {
      await test.close();
      await upstream.close();
      await redis?.close();
    });

    it("starts a team made again under a deleted team's name clean: no cached answer, use or usage", async () => {
      expect((await admin(test, 'POST', '/teams', { name: 'tA', quota: { daily: 10_000_000 } })).status).to.equal(201);
      const old = await newKey(test, 'old member', 'tA');
      const plan = question('What is our confidential Q3 plan?');
      expect((await ask(test, old.key, plan)).cache).to.equal('miss');
      await eventually(async () => (await ask(test, old.key, plan)).cache === 'hit', "the old team's answer, cached");
      await eventually(async () => (await quotaUsed(test, 'tA')) > 0, "the old team's use counted");
      expect((await admin(test, 'POST', `/keys/${old.id}/revoke`)).status).to.equal(200);
      expect((await admin(test, 'DELETE', '/teams/tA')).body).to.deep.equal({ name: 'tA', deleted: true });

      expect((await admin(test, 'POST', '/teams', { name: 'tA', quota: { daily: 10_000_000 } })).status).to.equal(201);
      const quotaBefore = await quotaUsed(test, 'tA');
      const fresh = await newKey(test, 'new member', 'tA');
      const answer = await ask(test, fresh.key, plan);
      expect(answer.status).to.equal(200);
      await test.gateway.flushUsage();
      type Row = { team: string | null; requests: number };
      const rows = (await admin(test, 'GET', '/usage?group_by=team')).body.data as Row[];
      const perTeam = rows.map((row) => [row.team, row.requests]);
      // One comparison, so that whatever the new team inherits shows at once.
      const upstreamCalls = upstream.requests.length;
      expect({ quota: quotaBefore, cache: answer.cache, upstreamCalls, perTeam }).to.deep.equal({
        quota: 0,
        cache: 'miss',
        upstreamCalls: 2,
        // The old key's two requests are not the new team's.
        perTeam: [
          ['tA', 1],
          [null, 2],
        ],
      });
    });

    it("empties a deleted team's and a revoked key's entries; ?team= still finds a deleted team's", async () => {
      expect((await admin(test, 'POST', '/teams', { name: 'tB' })).status).to.equal(201);
      const member = await newKey(test, 'member', 'tB');
      const loner = await newKey(test, 'loner');
      const other = await newKey(test, 'other');
      for (const [key, text] of [
        [member.key, 'team'],
        [loner.key, 'loner'],
        [other.key, 'other'],
      ] as const) {
        await ask(test, key, question(`Remember the ${text}.`));
        const cached = async () => (await ask(test, key, question(`Remember the ${text}.`))).cache === 'hit';
        await eventually(cached, `the ${text}'s answer, cached`);
      }

      // The key's own entries go with it; those of its team stay the team's.
      const revoked = await admin(test, 'POST', `/keys/${loner.id}/revoke`);
      expect(revoked.body).to.deep.equal({ id: loner.id, revoked: true });
      // A stream of the team's, running while its last key is revoked and the team deleted, is stored after.
      let release!: () => void;
      hold = new Promise((resolve) => (release = resolve));
      const asked = upstream.requests.length;
      const late = ask(test, member.key, question('A late answer', true));
      await eventually(() => upstream.requests.length > asked, 'the late stream under way');
      expect((await admin(test, 'POST', `/keys/${member.id}/revoke`)).status).to.equal(200);
      expect((await admin(test, 'DELETE', '/teams/tB')).body).to.deep.equal({ name: 'tB', deleted: true });
      release();
      const answered = await late;
      expect(answered.status).to.equal(200);
      expect(answered.text).to.contain('data: [DONE]');

      expect((await admin(test, 'DELETE', '/cache?team=nobody')).status).to.equal(404);
      await eventually(async () => {
        const cleared = await admin(test, 'DELETE', '/cache?team=tB');
        expect(cleared.status, JSON.stringify(cleared.body)).to.equal(200);
        expect(cleared.body.tenant).to.equal('team:tB');
        return cleared.body.deleted === 1;
      }, "the late answer emptied by the deleted team's name");
      expect(await emptyAll(test), "only the other key's entry was left").to.equal(1);
    });

    it('refuses DELETE /admin/cache with a body, emptying nothing; a clear says how many entries went', async () => {
      expect((await admin(test, 'POST', '/teams', { name: 'tC' })).status).to.equal(201);
      const member = await newKey(test, 'member', 'tC');
      const loner = await newKey(test, 'loner');
      for (const key of [member.key, loner.key]) {
        await ask(test, key, question('Keep this.'));
        const cached = async () => (await ask(test, key, question('Keep this.'))).cache === 'hit';
        await eventually(cached, 'the answer, cached');
      }
      for (const body of ['{"team":"tC"}', '{}', 'team=tC']) {
        const response = await request(`${test.url}/admin/cache`, { method: 'DELETE', headers: adminHeaders, body });
        expect(response.statusCode, body).to.equal(400);
        expect(response.headers['content-type']).to.match(/^application\/json/);
        expect(((await response.body.json()) as { detail: string }).detail).to.equal(
          'DELETE /admin/cache takes no body: give key_id=KEY_ID or team=NAME in the query string, ' +
            'or neither to empty every entry',
        );
      }
      expect((await admin(test, 'DELETE', '/cache?team=tC')).body).to.deep.equal({ deleted: 1, tenant: 'team:tC' });
      expect((await admin(test, 'DELETE', '/cache')).body).to.deep.equal({ deleted: 1, tenant: null });
    });
  });
}
