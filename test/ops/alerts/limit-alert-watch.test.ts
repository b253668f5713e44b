import { expect } from 'chai';
import { pino } from 'pino';
import { EVENTS, type LimitAlert } from '../../../src/core/diagnostics.ts';
import type { Meter } from '../../../src/core/limits.ts';
import { watchLimitAlerts } from '../../../src/ops/alerts/limit-alert-watch.ts';
import type { AlertLog } from '../../../src/stores/alerts/alert-log.ts';
import { EmbeddedAlertLog } from '../../../src/stores/alerts/embedded-alert-log.ts';
import { RedisAlertLog } from '../../../src/stores/alerts/redis-alert-log.ts';
import { createRedisClient, waitUntilReady } from '../../../src/stores/redis/redis-client.ts';
import { TestRedisServer } from '../../helpers/redis-server.ts';

const silent = pino({ level: 'silent' });
const DAY_END = Date.now() + 3_600_000;

const meter = (overrides: Partial<Meter> = {}): Meter => ({
  scope: 'key',
  owner: 'key_ab',
  kind: 'quota',
  period: 'day',
  limit: 1000,
  counter: 'key:key_ab:quota:d:x',
  resetAt: DAY_END,
  ...overrides,
});

/** A ledger whose counters the test sets. */
function counters() {
  const values = new Map<string, number>();
  return { values, peek: async (names: readonly string[]) => names.map((name) => values.get(name) ?? 0) };
}

function watched(log: Pick<AlertLog, 'claim'>, ledger: ReturnType<typeof counters>, thresholds = [50, 80, 100]) {
  const source = {};
  const alerts: LimitAlert[] = [];
  const uses: number[] = [];
  const stop = EVENTS.limitAlert.subscribe(source, (alert) => void alerts.push(alert));
  const onUse = (_meter: Meter, used: number) => void uses.push(used);
  const watch = watchLimitAlerts({ source, ledger, log, thresholds, logger: silent, onUse });
  const settle = (meters: readonly Meter[]) =>
    EVENTS.settled.publish({
      exchange: { source, caller: { id: 'key_ab', team: { id: 't1', name: 'eng' } } } as never,
      figures: undefined,
      meters,
    });
  return { alerts, uses, watch, settle, close: () => (watch.close(), stop()) };
}

describe('limit alert watch', () => {
  it('fires each threshold a budget or quota reaches once per window, lowest first, after the settlement', async () => {
    const ledger = counters();
    const { alerts, uses, watch, settle, close } = watched(new EmbeddedAlertLog(), ledger);
    try {
      ledger.values.set('key:key_ab:quota:d:x', 499);
      settle([meter()]);
      await watch.idle();
      expect(alerts).to.deep.equal([]);
      ledger.values.set('key:key_ab:quota:d:x', 500);
      settle([meter()]);
      await watch.idle();
      expect(alerts.map((alert) => alert.threshold)).to.deep.equal([50]);
      ledger.values.set('key:key_ab:quota:d:x', 1000);
      settle([meter()]);
      settle([meter()]);
      await watch.idle();
      expect(alerts.map((alert) => alert.threshold)).to.deep.equal([50, 80, 100]);
      expect(alerts[2]).to.include({
        scope: 'key',
        owner: 'key_ab',
        team: 'eng',
        kind: 'quota',
        period: 'day',
        used: 1000,
        limit: 1000,
        unit: 'tokens',
      });
      // Two settlements in one turn are peeked together.
      expect(uses).to.deep.equal([499, 500, 1000]);
      // The next window is another counter: its thresholds fire again.
      ledger.values.set('key:key_ab:quota:d:y', 600);
      settle([meter({ counter: 'key:key_ab:quota:d:y' })]);
      await watch.idle();
      expect(alerts.map((alert) => alert.threshold)).to.deep.equal([50, 80, 100, 50]);
    } finally {
      close();
    }
  });

  it("uses an owner's own thresholds over the gateway's, none for [], USD for budgets, and leaves minutes and end users alone", async () => {
    const ledger = counters();
    const { alerts, watch, settle, close } = watched(new EmbeddedAlertLog(), ledger);
    try {
      const budget = meter({
        kind: 'budget',
        period: 'month',
        counter: 'team:t1:budget:mo:x',
        scope: 'team',
        owner: 'eng',
        limit: 2e9,
        alerts: [30],
      });
      const silenced = meter({ counter: 'key:key_ab:quota:mo:x', period: 'month', alerts: [] });
      const tpm = meter({ kind: 'tpm', period: 'minute', counter: 'key:key_ab:tpm:m:1' });
      const endUser = meter({ scope: 'end_user' as Meter['scope'], counter: 'end_user:key:x:quota:d:x' });
      for (const each of [budget, silenced, tpm, endUser]) ledger.values.set(each.counter, each.limit);
      settle([budget, silenced, tpm, endUser]);
      await watch.idle();
      expect(alerts).to.have.length(1);
      expect(alerts[0]).to.include({
        scope: 'team',
        owner: 'eng',
        team: 'eng',
        threshold: 30,
        used: 2,
        limit: 2,
        unit: 'usd',
        period: 'month',
      });
    } finally {
      close();
    }
  });

  it('tries a claim again at the next settlement when the store could not answer', async () => {
    const ledger = counters();
    const inner = new EmbeddedAlertLog();
    let down = true;
    const log = {
      claim: (claim: string, until: number) =>
        down ? Promise.reject(new Error('Redis is unavailable')) : inner.claim(claim, until),
    };
    const { alerts, watch, settle, close } = watched(log, ledger);
    try {
      ledger.values.set('key:key_ab:quota:d:x', 600);
      settle([meter()]);
      await watch.idle();
      expect(alerts).to.deep.equal([]);
      down = false;
      settle([meter()]);
      await watch.idle();
      expect(alerts.map((alert) => alert.threshold)).to.deep.equal([50]);
    } finally {
      close();
    }
  });

  it('fires a threshold once across gateways claiming it in one Redis at the same time', async function () {
    this.timeout(30_000);
    const redis = await TestRedisServer.start();
    const connections = [1, 2, 3].map(() => createRedisClient(redis.url, silent));
    const gateways: ReturnType<typeof watched>[] = [];
    try {
      for (const connection of connections) expect(await waitUntilReady(connection, 3000)).to.equal(true);
      const ledger = counters();
      ledger.values.set('key:key_ab:quota:d:x', 850);
      for (const connection of connections) gateways.push(watched(new RedisAlertLog(connection, silent), ledger));
      for (const gateway of gateways) gateway.settle([meter()]);
      await Promise.all(gateways.map((gateway) => gateway.watch.idle()));
      const fired = gateways.flatMap((gateway) => gateway.alerts.map((alert) => alert.threshold));
      expect(fired.sort((a, b) => a - b)).to.deep.equal([50, 80]);
      // Kept until a day after the window ends.
      const expiresAt = await connections[0]!.call('PEXPIRETIME', 'gw-alert-claim:key:key_ab:quota:d:x@80');
      expect(expiresAt).to.equal(DAY_END + 86_400_000);
    } finally {
      for (const gateway of gateways) gateway.close();
      for (const connection of connections) connection.disconnect();
      await redis.close();
    }
  });
});
