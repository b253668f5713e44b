/**
 * The credential matcher's cost on pathological input: 1 MiB and 2 MiB of nested percent escapes and
 * near misses, per case, median of 5 runs. Exits 1 when 2 MiB takes more than 3 times what 1 MiB does
 * (linear work doubles; quadratic would quadruple), for cases where 1 MiB takes over 5 ms. Then what each
 * stream pays to start its redactor with a provider's project key (every stream of an endpoint makes one).
 * Run: `node --import tsx bench/redaction-cost.ts`.
 */
import { redactCredential, StreamRedactor } from '../src/data-plane/upstream/redact-credential.ts';
import { pathologicalRedactionCases } from '../test/fixtures/pathological-redaction.ts';
import { BENCH_UPSTREAM_KEY } from './vendor-env.ts';

const MiB = 1024 * 1024;
const cases = pathologicalRedactionCases();

const fill = (unit: string, size: number) => Buffer.from(unit.repeat(Math.ceil(size / unit.length)).slice(0, size));
const median = (values: number[]) => values.sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
function timed(bytes: Buffer, key: string): number {
  const runs: number[] = [];
  for (let run = 0; run < 5; run += 1) {
    const started = performance.now();
    redactCredential(bytes, key);
    runs.push(performance.now() - started);
  }
  return median(runs);
}

let failed = false;
console.log('| unit | key | 1 MiB ms | 2 MiB ms | ratio |\n|---|---|---:|---:|---:|');
for (const [unit, key] of cases) {
  const once = timed(fill(unit, MiB), key);
  const twice = timed(fill(unit, 2 * MiB), key);
  const ratio = twice / once;
  if (once > 5 && ratio > 3) failed = true;
  console.log(
    `| \`${unit.slice(0, 24)}\` | \`${key.slice(0, 12)}…\` | ${once.toFixed(1)} | ${twice.toFixed(1)} | ${ratio.toFixed(2)}× |`,
  );
}

const starts: number[] = [];
for (let run = 0; run < 5; run += 1) {
  const started = performance.now();
  for (let stream = 0; stream < 10_000; stream += 1) new StreamRedactor(BENCH_UPSTREAM_KEY);
  starts.push(((performance.now() - started) * 1000) / 10_000);
}
console.log(
  `\nA stream's redactor for a ${BENCH_UPSTREAM_KEY.length}-character key: ${median(starts).toFixed(2)} µs to start`,
);
process.exit(failed ? 1 : 0);
