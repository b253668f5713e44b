import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { adminRouter } from '../../src/control-plane/admin/admin-routes.ts';
import { guardrailActionsView, parseActionsLimit } from '../../src/control-plane/guardrail-actions-route.ts';
import { EmbeddedGuardrailActionLog } from '../../src/stores/guardrail-actions/embedded-guardrail-action-log.ts';
import type {
  GuardrailActionEntry,
  GuardrailActionLog,
} from '../../src/stores/guardrail-actions/guardrail-action-log.ts';
import { FileKeyStore } from '../../src/stores/keys/file-key-store.ts';
import { FileTeamStore } from '../../src/stores/teams/file-team-store.ts';
import { captureLogs, send, startGuardedApp, type GuardedApp } from '../data-plane/pipeline/guarded-app.ts';
import { guardrailAction } from '../helpers/guardrail-fixtures.ts';

const TOKEN = 'admin-token-for-tests-0001-0123456789abcdef';
const admin = { authorization: `Bearer ${TOKEN}` };
const LIMIT_ERROR = "Field 'query.limit': must be a whole number from 1 to 1000";

/** The action at second `n`, by a key of team research. */
const action = (n: number, changes: Partial<GuardrailActionEntry> = {}): GuardrailActionEntry =>
  guardrailAction(n, { team: 'research', ...changes });

describe('GET /guardrails/actions', () => {
  describe('its limit', () => {
    it('is 100 when absent, else a whole number from 1 to 1000', () => {
      expect(parseActionsLimit({})).to.equal(100);
      expect(parseActionsLimit({ limit: '1' })).to.equal(1);
      expect(parseActionsLimit({ limit: '1000' })).to.equal(1000);
      expect(parseActionsLimit({ limit: '0025' })).to.equal(25);
    });

    for (const limit of ['0', '1001', '-1', '1.5', 'ten', '', ' 5', '1e2', '99999999999']) {
      it(`refuses limit=${JSON.stringify(limit)} with a 400 naming the field`, () => {
        let thrown: any;
        try {
          parseActionsLimit({ limit });
        } catch (error) {
          thrown = error;
        }
        expect(thrown).to.deep.include({ status: 400, code: 'GW_ERR_VALIDATION' });
        expect(thrown.errors).to.deep.equal([LIMIT_ERROR]);
      });
    }

    it('refuses a limit given twice and a parameter of another route', () => {
      for (const [query, message] of [
        [{ limit: ['1', '2'] }, "Field 'query.limit': must be given once"],
        [{ guardrail: 'no-codes' }, "Field 'query.guardrail': is not a parameter of this route"],
      ] as const) {
        let thrown: any;
        try {
          parseActionsLimit(query);
        } catch (error) {
          thrown = error;
        }
        expect(thrown?.errors).to.deep.equal([message]);
      }
    });
  });

  describe('its view', () => {
    it('counts every action kept by guardrail, phase and action (sorted by those, the newest time each), and lists the newest `limit`', () => {
      const kept = [
        action(9, { guardrail: 'pii', phase: 'request', action: 'redact' }),
        action(8),
        action(7, {
          guardrail: 'moderation',
          phase: 'request',
          action: 'fail_open',
          cause: 'unavailable',
          key_id: null,
          team: null,
          request_id: null,
        }),
        action(6, { guardrail: 'pii', phase: 'request', action: 'redact' }),
        action(5, { guardrail: 'no-codes', phase: 'request' }),
        action(4),
      ];
      const view = guardrailActionsView(kept, 2);
      expect(view).to.deep.equal({
        object: 'list',
        by_guardrail: [
          { guardrail: 'moderation', phase: 'request', action: 'fail_open', count: 1, last_at: kept[2]!.at },
          { guardrail: 'no-codes', phase: 'request', action: 'block', count: 1, last_at: kept[4]!.at },
          { guardrail: 'no-codes', phase: 'response', action: 'block', count: 2, last_at: kept[1]!.at },
          { guardrail: 'pii', phase: 'request', action: 'redact', count: 2, last_at: kept[0]!.at },
        ],
        data: [kept[0], kept[1]],
      });
      expect(guardrailActionsView([], 100)).to.deep.equal({ object: 'list', by_guardrail: [], data: [] });
    });
  });

  describe('on the admin API', () => {
    let dataDir: string;
    let app: GuardedApp;
    let log: EmbeddedGuardrailActionLog;
    let failing: boolean;
    const logs = captureLogs();

    beforeEach(async () => {
      dataDir = await mkdtemp(join(tmpdir(), 'gateway-guardrail-actions-'));
      log = new EmbeddedGuardrailActionLog();
      failing = false;
      const reader: Pick<GuardrailActionLog, 'recent'> = {
        recent: (limit) =>
          failing ? Promise.reject(new Error('connect ECONNREFUSED redis://:secret@10.0.0.9')) : log.recent(limit),
      };
      app = await startGuardedApp({
        routers: {
          '/admin': adminRouter({
            token: TOKEN,
            keys: new FileKeyStore(dataDir),
            teams: new FileTeamStore(dataDir),
            guardrailActions: reader,
          }),
        },
        logger: logs.logger,
      });
    });
    afterEach(async () => {
      await app.close();
      await rm(dataDir, { recursive: true, force: true });
    });

    it('wants the admin token', async () => {
      expect(await send(app.url, '/admin/guardrails/actions', { method: 'GET' })).to.deep.include({ status: 401 });
    });

    it('answers the newest actions, 100 by default, every one kept counted', async () => {
      for (let second = 0; second < 150; second += 1)
        log.record(action(second, second % 3 === 0 ? { guardrail: 'pii', phase: 'request', action: 'redact' } : {}));
      const all = await send(app.url, '/admin/guardrails/actions', { method: 'GET', ...admin });
      expect(all.status).to.equal(200);
      expect(all.body.object).to.equal('list');
      expect(all.body.data).to.have.length(100);
      expect(all.body.data[0]).to.deep.equal(action(149));
      expect(all.body.by_guardrail).to.deep.equal([
        { guardrail: 'no-codes', phase: 'response', action: 'block', count: 100, last_at: action(149).at },
        { guardrail: 'pii', phase: 'request', action: 'redact', count: 50, last_at: action(147).at },
      ]);
      const three = await send(app.url, '/admin/guardrails/actions?limit=3', { method: 'GET', ...admin });
      expect(three.body.data.map((entry: GuardrailActionEntry) => entry.request_id)).to.deep.equal([
        'req-149',
        'req-148',
        'req-147',
      ]);
      expect(three.body.by_guardrail).to.deep.equal(all.body.by_guardrail);
    });

    it('answers a bad limit with a 400 ValidationError', async () => {
      const answer = await send(app.url, '/admin/guardrails/actions?limit=1001', { method: 'GET', ...admin });
      expect(answer).to.deep.include({ status: 400 });
      expect(answer.body.errors).to.deep.equal([LIMIT_ERROR]);
      expect(answer.body.detail).to.be.a('string');
    });

    it('answers 503 when the log cannot be read, without the store error', async () => {
      failing = true;
      const answer = await send(app.url, '/admin/guardrails/actions', { method: 'GET', ...admin });
      expect(answer.status).to.equal(503);
      expect(answer.body.detail).to.equal(
        'Guardrail actions cannot be read right now (their store is unavailable); please retry shortly',
      );
      expect(JSON.stringify(answer.body)).not.to.contain('secret');
    });
  });
});
