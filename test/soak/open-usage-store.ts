// Child of journal-startup.ts: opens the embedded usage store on a data directory and prints how long
// it took, the process's RSS, and the totals it holds (to compare runs), as one JSON line.
import { pino } from 'pino';
import { EmbeddedUsageStore } from '../../src/stores/usage/embedded-usage-store.ts';

const [dir, compactEvery] = process.argv.slice(2);
const started = performance.now();
const store = await EmbeddedUsageStore.open(dir!, pino({ level: 'silent' }), {
  compactEvery: compactEvery ? Number(compactEvery) : undefined,
});
const openMs = performance.now() - started;
const rows = await store.query({ groupBy: 'model' });
await store.close();
const closedMs = performance.now() - started;
process.stdout.write(
  `${JSON.stringify({ openMs: Math.round(openMs), withCompactionMs: Math.round(closedMs), rssMb: Math.round(process.memoryUsage().rss / 1048576), requests: rows.reduce((sum, row) => sum + row.requests, 0), rows })}\n`,
);
