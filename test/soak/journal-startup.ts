// Bounded measurement (not part of `npm test`): start-up time and RSS of the embedded usage store
// with a 300k-record journal (RECORDS to change), before compaction (read whole, as before the
// snapshot existed), on the first start (read whole, then compacted) and after (snapshot + short
// journal). Fails if any run reports other totals than the records written.
import { execFile } from 'node:child_process';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { createWriteStream } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { buildUsageRecord } from '../../src/usage/usage-accounting.ts';

const run = promisify(execFile);
const RECORDS = Number(process.env.RECORDS ?? 300_000);

async function openOnce(dir: string, compactEvery?: number) {
  const { stdout } = await run(
    process.execPath,
    ['--import', 'tsx', 'test/soak/open-usage-store.ts', dir, ...(compactEvery ? [String(compactEvery)] : [])],
    { maxBuffer: 1 << 24 },
  );
  return JSON.parse(stdout.trim()) as {
    openMs: number;
    withCompactionMs: number;
    rssMb: number;
    requests: number;
    rows: unknown[];
  };
}

async function writeJournal(path: string): Promise<void> {
  const out = createWriteStream(path);
  for (let index = 0; index < RECORDS; index += 1) {
    const record = buildUsageRecord({
      keyId: `key_${index % 50}`,
      route: 'chat-completions',
      requestedModel: 'vendor/model',
      model: `vendor/model-${index % 6}`,
      upstream: 'vendor',
      status: 200,
      stream: index % 2 === 0,
      latencyMs: 120,
      usage: { inputTokens: 200 + (index % 97), outputTokens: 50 + (index % 31), cachedTokens: index % 7 },
      pricing: { input: 1, cachedInput: 0.1, output: 2 },
      time: new Date(Date.UTC(2026, 9, 1) + (index % 60) * 86_400_000),
    });
    if (!out.write(`${JSON.stringify(record)}\n`))
      await new Promise<void>((resolve) => out.once('drain', () => resolve()));
  }
  await new Promise<void>((resolve) => out.end(() => resolve()));
}

const dir = await mkdtemp(join(tmpdir(), 'journal-startup-'));
try {
  await writeJournal(join(dir, 'usage.jsonl'));
  const journalMb = (await stat(join(dir, 'usage.jsonl'))).size / 1048576;
  const whole = await openOnce(dir, Number.MAX_SAFE_INTEGER);
  const first = await openOnce(dir);
  const after = await openOnce(dir);
  const snapshotKb = (await stat(join(dir, 'usage.snapshot.json'))).size / 1024;
  const lost = [whole, first, after].map((result) => RECORDS - result.requests);
  const same =
    JSON.stringify(whole.rows) === JSON.stringify(first.rows) &&
    JSON.stringify(first.rows) === JSON.stringify(after.rows);
  console.log(`records ${RECORDS}, journal ${journalMb.toFixed(1)} MB, snapshot ${snapshotKb.toFixed(0)} KB`);
  console.log(`read whole (no snapshot):  open ${whole.openMs} ms, RSS ${whole.rssMb} MB`);
  console.log(
    `first start (compacts):    open ${first.openMs} ms, with compaction ${first.withCompactionMs} ms, RSS ${first.rssMb} MB`,
  );
  console.log(`after compaction:          open ${after.openMs} ms, RSS ${after.rssMb} MB`);
  console.log(`records lost: ${lost.join(' / ')}; totals identical across runs: ${same}`);
  if (lost.some((count) => count !== 0) || !same) process.exitCode = 1;
} finally {
  await rm(dir, { recursive: true, force: true });
}
