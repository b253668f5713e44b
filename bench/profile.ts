import autocannon from 'autocannon';
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { WebSocket } from 'undici';
import { conversation } from './conversation.ts';
import { vendorEnv } from './vendor-env.ts';
import { compileTree } from './compile.ts';
import { envFlags, onStop, runCleanly, spawnTracked } from './processes.ts';

/**
 * Where the gateway's CPU time goes under load: runs the compiled gateway with `node --cpu-prof` in
 * front of the mock upstream, loads one scenario, and prints the self time of each group of functions
 * (Express, node's http, undici, the gateway's own modules, GC, …) in µs per request, and the bytes
 * the gateway allocates per request (the `allocated` figures of V8's `--trace-gc-nvp` lines, summed
 * over the measured load).
 * `npm run bench:profile -- --scenario json|stream|messages-stream --seconds 10 [--store redis]`
 * `--key managed` loads through a managed key without limits, `--key limited` through one with a
 * `tpm`, a daily quota and both money budgets (far out of reach): the two side by side show what
 * admission with limits costs and where.
 */
const { values } = parseArgs({
  options: {
    scenario: { type: 'string', default: 'json' },
    seconds: { type: 'string', default: '10' },
    connections: { type: 'string', default: '64' },
    tree: { type: 'string', default: '.' },
    /** Also writes the raw profile here (`.cpuprofile`, opens in Chrome DevTools). */
    save: { type: 'string' },
    /**
     * `static` (the benchmark key), `managed` (a managed key without limits), `limited` (one with token and money
     * limits) or `exempt` (one the response cache and every guardrail leave alone).
     */
    key: { type: 'string', default: 'static' },
    /** `embedded` (the default) or `redis`: limits, keys and usage on a redis-server of the profile's own. */
    store: { type: 'string', default: 'embedded' },
    /**
     * Further environment of the gateway, `NAME=value` (repeatable), e.g. `--env GATEWAY_CACHE_TTL_S=3600` to profile
     * cache hits.
     */
    env: { type: 'string', multiple: true, default: [] },
    /** Groups the gateway's own time by file (and function) rather than by folder. */
    files: { type: 'boolean', default: false },
    /** Profiles the bare proxy (bench/bare-proxy-main.ts) in place of the gateway, for comparison. */
    bare: { type: 'boolean', default: false },
    /** A conversation of about this many KB before the last turn (a long chat's request), instead of one short turn. */
    'prompt-kb': { type: 'string', default: '0' },
  },
});
const KEY = 'sk-bench-key-000000000000-0123456789abcdef';
const ADMIN = 'bench-admin-token-0123456789abcdef';
/** A managed key the response cache and every guardrail leave alone. */
const EXEMPT = { cache: false, guardrails: [] };
const LIMITS = {
  tpm: 1_000_000_000_000,
  quota: { daily: 1_000_000_000_000 },
  budget: { daily_usd: 1_000_000, monthly_usd: 1_000_000 },
};
if (!['embedded', 'redis'].includes(values.store)) throw new Error('--store must be embedded or redis');
if (!['static', 'managed', 'limited', 'exempt'].includes(values.key))
  throw new Error('--key must be static, managed, limited or exempt');
const message = [
  ...conversation(Number(values['prompt-kb']) * 1024),
  { role: 'user', content: 'Benchmark message of a realistic length for a chat turn.' },
];
const scenarios: Record<string, { path: string; body: string }> = {
  json: { path: '/v1/chat/completions', body: JSON.stringify({ model: 'delta/delta-4.7', messages: message }) },
  stream: {
    path: '/v1/chat/completions',
    body: JSON.stringify({
      model: 'delta/delta-4.7',
      stream: true,
      stream_options: { include_usage: true },
      messages: message,
    }),
  },
  'messages-stream': {
    path: '/v1/messages',
    body: JSON.stringify({ model: 'beta-fable-5-1', max_tokens: 256, stream: true, messages: message }),
  },
};
const scenario = scenarios[values.scenario];
if (!scenario) throw new Error(`--scenario must be one of ${Object.keys(scenarios).join(', ')}`);

// Every process started (tsc, the mock upstream, the gateway) is stopped however this ends (processes.ts).
await runCleanly(async () => {
  const work = await mkdtemp(join(tmpdir(), 'gateway-profile-'));
  onStop(() => rm(work, { recursive: true, force: true }));

  /** Bytes V8 reported allocated in the gateway so far (summed from its GC trace). */
  let allocatedBytes = 0;

  function start(
    args: string[],
    env: NodeJS.ProcessEnv,
    pattern: RegExp,
  ): Promise<{ url: string; child: ChildProcess; debuggerUrl: Promise<string> }> {
    const child = spawnTracked(process.execPath, args, {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let errors = '';
    const debuggerUrl = new Promise<string>((resolve) => {
      child.stderr!.on('data', (chunk: Buffer) => {
        errors = (errors + chunk.toString()).slice(-4000);
        const match = /Debugger listening on (ws:\/\/\S+)/.exec(errors);
        if (match) resolve(match[1]!);
      });
    });
    return new Promise((resolve, reject) => {
      let output = '';
      let started = false;
      let partial = '';
      child.stdout!.on('data', (chunk: Buffer) => {
        if (started) {
          const lines = (partial + chunk.toString()).split('\n');
          partial = lines.pop()!;
          for (const line of lines) {
            const allocated = / allocated=(\d+)/.exec(line);
            if (allocated) allocatedBytes += Number(allocated[1]);
          }
          return;
        }
        output += chunk.toString();
        const match = pattern.exec(output);
        if (match) {
          started = true;
          resolve({ url: match[1]!, child, debuggerUrl });
        }
      });
      child.once('error', reject);
      child.once(
        'exit',
        (code) =>
          code !== 0 &&
          reject(new Error(`${args.join(' ')} exited with ${code}: ${output.slice(-2000)}${errors.slice(-2000)}`)),
      );
    });
  }

  let redisUrl = '';
  if (values.store === 'redis') {
    const { freePort } = await import('../test/helpers/redis-server.ts');
    const port = await freePort();
    const redis = spawnTracked(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', work],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    await new Promise<void>((resolve, reject) => {
      let output = '';
      redis.stdout!.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        if (/Ready to accept connections/.test(output)) resolve();
      });
      redis.once('exit', (code) => reject(new Error(`redis-server exited with ${code}: ${output.slice(-2000)}`)));
    });
    redisUrl = `redis://127.0.0.1:${port}`;
  }

  const tree = await compileTree(values.tree, join(work, 'out'));
  const upstream = await start(
    [...tree.nodeArgs, tree.script('scripts/mock-upstream.ts'), '--port', '0'],
    {},
    /base URL (\S+)/,
  );
  const gateway = await start(
    [
      '--inspect=127.0.0.1:0',
      '--trace-gc-nvp',
      ...tree.nodeArgs,
      tree.script(values.bare ? 'bench/bare-proxy-main.ts' : 'src/main.ts'),
    ],
    {
      ...vendorEnv(upstream.url),
      UPSTREAM_URL: upstream.url,
      PORT: '0',
      HOST: '127.0.0.1',
      GATEWAY_API_KEYS: KEY,
      GATEWAY_ADMIN_TOKEN: ADMIN,
      RATE_LIMIT_MAX: '100000000',
      GATEWAY_KEY_CONCURRENCY: '100000',
      LOG_LEVEL: 'info',
      GATEWAY_DATA_DIR: join(work, 'data'),
      GATEWAY_MANIFEST: tree.manifest,
      // The tree's own configuration (an older tree's settings are not this checkout's).
      GATEWAY_CONFIG: resolve(values.tree, 'config/gateway.yaml'),
      REDIS_URL: redisUrl,
      ...envFlags(values.env),
    },
    /"url":"([^"]+)"/,
  );
  let loadKey = KEY;
  if (values.key !== 'static') {
    const created = await fetch(`${gateway.url}/admin/keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        name: values.key,
        ...(values.key === 'limited' ? LIMITS : {}),
        ...(values.key === 'exempt' ? EXEMPT : {}),
      }),
    });
    loadKey = ((await created.json()) as { key: string }).key;
  }
  const load = (duration: number) =>
    autocannon({
      url: `${gateway.url}${scenario.path}`,
      method: 'POST',
      headers: {
        authorization: `Bearer ${loadKey}`,
        'content-type': 'application/json',
        'anthropic-version': '2023-06-01',
      },
      body: scenario.body,
      connections: Number(values.connections),
      duration,
    });

  /**
   * The DevTools protocol of the gateway process: the profiler runs for the measured load only, not start-up or
   * warm-up.
   */
  async function inspector(url: string): Promise<(method: string, params?: object) => Promise<unknown>> {
    const socket = new WebSocket(url);
    await new Promise((resolve, reject) => {
      socket.addEventListener('open', resolve);
      socket.addEventListener('error', reject);
    });
    let nextId = 1;
    const waiting = new Map<number, (result: unknown) => void>();
    socket.addEventListener('message', (event) => {
      const reply = JSON.parse(String(event.data)) as { id?: number; result?: unknown };
      if (reply.id !== undefined) waiting.get(reply.id)?.(reply.result);
    });
    return (method, params = {}) =>
      new Promise((resolve) => {
        const id = nextId++;
        waiting.set(id, resolve);
        socket.send(JSON.stringify({ id, method, params }));
      });
  }

  const send = await inspector(await gateway.debuggerUrl);
  await load(3); // warm-up: the JIT has compiled the hot paths before the profile starts
  await send('Profiler.enable');
  await send('Profiler.setSamplingInterval', { interval: 200 });
  await send('Profiler.start');
  const allocatedBefore = allocatedBytes;
  const result = await load(Number(values.seconds));
  const { profile: taken } = (await send('Profiler.stop')) as { profile: unknown };
  const allocatedDuring = allocatedBytes - allocatedBefore;
  if (result.non2xx > 0 || result.errors > 0)
    throw new Error(`${result.non2xx} non-2xx answers, ${result.errors} errors`);

  interface ProfileNode {
    id: number;
    callFrame: { functionName: string; url: string };
    children?: number[];
  }
  const profile = taken as { nodes: ProfileNode[]; samples: number[]; timeDeltas: number[] };
  if (values.save) await writeFile(values.save, JSON.stringify(profile));

  /** The group a function's self time counts to, by where its code lives. */
  function groupOf({ functionName, url }: ProfileNode['callFrame']): string {
    if (functionName === '(garbage collector)') return 'GC';
    if (functionName === '(idle)') return 'idle';
    if (functionName === '(program)' || functionName === '(root)') return 'native / not attributed';
    const path = url.replace(/^file:\/\//, '');
    const inModule = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(path);
    if (inModule) {
      const name = inModule[1]!;
      if (
        [
          'express',
          'router',
          'body-parser',
          'finalhandler',
          'send',
          'serve-static',
          'path-to-regexp',
          'parseurl',
          'qs',
          'type-is',
          'accepts',
          'content-type',
          'depd',
          'debug',
        ].includes(name)
      )
        return 'express & its helpers';
      if (name === 'express-rate-limit' || name === 'rate-limit-redis') return 'rate limit (express-rate-limit)';
      return name;
    }
    const own = /\/(src|providers)\/([^/]+)/.exec(path);
    if (own && !path.startsWith('node:')) {
      if (values.files)
        return `gateway: ${path.slice(path.indexOf(`/${own[1]}/`) + 1)} ${functionName || '(anonymous)'}`;
      return own[1] === 'providers' ? 'gateway: providers' : `gateway: src/${own[2]}`;
    }
    if (path.startsWith('node:internal/http') || /^node:_?http/.test(path) || path.includes('_http_'))
      return 'node: http';
    if (
      path.startsWith('node:internal/streams') ||
      path.startsWith('node:stream') ||
      path.startsWith('node:internal/webstreams')
    )
      return 'node: streams';
    if (
      path.startsWith('node:net') ||
      path.startsWith('node:internal/net') ||
      path.startsWith('node:internal/stream_base')
    )
      return 'node: net';
    if (path.startsWith('node:internal/deps/undici')) return 'undici';
    if (path.startsWith('wasm://')) return 'undici (llhttp, wasm)';
    if (path.startsWith('node:')) return `node: ${path.replace(/^node:(internal\/)?/, '')}`;
    if (path === '') return `native: ${functionName || '(anonymous)'}`;
    return path;
  }

  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const selfMicros = new Map<string, number>();
  profile.samples.forEach((id, index) => {
    const group = groupOf(byId.get(id)!.callFrame);
    selfMicros.set(group, (selfMicros.get(group) ?? 0) + (profile.timeDeltas[index] ?? 0));
  });
  selfMicros.delete('idle');
  const requests = result.requests.total;
  const total = [...selfMicros.values()].reduce((sum, value) => sum + value, 0);
  const rows = [...selfMicros.entries()].sort((a, b) => b[1] - a[1]);
  process.stdout.write(
    `\n${values.scenario}: ${requests} requests, ${result.requests.average.toFixed(0)} req/s, ${(total / requests).toFixed(0)} µs busy per request (profiled), ${(allocatedDuring / requests / 1024).toFixed(0)} KB allocated per request\n`,
  );
  process.stdout.write('| group | µs/request | share |\n|---|---:|---:|\n');
  for (const [group, micros] of rows) {
    if (micros / requests < 1) continue;
    process.stdout.write(
      `| ${group} | ${(micros / requests).toFixed(1)} | ${((100 * micros) / total).toFixed(1)} % |\n`,
    );
  }
  return 0;
});
