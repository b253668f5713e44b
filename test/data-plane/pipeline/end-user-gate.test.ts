import { expect } from 'chai';
import { pino } from 'pino';
import { BudgetGate, type Admitted } from '../../../src/data-plane/pipeline/reserve.ts';
import { isGatewayError } from '../../../src/core/gateway-errors.ts';
import type { CallerKey } from '../../../src/core/exchange.ts';
import { MemoryLedger } from '../../../src/stores/limits/embedded-ledger.ts';
import { endUserHolders, endUserMeters, OTHER_END_USERS } from '../../../src/usage/limit-meters.ts';

const pricing = { input: 1, cachedInput: 0.1, output: 4 };
const NOW = Date.UTC(2026, 10, 25, 18, 0, 15);
// 10 input and 90 output tokens at these prices (USD per million) cost 370,000 nano-USD.
const estimate = () => ({ inputTokens: 10, outputTokens: 90 });

function setup(endUsersPerKey?: number) {
  const ledger = new MemoryLedger(() => NOW);
  const gate = new BudgetGate({ ledger, logger: pino({ level: 'silent' }), now: () => NOW, endUsersPerKey });
  const admit = (caller: CallerKey, endUser?: string) =>
    gate.admit(caller, estimate, pricing, undefined, endUser) as Admitted | undefined;
  const refusal = (caller: CallerKey, endUser?: string) => {
    try {
      admit(caller, endUser);
    } catch (error) {
      if (!isGatewayError(error)) throw error;
      return { status: error.status, code: error.code, detail: error.detail, limit: error.limit };
    }
    throw new Error('not refused');
  };
  const used = (caller: CallerKey, owner: string, index = 0) =>
    ledger.valueOf(
      endUserMeters(endUserHolders(caller)[index]!, owner, NOW).find((meter) => meter.kind === 'budget')!.counter,
    );
  return { ledger, admit, refusal, used };
}

describe('budget gate: per-end-user limits', () => {
  // Two requests' reservations fit each end user's daily budget: 2 × 0.00037 = 0.00074 USD.
  const key: CallerKey = { id: 'key_1', end_user: { budget: { daily_usd: 0.0008 } } };

  it('holds each end user of a key to its own budget, refusing with the end user named, and others not', () => {
    const { admit, refusal, used } = setup();
    expect(admit(key, 'alice')).to.not.equal(undefined);
    expect(admit(key, 'alice')).to.not.equal(undefined);
    expect(refusal(key, 'alice')).to.deep.equal({
      status: 429,
      code: 'GW_ERR_BUDGET_EXCEEDED',
      detail:
        "Budget exceeded: $0.00074 of $0.0008 used today (UTC) (end user 'alice' of key key_1), this request reserves up to $0.00037",
      limit: { kind: 'budget', scope: 'end_user' },
    });
    expect(used(key, 'alice')).to.equal(740_000);
    expect(admit(key, 'bob'), 'another end user is not held by alice').to.not.equal(undefined);
    expect(admit(key), 'no end user named: the key counts as its own end user').to.not.equal(undefined);
    expect(used(key, 'key_1')).to.equal(370_000);
  });

  it("settles an end user's budget to what was charged, and keeps its requests per minute counted", () => {
    const { admit, refusal, ledger } = setup();
    const caller: CallerKey = { id: 'key_2', end_user: { rpm: 2, budget: { daily_usd: 1 } } };
    const first = admit(caller, 'alice')!;
    first.reservation.settle({ totalTokens: 0, chargedTokens: 0, costUsd: 0 });
    admit(caller, 'alice')!.reservation.settle(undefined);
    const meters = endUserMeters(endUserHolders(caller)[0]!, 'alice', NOW);
    expect(ledger.valueOf(meters[0]!.counter), 'rpm: both requests').to.equal(2);
    expect(ledger.valueOf(meters[1]!.counter), 'budget: released to nothing').to.equal(0);
    expect(refusal(caller, 'alice')).to.deep.include({
      code: 'GW_ERR_RATE_LIMITED',
      detail: "Rate limit exceeded: 2 per 1 minute (end user 'alice' of key key_2)",
      limit: { kind: 'rpm', scope: 'end_user' },
    });
  });

  it('reserves the key, its team and its end user all or none', () => {
    const { admit, refusal, ledger, used } = setup();
    const team = { id: 'team_1', name: 'research', budget: { daily_usd: 0.001 }, end_user: { quota: { daily: 1000 } } };
    const caller: CallerKey = { id: 'key_3', end_user: { budget: { daily_usd: 0.0004 } }, team };
    admit(caller, 'alice');
    expect(refusal(caller, 'alice').limit).to.deep.equal({ kind: 'budget', scope: 'end_user' });
    const teamBudget = `team:team_1:budget:d:2026-11-25`;
    expect(ledger.valueOf(teamBudget), 'the refused request reserved nothing on the team').to.equal(370_000);
    admit(caller, 'bob');
    expect(refusal(caller, 'carol').limit, 'the team budget is out').to.deep.equal({ kind: 'budget', scope: 'team' });
    expect(used(caller, 'carol'), 'nothing reserved on the end user either').to.equal(0);
  });

  it("holds an end user to a team's end-user limit across the team's keys, per team", () => {
    const { admit, refusal } = setup();
    const team = { id: 'team_2', name: 'support', end_user: { quota: { daily: 250 } } };
    const first: CallerKey = { id: 'key_4', team };
    const second: CallerKey = { id: 'key_5', team };
    admit(first, 'alice');
    admit(second, 'alice');
    expect(refusal(first, 'alice')).to.deep.include({
      detail:
        "Quota exceeded: 200 of 250 charged tokens used today (UTC) (end user 'alice' of team 'support'), this request reserves 100",
    });
    expect(
      admit({ id: 'key_6', team: { ...team, id: 'team_3', name: 'other' } }, 'alice'),
      'another team',
    ).to.not.equal(undefined);
  });

  it('puts the end users past the cap of a day in one shared bucket with the same limits', () => {
    const { admit, refusal } = setup(1);
    admit(key, 'alice');
    admit(key, 'bob');
    admit(key, 'carol');
    expect(refusal(key, 'dave').detail).to.contain(`(end user '${OTHER_END_USERS}' of key key_1)`);
    expect(admit(key, 'alice'), 'the first end user keeps its own counters').to.not.equal(undefined);
  });
});
