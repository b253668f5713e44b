// Bounded soak (not part of `npm test`; SOAK_SECONDS, default 60): mixed JSON and streamed traffic
// on loopback through a gateway process (embedded store), with clients that leave mid-stream, RSS
// sampled from /proc; then SIGTERM while long streams are in flight with a short GATEWAY_DRAIN_MS.
// A fresh gateway on the same data directory must report one usage record per upstream call
// (records lost = 0), and the process must exit 0. Exits 1 otherwise.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { startMockUpstream } from '../../mock-upstream/mock-upstream-server.ts';
import { rssMb, slope, startSoakGateway } from './soak-helpers.ts';

const SECONDS = Number(process.env.SOAK_SECONDS ?? 60);
const CONCURRENCY = Number(process.env.SOAK_CONCURRENCY ?? 16);
const KEY = 'sk-soak-test-key-000001-0123456789abcdef';
const ADMIN = 'soak-admin-token-000001-0123456789abcdef';

const fast = await startMockUpstream({ recordRequests: true });
const slow = await startMockUpstream({ chunkDelayMs: 400, recordRequests: true });
const dataDir = await mkdtemp(join(tmpdir(), 'soak-traffic-'));
const env = {
  GATEWAY_DATA_DIR: dataDir,
  GATEWAY_API_KEYS: KEY,
  GATEWAY_ADMIN_TOKEN: ADMIN,
  RATE_LIMIT_MAX: '100000000',
  GATEWAY_DRAIN_MS: '2000',
  LOG_LEVEL: 'info',
  ALPHA_BASE_URL: fast.url,
  ZETA_BASE_URL: slow.url,
};
const gateway = await startSoakGateway(env);
const pid = gateway.child.pid!;
const statuses = new Map<string, number>();
const count = (name: string) => statuses.set(name, (statuses.get(name) ?? 0) + 1);
const samples: [number, number][] = [];
const started = Date.now();
let stop = false;

function body(stream: boolean, index: number) {
  return JSON.stringify({
    model: 'alpha/gen-5.5',
    stream,
    messages: [{ role: 'user', content: `soak request ${index}` }],
  });
}

async function client(worker: number): Promise<void> {
  for (let index = 0; !stop; index += 1) {
    const stream = index % 3 === 0;
    const leave = index % 20 === 7;
    try {
      const controller = new AbortController();
      const response = await request(`${gateway.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
        body: body(stream, worker * 1_000_000 + index),
        signal: controller.signal,
      });
      if (leave) {
        controller.abort();
        await response.body.dump().catch(() => {});
        count('client left');
      } else {
        await response.body.text();
        count(String(response.statusCode));
      }
    } catch {
      count(leave ? 'client left' : 'error');
    }
  }
}

const sampler = setInterval(() => samples.push([(Date.now() - started) / 60_000, rssMb(pid)]), 1000);
const workers = Array.from({ length: CONCURRENCY }, (_, worker) => client(worker));
await new Promise((resolve) => setTimeout(resolve, SECONDS * 1000));
stop = true;
await Promise.all(workers);
clearInterval(sampler);

// Long streams in flight at SIGTERM: some finish within the drain time, the rest are ended.
const long = Array.from({ length: 10 }, (_, index) =>
  request(`${gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY}` },
    body: JSON.stringify({
      model: 'zeta/zeta-k3',
      stream: true,
      messages: [{ role: 'user', content: `long stream ${index} `.repeat(1 + index * 3) }],
    }),
  }).then(
    async (response) =>
      (await response.body.text().catch(() => '')).includes('[DONE]') ? 'finished' : 'ended by the drain',
    () => 'refused',
  ),
);
while (slow.requests.length < 10) await new Promise((resolve) => setTimeout(resolve, 20));
gateway.child.kill('SIGTERM');
const exitCode = await gateway.exited;
const longOutcomes = await Promise.all(long);

const upstreamCalls = fast.requests.length + slow.requests.length;
const restarted = await startSoakGateway(env);
const usage = await request(`${restarted.url}/admin/usage`, { headers: { authorization: `Bearer ${ADMIN}` } });
const rows = ((await usage.body.json()) as { data: { requests: number }[] }).data;
const recorded = rows.reduce((sum, row) => sum + row.requests, 0);
restarted.child.kill('SIGTERM');
await restarted.exited;

const warm = samples.filter(([minutes]) => minutes * 60 >= Math.min(10, SECONDS / 3));
const requests = [...statuses.values()].reduce((sum, value) => sum + value, 0);
console.log(
  `${SECONDS} s, ${CONCURRENCY} clients: ${requests} requests (${(requests / SECONDS).toFixed(0)}/s) ${JSON.stringify(Object.fromEntries(statuses))}`,
);
console.log(
  `gateway RSS ${samples[0]?.[1].toFixed(0)} → ${samples.at(-1)?.[1].toFixed(0)} MB, max ${Math.max(...samples.map(([, mb]) => mb)).toFixed(0)} MB, slope after warm-up ${slope(warm).toFixed(2)} MB/min`,
);
console.log(
  `SIGTERM with 10 long streams in flight (drain 2 s): ${JSON.stringify(longOutcomes.reduce<Record<string, number>>((acc, outcome) => ({ ...acc, [outcome]: (acc[outcome] ?? 0) + 1 }), {}))}, exit code ${exitCode}`,
);
console.log(`upstream calls ${upstreamCalls}, usage records ${recorded}, records lost ${upstreamCalls - recorded}`);
await fast.close();
await slow.close();
await rm(dataDir, { recursive: true, force: true });
process.exitCode = exitCode === 0 && recorded === upstreamCalls && !statuses.has('error') ? 0 : 1;
