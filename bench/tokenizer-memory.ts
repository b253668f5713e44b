/**
 * What the tokenizer thread costs the process in memory: a fresh compiled process starts it and makes
 * `--counts` estimates of varied text (every 50th a 1 MB prompt), RSS sampled every 5 ms, then idles 3 s.
 * Prints RSS before, at its peak and after, for this tree and, with `--before <dir>`, another beside it.
 * Run: `node --import tsx bench/tokenizer-memory.ts [--before <dir>] [--counts 2000]`.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { compileTree } from './compile.ts';

const { values } = parseArgs({
  options: { before: { type: 'string' }, counts: { type: 'string', default: '2000' } },
});

/** What the probe reports: RSS in MB before, at the peak and 3 s after the counts, and the counts' time. */
interface Reading {
  readonly before: number;
  readonly peak: number;
  readonly after: number;
  readonly countMs: number;
}

/** The probe, run by plain node on a compiled tree's `tokenizer-thread.js`. */
const probe = (threadModule: string, counts: number) => `
const { TokenizerThread } = await import(${JSON.stringify(threadModule)});
const mb = () => process.memoryUsage().rss / 1048576;
let peak = 0;
const sampler = setInterval(() => { peak = Math.max(peak, mb()); }, 5);
const words = Array.from({ length: 50_000 }, (_, index) => (index * 2654435761 % 4294967296).toString(36));
const text = (index, length) => {
  const parts = [];
  for (let at = 0, total = 0; total < length; at += 1) { const word = words[(index * 7919 + at) % words.length]; parts.push(word); total += word.length + 1; }
  return parts.join(' ');
};
const before = mb();
const thread = new TokenizerThread();
const started = performance.now();
for (let index = 0; index < ${counts}; index += 1) await thread.count(text(index, index % 50 === 49 ? 1_000_000 : 2_000));
const countMs = performance.now() - started;
await new Promise((resolve) => setTimeout(resolve, 3000));
clearInterval(sampler);
console.log(JSON.stringify({ before, peak, after: mb(), countMs }));
await thread.close();
`;

async function measure(tree: string, out: string): Promise<Reading> {
  const compiled = await compileTree(tree, out);
  const threadModule = compiled.script('src/usage/tokenizer-thread.ts');
  // A file rather than `-e`: the thread inherits the process's node arguments.
  const probeFile = join(out, 'tokenizer-memory-probe.mjs');
  await writeFile(probeFile, probe(threadModule, Number(values.counts)));
  const stdout = await new Promise<string>((resolve, reject) =>
    execFile(process.execPath, [probeFile], { maxBuffer: 1 << 20 }, (error, output) =>
      error ? reject(error) : resolve(output),
    ),
  );
  return JSON.parse(stdout.trim().split('\n').at(-1)!) as Reading;
}

const work = await mkdtemp(join(tmpdir(), 'tokenizer-memory-'));
try {
  const trees: [string, string][] = [
    ['this tree', '.'],
    ...(values.before ? [['before', values.before] as [string, string]] : []),
  ];
  console.log(
    `| tree | RSS before (MB) | peak | 3 s after | ${values.counts} counts (ms) |\n|---|---:|---:|---:|---:|`,
  );
  for (const [name, tree] of trees) {
    const { before, peak, after, countMs } = await measure(tree, join(work, name.replace(' ', '-')));
    console.log(
      `| ${name} | ${before.toFixed(0)} | ${peak.toFixed(0)} | ${after.toFixed(0)} | ${countMs.toFixed(0)} |`,
    );
  }
} finally {
  await rm(work, { recursive: true, force: true });
}
