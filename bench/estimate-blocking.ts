/**
 * How long a usage estimate holds the event loop, on degenerate and ordinary text: the longest gap
 * between 1 ms timer ticks while the bounded count runs (wall time: on a busy machine it includes time
 * the process was not scheduled), the longest single tokenizer call in CPU time, the total time and the
 * result. With `--whole`, also the tokenizer on the whole text at once (the gateway's former behaviour).
 *
 *   node --import tsx bench/estimate-blocking.ts [--whole]
 */
import { countTokensBounded, loadTokenizer } from '../src/usage/token-estimate.ts';

const texts: [string, string][] = [
  ['100k of one character', 'a'.repeat(100_000)],
  ['200k of one character', 'a'.repeat(200_000)],
  ['1M of one character', 'a'.repeat(1_000_000)],
  ['1M of English', 'The quick brown fox jumps over the lazy dog. '.repeat(22_223).slice(0, 1_000_000)],
];

async function longestBlock(
  work: () => Promise<number>,
): Promise<{ result: number; totalMs: number; longestBlockMs: number }> {
  let last = performance.now();
  let longest = 0;
  const probe = setInterval(() => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
  }, 1);
  const started = performance.now();
  const result = await work();
  const totalMs = performance.now() - started;
  clearInterval(probe);
  longest = Math.max(longest, performance.now() - last);
  return { result, totalMs, longestBlockMs: longest };
}

const count = await loadTokenizer();
let longestCallCpuMs = 0;
const measured = (text: string) => {
  const before = process.cpuUsage();
  const tokens = count(text);
  const used = process.cpuUsage(before);
  longestCallCpuMs = Math.max(longestCallCpuMs, (used.user + used.system) / 1000);
  return tokens;
};
const whole = process.argv.includes('--whole')
  ? (await import('gpt-tokenizer/encoding/o200k_base')).countTokens
  : undefined;
for (const [name, text] of texts) {
  longestCallCpuMs = 0;
  const bounded = await longestBlock(() => countTokensBounded(measured, text));
  let line = `${name.padEnd(24)} bounded: ${bounded.result} tokens, ${bounded.totalMs.toFixed(0)} ms total, longest event-loop gap ${bounded.longestBlockMs.toFixed(1)} ms, longest tokenizer call ${longestCallCpuMs.toFixed(1)} ms CPU`;
  if (whole && text.length <= 200_000) {
    const started = performance.now();
    const exact = whole(text, { disallowedSpecial: new Set() });
    line += ` | whole: ${exact} tokens, one block of ${(performance.now() - started).toFixed(0)} ms`;
  }
  console.log(line);
}
