import { expect } from 'chai';
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { EmbeddedGuardrailActionLog } from '../../../src/stores/guardrail-actions/embedded-guardrail-action-log.ts';
import {
  GUARDRAIL_ACTIONS_KEPT,
  type GuardrailActionEntry,
} from '../../../src/stores/guardrail-actions/guardrail-action-log.ts';
import {
  GUARDRAIL_ACTIONS_KEY,
  RedisGuardrailActionLog,
} from '../../../src/stores/guardrail-actions/redis-guardrail-action-log.ts';
import { createRedisClient, waitUntilReady, type RedisConnection } from '../../../src/stores/redis/redis-client.ts';
import { eventually, sleep } from '../../helpers/eventually.ts';
import { freePort, TestRedisServer } from '../../helpers/redis-server.ts';
import { guardrailAction } from '../../helpers/guardrail-fixtures.ts';

const action = guardrailAction;

/** A logger whose lines are kept, parsed. */
function capturingLogger() {
  const lines: { level: number; msg: string; reason?: string }[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(
        ...chunk
          .toString()
          .split('\n')
          .filter(Boolean)
          .map((line) => JSON.parse(line)),
      );
      done();
    },
  });
  return { logger: pino({ level: 'info' }, sink), lines };
}

describe('guardrail action logs', () => {
  describe('embedded', () => {
    it('gives back the newest first, as many as asked', async () => {
      const log = new EmbeddedGuardrailActionLog();
      expect(await log.recent(10)).to.deep.equal([]);
      for (const n of [1, 2, 3]) log.record(action(n));
      expect((await log.recent(10)).map((entry) => entry.request_id)).to.deep.equal(['req-3', 'req-2', 'req-1']);
      expect(await log.recent(2)).to.deep.equal([action(3), action(2)]);
      expect(await log.recent(0)).to.deep.equal([]);
    });

    it(`keeps the newest ${GUARDRAIL_ACTIONS_KEPT} only`, async () => {
      const log = new EmbeddedGuardrailActionLog();
      for (let n = 1; n <= GUARDRAIL_ACTIONS_KEPT + 7; n += 1) log.record(action(n));
      const kept = await log.recent(5000);
      expect(kept).to.have.length(GUARDRAIL_ACTIONS_KEPT);
      expect(kept[0]!.request_id).to.equal(`req-${GUARDRAIL_ACTIONS_KEPT + 7}`);
      expect(kept.at(-1)!.request_id).to.equal('req-8');
    });

    it('keeps only the fields of an entry, whatever else it is handed', async () => {
      const log = new EmbeddedGuardrailActionLog();
      log.record({ ...action(1), text: 'PROJECT-1234', detail: 'http://hook.internal/x' } as GuardrailActionEntry);
      expect(Object.keys((await log.recent(1))[0]!).sort()).to.deep.equal([
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
    });
  });

  describe('Redis', function () {
    this.timeout(30_000);
    let server: TestRedisServer;
    let raw: Redis;
    const clients: RedisConnection[] = [];
    const connect = async (): Promise<RedisConnection> => {
      const client = createRedisClient(server.url);
      expect(await waitUntilReady(client, 5000)).to.equal(true);
      clients.push(client);
      return client;
    };

    before(async () => {
      server = await TestRedisServer.start();
    });
    after(async () => server.close());
    beforeEach(async () => {
      raw = new Redis(server.url);
      // This test's own reader: its errors while the server is stopped are expected.
      raw.on('error', () => {});
      await raw.flushall();
    });
    afterEach(() => {
      clients.splice(0).forEach((client) => client.disconnect());
      raw.disconnect();
    });

    it('shares one list between instances, newest first, in one key', async () => {
      const [one, two] = [
        new RedisGuardrailActionLog(await connect(), { logger: pino({ level: 'silent' }) }),
        new RedisGuardrailActionLog(await connect(), { logger: pino({ level: 'silent' }) }),
      ];
      one.record(action(1, { team: 'research' }));
      await eventually(async () => (await raw.llen(GUARDRAIL_ACTIONS_KEY)) === 1, 'the first action stored');
      two.record(action(2));
      await eventually(async () => (await raw.llen(GUARDRAIL_ACTIONS_KEY)) === 2, 'the second action stored');
      expect(await one.recent(10)).to.deep.equal([action(2), action(1, { team: 'research' })]);
      expect(await two.recent(1)).to.deep.equal([action(2)]);
      expect(await raw.keys('*')).to.deep.equal(['gw-guardrail-actions']);
    });

    it(`keeps the newest ${GUARDRAIL_ACTIONS_KEPT} only (LPUSH and LTRIM in one MULTI)`, async () => {
      const log = new RedisGuardrailActionLog(await connect(), { logger: pino({ level: 'silent' }) });
      const total = GUARDRAIL_ACTIONS_KEPT + 5;
      for (let n = 1; n <= total; n += 1) {
        log.record(action(n));
        if (n % 200 === 0) await sleep(5);
      }
      await eventually(
        async () => JSON.parse((await raw.lindex(GUARDRAIL_ACTIONS_KEY, 0)) ?? '{}').request_id === `req-${total}`,
        'the last action stored',
      );
      expect(await raw.llen(GUARDRAIL_ACTIONS_KEY)).to.equal(GUARDRAIL_ACTIONS_KEPT);
      const kept = await log.recent(5000);
      expect(kept).to.have.length(GUARDRAIL_ACTIONS_KEPT);
      expect(kept[0]).to.deep.equal(action(total));
      expect(kept.at(-1)).to.deep.equal(action(6));
      expect((await log.recent(3)).map((entry) => entry.request_id)).to.deep.equal([
        `req-${total}`,
        `req-${total - 1}`,
        `req-${total - 2}`,
      ]);
    });

    it('skips an entry it cannot read back', async () => {
      const log = new RedisGuardrailActionLog(await connect(), { logger: pino({ level: 'silent' }) });
      await raw.lpush(GUARDRAIL_ACTIONS_KEY, JSON.stringify(action(1)), 'not json', '7', JSON.stringify(action(2)));
      expect(await log.recent(10)).to.deep.equal([action(2), action(1)]);
    });

    it('never throws nor rejects with Redis unreachable, warns once, and its reads reject', async () => {
      const rejections: unknown[] = [];
      const onRejection = (reason: unknown) => rejections.push(reason);
      process.on('unhandledRejection', onRejection);
      const { logger, lines } = capturingLogger();
      const client = createRedisClient(`redis://127.0.0.1:${await freePort()}`);
      clients.push(client);
      try {
        const log = new RedisGuardrailActionLog(client, { logger });
        // Nothing to await: each call returns at once, whatever Redis does.
        for (let n = 1; n <= 50; n += 1) expect(log.record(action(n))).to.equal(undefined);
        await sleep(300);
        expect(lines.filter((line) => line.msg.startsWith('guardrail actions:'))).to.have.length(1);
        let failure: unknown;
        await log.recent(10).catch((error: unknown) => (failure = error));
        expect(failure).to.be.instanceOf(Error);
        expect(rejections).to.deep.equal([]);
      } finally {
        process.off('unhandledRejection', onRejection);
      }
    });

    it('warns once per outage: drops quietly while Redis is away, stores again once it is back', async () => {
      const rejections: unknown[] = [];
      const onRejection = (reason: unknown) => rejections.push(reason);
      process.on('unhandledRejection', onRejection);
      const { logger, lines } = capturingLogger();
      const log = new RedisGuardrailActionLog(await connect(), { logger });
      const warnings = () =>
        lines.filter((line) => line.msg.startsWith('guardrail actions: Redis did not take them')).length;
      const recoveries = () => lines.filter((line) => line.msg === 'guardrail actions: Redis takes them again').length;
      try {
        log.record(action(1));
        await eventually(async () => (await log.recent(10)).length === 1, 'the first action stored');
        for (let outage = 1; outage <= 2; outage += 1) {
          await server.stop();
          for (let n = 0; n < 20; n += 1) {
            log.record(action(100 + n));
            await sleep(5);
          }
          // Actions keep coming while Redis is away (the first may wait in the client's queue until it notices the
          // socket closed).
          await eventually(() => {
            log.record(action(200));
            return warnings() === outage;
          }, `the warning of outage ${outage}`);
          await server.restart();
          // Over once a write's answer reaches the log (one can reach Redis and still fail on the way back).
          const after = action(outage + 1);
          await eventually(async () => {
            log.record(after);
            const head = await raw.lindex(GUARDRAIL_ACTIONS_KEY, 0).catch(() => null);
            return (
              head !== null && (JSON.parse(head) as GuardrailActionEntry).at === after.at && recoveries() === outage
            );
          }, `an action stored after outage ${outage}`);
          expect(warnings()).to.equal(outage);
        }
        expect(rejections).to.deep.equal([]);
      } finally {
        process.off('unhandledRejection', onRejection);
      }
    });
  });
});
