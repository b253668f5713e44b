import { expect } from 'chai';
import { pino } from 'pino';
import { Writable } from 'node:stream';
import { BudgetGate } from '../../../src/data-plane/pipeline/reserve.ts';
import { isGatewayError } from '../../../src/core/gateway-errors.ts';
import { MemoryLedger } from '../../../src/stores/limits/embedded-ledger.ts';

const pricing = { input: 1, cachedInput: 0.1, output: 4 };
const NOW = Date.UTC(2026, 10, 25, 18, 0, 15);

function gate() {
  const lines: Record<string, unknown>[] = [];
  const logger = pino(
    { level: 'info' },
    new Writable({ write: (chunk, _encoding, done) => (lines.push(JSON.parse(String(chunk))), done()) }),
  );
  const ledger = new MemoryLedger(() => NOW);
  return { gate: new BudgetGate({ ledger, logger, now: () => NOW }), ledger, lines };
}

function refusal(run: () => unknown) {
  try {
    run();
  } catch (error) {
    if (!isGatewayError(error)) throw error;
    return { status: error.status, code: error.code, detail: error.detail, headers: error.headers, limit: error.limit };
  }
  throw new Error('not refused');
}

describe('budget gate (admission of token and money limits)', () => {
  it('lets a caller without token or money limits through without estimating or reserving', () => {
    const { gate: budgets } = gate();
    const never = () => {
      throw new Error('estimated without a limit');
    };
    expect(budgets.admit({ id: 'k', rpm: 3 }, never, pricing)).to.equal(undefined);
    expect(budgets.admit(undefined, never, pricing)).to.equal(undefined);
  });

  it('refuses a request whose whole reservation does not fit what remains (never capping it), with a Retry-After to its window end', async () => {
    const { gate: budgets } = gate();
    const caller = { id: 'k', tpm: 250 };
    const first = budgets.admit(caller, () => ({ inputTokens: 20, outputTokens: 100 }), pricing) as {
      reservation: { reserved: readonly number[] };
      tokens: { remaining: number };
    };
    expect(first.reservation.reserved).to.deep.equal([120]);
    expect(first.tokens.remaining).to.equal(130);
    expect(refusal(() => budgets.admit(caller, () => ({ inputTokens: 20, outputTokens: 200 }), pricing))).to.deep.equal(
      {
        status: 429,
        code: 'GW_ERR_TOKEN_RATE_LIMITED',
        detail: 'Token rate limit exceeded: 250 tokens per 1 minute; 130 left this minute, this request reserves 220',
        headers: { 'Retry-After': '45' },
        limit: { kind: 'tpm', scope: 'key' },
      },
    );
    const second = budgets.admit(caller, () => ({ inputTokens: 30, outputTokens: 100 }), pricing) as {
      reservation: { reserved: readonly number[] };
    };
    expect(second.reservation.reserved, 'exactly what was left').to.deep.equal([130]);
    expect(refusal(() => budgets.admit(caller, () => ({ inputTokens: 1, outputTokens: 1 }), pricing))).to.deep.include({
      detail: 'Token rate limit exceeded: 250 tokens per 1 minute; 0 left this minute, this request reserves 2',
    });
    expect(
      refusal(() => budgets.admit({ id: 'other', tpm: 250 }, () => ({ inputTokens: 20, outputTokens: 4096 }), pricing)),
    ).to.deep.include({
      detail:
        'Token rate limit exceeded: 250 tokens per 1 minute; 250 left this minute, this request reserves 4116; that is more than the whole limit: lower the output cap (max_tokens)',
    });
  });

  it('refuses a request the gateway cannot bound (a stored context, a background run) from a key with limits, unless the operator allows it', () => {
    const { gate: budgets } = gate();
    const limited = { id: 'k', tpm: 10_000 };
    for (const field of ['previous_response_id', 'conversation', 'background']) {
      expect(
        refusal(() => budgets.admit(limited, () => ({ inputTokens: 20, outputTokens: 10 }), pricing, field)),
      ).to.deep.include({ status: 400, code: 'GW_ERR_VALIDATION' });
    }
    expect(
      budgets.admit({ id: 'free' }, () => ({ inputTokens: 20, outputTokens: 10 }), pricing, 'previous_response_id'),
      'no limit: nothing to bound',
    ).to.equal(undefined);
    const allowing = new BudgetGate({
      ledger: new MemoryLedger(() => NOW),
      logger: pino({ level: 'silent' }),
      now: () => NOW,
      allowUnbounded: true,
    });
    expect(
      allowing.admit(limited, () => ({ inputTokens: 20, outputTokens: 10 }), pricing, 'previous_response_id'),
    ).to.have.property('reservation');
  });

  it('names the team and the day of a team budget, waiting until UTC midnight', () => {
    const { gate: budgets, ledger } = gate();
    const caller = { id: 'k', team: { id: 'eng', name: 'eng', budget: { daily_usd: 0.001 } } };
    ledger.reserve([
      {
        counter: 'team:eng:budget:d:2026-11-25',
        limit: 1_000_000,
        want: 999_990,
        need: 0,
        resetAt: Date.UTC(2026, 10, 26),
      },
    ]);
    expect(refusal(() => budgets.admit(caller, () => ({ inputTokens: 20, outputTokens: 0 }), pricing))).to.deep.equal({
      status: 429,
      code: 'GW_ERR_BUDGET_EXCEEDED',
      detail:
        "Budget exceeded: $0.00099999 of $0.001 used today (UTC) (team 'eng'), this request reserves up to $0.00002",
      headers: { 'Retry-After': String((Date.UTC(2026, 10, 26) - NOW) / 1000) },
      limit: { kind: 'budget', scope: 'team' },
    });
  });

  it("reserves on all of a request's limits or on none", async () => {
    const { gate: budgets, ledger } = gate();
    const caller = { id: 'k', quota: { daily: 1000 }, team: { id: 'eng', name: 'eng', tpm: 50 } };
    expect(() => budgets.admit(caller, () => ({ inputTokens: 60, outputTokens: 10 }), pricing)).to.throw(
      /Token rate limit exceeded/,
    );
    expect(await ledger.peek(['key:k:quota:d:2026-11-25'])).to.deep.equal([0]);
  });
});
