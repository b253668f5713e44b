import autocannon from 'autocannon';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

/**
 * Gateway throughput as a ratio of a bare Node proxy's (node:http + undici, no checks), both in front
 * of the same mock upstream, measured side by side in one run: rounds alternate bare / gateway, and
 * the ratio of the medians is reported. Targets: ≥ 0.6× on JSON, ≥ 0.9× on streams.
 */
const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '5' },
    rounds: { type: 'string', default: '3' },
    connections: { type: 'string', default: '32' },
  },
});
const seconds = Number(values.seconds);
const rounds = Number(values.rounds);
const connections = Number(values.connections);
const KEY = 'sk-bench-key-000000000000';

const children: ChildProcess[] = [];
const pids = new Map<string, number>();

/** CPU time (user + system) a process has used, in microseconds, from /proc (Linux). */
async function cpuMicros(pid: number): Promise<number> {
  const fields = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1_000_000) / 100;
}

function start(args: string[], env: NodeJS.ProcessEnv, pattern: RegExp): Promise<string> {
  const child = spawn(process.execPath, ['--import', 'tsx', ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  return new Promise((resolve, reject) => {
    let output = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const match = pattern.exec(output);
      if (match) {
        pids.set(match[1]!, child.pid!);
        resolve(match[1]!);
      }
    });
    child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited with ${code}: ${output}`)));
  });
}

function stopAll(): void {
  for (const child of children) child.kill('SIGTERM');
}
process.on('exit', stopAll);

const upstream = await start(['scripts/mock-upstream.ts', '--port', '0'], {}, /base URL (\S+)/);
const bare = await start(['bench/bare-proxy-main.ts'], { UPSTREAM_URL: upstream }, /"url":"([^"]+)"/);
const dataDir = await mkdtemp(join(tmpdir(), 'gateway-bench-'));
const vendorEnv = Object.fromEntries(['ALPHA', 'BETA', 'GAMMA', 'DELTA', 'EPSILON', 'ZETA'].flatMap((prefix) => [[`${prefix}_BASE_URL`, upstream]]));
const gateway = await start(['src/main.ts'], { ...vendorEnv, PORT: '0', HOST: '127.0.0.1', GATEWAY_API_KEYS: KEY, RATE_LIMIT_MAX: '100000000', LOG_LEVEL: 'info', GATEWAY_DATA_DIR: dataDir, REDIS_URL: '' }, /"url":"([^"]+)"/);

const scenarios = {
  json: JSON.stringify({ model: 'delta/delta-4.7', messages: [{ role: 'user', content: 'Benchmark message of a realistic length for a chat turn.' }] }),
  stream: JSON.stringify({ model: 'delta/delta-4.7', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'Benchmark message of a realistic length for a chat turn.' }] }),
};

/** Requests per second under load, and the proxy process's CPU time per request (µs): less noisy on a shared machine. */
async function measure(url: string, body: string): Promise<{ rps: number; cpu: number }> {
  const cpuBefore = await cpuMicros(pids.get(url)!);
  const result = await autocannon({
    url: `${url}/v1/chat/completions`,
    method: 'POST',
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
    body,
    connections,
    duration: seconds,
  });
  if (result.non2xx > 0 || result.errors > 0) throw new Error(`${url}: ${result.non2xx} non-2xx answers, ${result.errors} errors`);
  const cpu = (await cpuMicros(pids.get(url)!)) - cpuBefore;
  return { rps: result.requests.average, cpu: cpu / result.requests.total };
}

const median = (numbers: number[]) => [...numbers].sort((a, b) => a - b)[Math.floor(numbers.length / 2)]!;
const targets = { json: 0.6, stream: 0.9 };
const report: Record<string, unknown> = { seconds, rounds, connections, node: process.version };
let failed = false;
for (const [name, body] of Object.entries(scenarios) as [keyof typeof scenarios, string][]) {
  await measure(gateway, body);
  await measure(bare, body);
  const bareRuns: { rps: number; cpu: number }[] = [];
  const gatewayRuns: { rps: number; cpu: number }[] = [];
  for (let round = 0; round < rounds; round += 1) {
    bareRuns.push(await measure(bare, body));
    gatewayRuns.push(await measure(gateway, body));
  }
  const bareRps = median(bareRuns.map((run) => run.rps));
  const gatewayRps = median(gatewayRuns.map((run) => run.rps));
  const bareCpu = median(bareRuns.map((run) => run.cpu));
  const gatewayCpu = median(gatewayRuns.map((run) => run.cpu));
  const ratio = gatewayRps / bareRps;
  report[name] = { bare: bareRuns, gateway: gatewayRuns, ratio, cpuRatio: bareCpu / gatewayCpu, target: targets[name] };
  failed ||= ratio < targets[name];
  process.stdout.write(
    `${name.padEnd(6)}  bare ${bareRps.toFixed(0).padStart(6)} req/s ${bareCpu.toFixed(0).padStart(4)} µs CPU/req   ` +
      `gateway ${gatewayRps.toFixed(0).padStart(6)} req/s ${gatewayCpu.toFixed(0).padStart(4)} µs CPU/req   ` +
      `ratio ${ratio.toFixed(2)} (CPU ${(bareCpu / gatewayCpu).toFixed(2)}; target ≥ ${targets[name]})\n`,
  );
}
await mkdir('bench/results', { recursive: true });
await writeFile(join('bench/results', `run-${new Date().toISOString().replace(/[:.]/g, '-')}.json`), `${JSON.stringify(report, null, 2)}\n`);
stopAll();
process.exit(failed ? 1 : 0);
