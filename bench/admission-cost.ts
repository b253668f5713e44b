import { IncomingMessage, ServerResponse } from 'node:http';
import { writeRateLimitHeaders } from '../src/usage/limit-meters.ts';
import { Socket } from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';

import { BudgetGate, type Admitted } from '../src/data-plane/pipeline/reserve.ts';
import { EmbeddedLedger } from '../src/stores/limits/embedded-ledger.ts';
import { estimateRequest } from '../src/usage/reservation.ts';
import { promptCharacters } from '../src/usage/token-estimate.ts';

/**
 * The admission stage of token and money limits alone, in process: for a caller with a `tpm`, a daily
 * quota and both money budgets on the embedded ledger, the estimate, the reservation, the tokens
 * headers on a real node:http response, the hand-over and the settlement, against the same loop that
 * only makes the response. CPU µs per request, median of rounds: the figure end-to-end runs bury in
 * the machine's noise (±10 µs between rounds here).
 */
export async function admissionCost(
  rounds = 7,
  perRound = 200_000,
): Promise<{ withLimits: number; without: number; difference: number }> {
  const dir = await mkdtemp(join(tmpdir(), 'admission-cost-'));
  const ledger = await EmbeddedLedger.open(dir, pino({ level: 'silent' }));
  const gate = new BudgetGate({ ledger, logger: pino({ level: 'silent' }) });
  const caller = { id: 'key_bench', tpm: 1e12, quota: { daily: 1e12 }, budget: { daily_usd: 1e6, monthly_usd: 1e6 } };
  const plain = { id: 'key_plain' };
  const body = {
    model: 'delta/delta-4.7',
    messages: [{ role: 'user', content: 'Benchmark message of a realistic length for a chat turn.' }],
  };
  const pricing = { input: 1.25, cachedInput: 0.125, output: 10 };
  const figures = { totalTokens: 40, chargedTokens: 40, costUsd: 0.0002 };
  const req = new IncomingMessage(new Socket());
  const one = (who: typeof caller | typeof plain) => {
    const res = new ServerResponse(req);
    const admitted = gate.admit(who, () => estimateRequest(promptCharacters(body), 4096), pricing) as
      Admitted | undefined;
    if (!admitted) return;
    if (admitted.tokens) writeRateLimitHeaders(res, 'openai', 'tokens', admitted.tokens, Date.now());
    admitted.reservation.handOver();
    admitted.reservation.settle(figures);
  };
  const measure = (who: typeof caller | typeof plain) => {
    const start = process.cpuUsage();
    for (let index = 0; index < perRound; index += 1) one(who);
    const spent = process.cpuUsage(start);
    return (spent.user + spent.system) / perRound;
  };
  measure(caller);
  measure(plain);
  const withLimits: number[] = [];
  const without: number[] = [];
  for (let round = 0; round < rounds; round += 1) {
    withLimits.push(measure(caller));
    without.push(measure(plain));
  }
  await ledger.close();
  await rm(dir, { recursive: true, force: true });
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
  return { withLimits: median(withLimits), without: median(without), difference: median(withLimits) - median(without) };
}

if (import.meta.url === `file://${process.argv[1]}`) process.stdout.write(`${JSON.stringify(await admissionCost())}\n`);
