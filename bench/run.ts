import autocannon from 'autocannon';
import { execFileSync, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { Agent, createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { availableParallelism, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { conversation } from './conversation.ts';
import { vendorEnv } from './vendor-env.ts';
import { compileTree, type CompiledTree } from './compile.ts';
import { onStop, runCleanly, spawnTracked, stopTracked } from './processes.ts';

/**
 * Gateway throughput, CPU time per request and memory as ratios of a bare Node proxy's (node:http +
 * undici, no checks), all in front of the same mock upstream and measured side by side in one run:
 * rounds alternate between the contenders and medians are compared. Every process runs `node` on
 * JavaScript compiled with tsc (as production does), and CPU and memory are read from /proc for the
 * measured process alone. `--before <dir>` adds another source tree of the gateway (e.g. an older
 * commit) as a third contender, so that before and after are measured under the same conditions.
 * Also measured: idle RSS, peak RSS under load, and peak RSS with `--streams` streams open at once
 * (none may be dropped). Writes the table and the raw figures to `bench/results/`. Every process it
 * starts (tsc, the mock upstreams, the proxies, the gateways and their workers, Redis) is stopped when
 * it ends, also on a failure and on SIGINT/SIGTERM (`processes.ts`).
 */
const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '10' },
    rounds: { type: 'string', default: '3' },
    connections: { type: 'string', default: '64' },
    streams: { type: 'string', default: '5000' },
    'stream-delay-ms': { type: 'string', default: '4000' },
    before: { type: 'string' },
    // The load scenarios load every contender at once in each round and compare CPU within rounds.
    paired: { type: 'boolean', default: false },
    'paired-rate': { type: 'string', default: '500' },
    // The idle-features scenario: fresh pairs of gateways its rounds are spread over, and its control run.
    launches: { type: 'string', default: '4' },
    'idle-control': { type: 'boolean', default: false },
    // How long the contenders stay idle after start before their RSS at rest is read (0: not read).
    'rest-seconds': { type: 'string', default: '25' },
    'idle-before': { type: 'boolean', default: false },
    // Which features the configured gateway of the idle-features scenario carries (to take their cost apart).
    'idle-features': { type: 'string', default: 'cache,guardrails,traces' },
    // Which load scenarios the idle-features scenario runs (one alone takes a third of the time).
    'idle-scenarios': { type: 'string', default: 'json,stream,messages-stream' },
    scenarios: {
      type: 'string',
      default:
        'json,stream,messages-stream,json-long,stream-long,unloaded,open-streams,workers,admission,cache,tracing,guardrails,idle-features,websocket',
    },
    // Upstream endpoints per vendor for this tree's gateway (each the same mock upstream), to measure failover's
    // spread.
    endpoints: { type: 'string', default: '1' },
    // Requests per contender and round of the unloaded scenario (one at a time on one connection).
    'unloaded-requests': { type: 'string', default: '500' },
    // The stores the admission scenario runs on.
    'admission-stores': { type: 'string', default: 'embedded,redis' },
    // The store of the load scenarios' gateways (this tree's and --before's): embedded, or a Redis of the bench's own.
    store: { type: 'string', default: 'embedded' },
  },
});
const seconds = Number(values.seconds);
const pairedRate = Number(values['paired-rate']);
const rounds = Number(values.rounds);
const connections = Number(values.connections);
const openStreams = Number(values.streams);
const streamDelayMs = Number(values['stream-delay-ms']);
const endpointCount = Number(values.endpoints);
const wanted = new Set(values.scenarios.split(','));
const knownScenarios = [
  'json',
  'stream',
  'messages-stream',
  'json-long',
  'stream-long',
  'unloaded',
  'open-streams',
  'workers',
  'admission',
  'cache',
  'tracing',
  'guardrails',
  'idle-features',
  'websocket',
];
const unknown = [...wanted].filter((name) => !knownScenarios.includes(name));
if (unknown.length) throw new Error(`--scenarios: unknown ${unknown.join(', ')} (known: ${knownScenarios.join(', ')})`);
const KEY = 'sk-bench-key-000000000000-0123456789abcdef';

// Paired rounds (`--paired`, and the idle-features scenario) pin their measured processes (see `startPinned`).
const cpus = availableParallelism();
const pinnedCpu = cpus >= 2 ? String(cpus - 1) : undefined;

await runCleanly(async () => {
  const work = await mkdtemp(join(tmpdir(), 'gateway-bench-'));
  onStop(() => rm(work, { recursive: true, force: true }));

  /**
   * Starts `command <args>` (tracked: in a process group of its own, stopped when the benchmark ends)
   * and resolves with the first match of `pattern` in its output (its first group), its pid and the process.
   */
  function startProcess(
    command: string,
    args: string[],
    env: NodeJS.ProcessEnv,
    pattern: RegExp,
  ): Promise<{ url: string; pid: number; child: ChildProcess }> {
    const child = spawnTracked(command, args, {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    return new Promise((resolve, reject) => {
      let output = '';
      const onData = (chunk: Buffer) => {
        output += chunk.toString();
        const match = pattern.exec(output);
        if (!match) return;
        // From here on the output (an access-log line per request) is drained unread: keeping and
        // scanning it would load this process, which shares the CPUs with the contenders.
        child.stdout!.off('data', onData);
        child.stdout!.resume();
        output = output.slice(-2000);
        resolve({ url: match[1] ?? match[0], pid: child.pid!, child });
      };
      child.stdout!.on('data', onData);
      child.once('error', reject);
      child.once('exit', (code, signal) =>
        reject(new Error(`${command} ${args.join(' ')} exited with ${signal ?? code}: ${output.slice(-2000)}`)),
      );
    });
  }

  /** Starts `node <args>`, as {@link startProcess}. */
  const start = (args: string[], env: NodeJS.ProcessEnv, pattern: RegExp) =>
    startProcess(process.execPath, args, env, pattern);

  /**
   * Starts a measured process of paired rounds on the machine's last CPU, which every such process shares while
   * this process (the load) and the upstreams keep to the others: measured side by side, two launches of the same
   * tree differ by up to 15 % in CPU per request when the scheduler places them apart (one beside the load, one
   * not), and by a few percent when they share a CPU.
   */
  const startPinned = (args: string[], env: NodeJS.ProcessEnv, pattern: RegExp) =>
    pinnedCpu === undefined
      ? start(args, env, pattern)
      : startProcess('taskset', ['-c', pinnedCpu, process.execPath, ...args], env, pattern);

  /**
   * A redis-server of the benchmark's own, on a free port, its files in the work folder; tracked like every process.
   */
  async function startRedis(): Promise<{ url: string; port: number; stop(): Promise<void> }> {
    const { freePort } = await import('../test/helpers/redis-server.ts');
    const port = await freePort();
    const dir = await mkdtemp(join(work, 'redis-'));
    const started = await startProcess(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir],
      {},
      /Ready to accept connections/,
    );
    return { url: `redis://127.0.0.1:${port}`, port, stop: () => stopTracked(started.child) };
  }

  /** CPU time (user + system) a process has used, in microseconds, from /proc (Linux). */
  async function cpuMicros(pid: number): Promise<number> {
    const fields = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1_000_000) / 100;
  }

  /** A process and its children (a cluster's primary and its workers), from /proc (Linux). */
  async function processTree(pid: number): Promise<number[]> {
    const children = (await readFile(`/proc/${pid}/task/${pid}/children`, 'utf8').catch(() => '')).trim();
    return [pid, ...(children ? children.split(/\s+/).map(Number) : [])];
  }

  /** CPU time of several processes together, in microseconds. */
  async function totalCpuMicros(pids: readonly number[]): Promise<number> {
    return (await Promise.all(pids.map(cpuMicros))).reduce((sum, micros) => sum + micros, 0);
  }

  /** Resident memory of a process in MB, from /proc (Linux). */
  async function rssMb(pid: number): Promise<number> {
    const status = await readFile(`/proc/${pid}/status`, 'utf8');
    return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) / 1024;
  }

  /** Samples the RSS of some processes together every 200 ms until stopped; resolves with the highest. */
  function rssPeak(pids: readonly number[]): { stop(): Promise<number> } {
    let peak = 0;
    const sample = () =>
      Promise.all(pids.map(rssMb)).then(
        (mbs) =>
          (peak = Math.max(
            peak,
            mbs.reduce((sum, mb) => sum + mb, 0),
          )),
        () => {},
      );
    void sample();
    const timer = setInterval(sample, 200);
    return {
      async stop() {
        clearInterval(timer);
        await sample();
        return peak;
      },
    };
  }

  if (values.store !== 'embedded' && values.store !== 'redis')
    throw new Error(`--store takes embedded or redis, got '${values.store}'`);
  const loadRedis = values.store === 'redis' ? await startRedis() : undefined;
  const here: CompiledTree = await compileTree('.', join(work, 'after'));
  const before: CompiledTree | undefined = values.before
    ? await compileTree(values.before, join(work, 'before'))
    : undefined;

  const upstream = await start(
    [...here.nodeArgs, here.script('scripts/mock-upstream.ts'), '--port', '0'],
    {},
    /base URL (\S+)/,
  );
  const slowUpstream = await start(
    [
      ...here.nodeArgs,
      here.script('scripts/mock-upstream.ts'),
      '--port',
      '0',
      '--chunk-delay-ms',
      String(streamDelayMs),
    ],
    {},
    /base URL (\S+)/,
  );

  /**
   * Keeps this process (the load) and the mock upstreams off the CPU the measured processes of paired rounds share,
   * or lets them back on it for the scenarios that follow.
   */
  const keepLoadOffPinnedCpu = (off: boolean) => {
    if (pinnedCpu === undefined) return;
    for (const pid of [process.pid, upstream.pid, slowUpstream.pid])
      execFileSync('taskset', ['-a', '-p', '-c', `0-${off ? cpus - 2 : cpus - 1}`, String(pid)]);
  };
  if (values.paired) keepLoadOffPinnedCpu(true);

  interface Contender {
    readonly name: string;
    readonly url: string;
    readonly pid: number;
    /** Every process serving (a cluster's primary and workers); the measured process alone when absent. */
    readonly pids?: readonly number[];
    /** The same program in front of the slow upstream, for the open-streams scenario. */
    readonly slowUrl: string;
    readonly slowPid: number;
    readonly idleMb: number;
    /** The API key its requests carry (the static benchmark key when absent). */
    readonly key?: string;
  }

  async function startBare(): Promise<Contender> {
    const fast = await (values.paired ? startPinned : start)(
      [...here.nodeArgs, here.script('bench/bare-proxy-main.ts')],
      { UPSTREAM_URL: upstream.url },
      /"url":"([^"]+)"/,
    );
    const slow = await start(
      [...here.nodeArgs, here.script('bench/bare-proxy-main.ts')],
      { UPSTREAM_URL: slowUpstream.url },
      /"url":"([^"]+)"/,
    );
    return {
      name: 'bare',
      url: fast.url,
      pid: fast.pid,
      slowUrl: slow.url,
      slowPid: slow.pid,
      idleMb: await settledRss(fast.pid),
    };
  }

  /**
   * The environment of a gateway process of `tree`: every vendor on `baseUrls`, limits out of the way, `extra` on top.
   */
  function gatewayEnv(
    tree: CompiledTree,
    baseUrls: string,
    dataDir: string,
    extra: NodeJS.ProcessEnv,
  ): NodeJS.ProcessEnv {
    // One load generator stands in for many clients: the per-address connection cap (against one client
    // holding every connection) is lifted to what the open-streams scenario opens at once.
    const connectionCaps = {
      GATEWAY_MAX_CONNECTIONS: String(Math.max(10_000, openStreams * 2)),
      GATEWAY_MAX_CONNECTIONS_PER_ADDRESS: String(Math.max(1000, openStreams + 200)),
    };
    return {
      ...vendorEnv(baseUrls),
      PORT: '0',
      HOST: '127.0.0.1',
      GATEWAY_API_KEYS: KEY,
      RATE_LIMIT_MAX: '100000000',
      GATEWAY_KEY_CONCURRENCY: '100000',
      ...connectionCaps,
      LOG_LEVEL: 'info',
      GATEWAY_DATA_DIR: dataDir,
      GATEWAY_MANIFEST: tree.manifest,
      REDIS_URL: '',
      ...extra,
    };
  }

  async function startGateway(name: string, tree: CompiledTree): Promise<Contender> {
    const run = async (upstreamUrl: string) => {
      const dataDir = await mkdtemp(join(work, `data-${name}-`));
      // `before` trees may predate endpoint lists: they get one.
      const baseUrls =
        name === 'before' ? upstreamUrl : Array.from({ length: endpointCount }, () => upstreamUrl).join(',');
      // Each tree reads its own config file (an older tree may not know this one's settings).
      const configFile =
        name === 'before' && values.before ? { GATEWAY_CONFIG: resolve(values.before, 'config/gateway.yaml') } : {};
      const store = loadRedis ? { REDIS_URL: loadRedis.url } : {};
      return (values.paired ? startPinned : start)(
        [...tree.nodeArgs, tree.script('src/main.ts')],
        gatewayEnv(tree, baseUrls, dataDir, { ...configFile, ...store }),
        /"url":"([^"]+)"/,
      );
    };
    const fast = await run(upstream.url);
    const slow = await run(slowUpstream.url);
    return {
      name,
      url: fast.url,
      pid: fast.pid,
      slowUrl: slow.url,
      slowPid: slow.pid,
      idleMb: await settledRss(fast.pid),
    };
  }

  async function settledRss(pid: number): Promise<number> {
    await new Promise((resolve) => setTimeout(resolve, 1500));
    return rssMb(pid);
  }

  const contenders: Contender[] = [
    await startBare(),
    ...(before ? [await startGateway('before', before)] : []),
    await startGateway('gateway', here),
  ];
  // Idle at rest: a process keeps the young generation its start-up grew (two semi-spaces of 16 MB) until V8's
  // memory reducer finds it idle and gives it back (about 17 s after start here). Read once every contender has
  // been up `--rest-seconds` without a request.
  const restMb = new Map<string, number>();
  if (Number(values['rest-seconds']) > 0) {
    await new Promise((resolve) => setTimeout(resolve, Number(values['rest-seconds']) * 1000));
    for (const contender of contenders) restMb.set(contender.name, await rssMb(contender.pid));
  }

  const message = [{ role: 'user', content: 'Benchmark message of a realistic length for a chat turn.' }];
  const longChat = [...conversation(64 * 1024), ...message];
  const loadScenarios = {
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
    // A long chat's request: 64 KB of history before the same last message.
    'json-long': {
      path: '/v1/chat/completions',
      body: JSON.stringify({ model: 'delta/delta-4.7', messages: longChat }),
    },
    'stream-long': {
      path: '/v1/chat/completions',
      body: JSON.stringify({
        model: 'delta/delta-4.7',
        stream: true,
        stream_options: { include_usage: true },
        messages: longChat,
      }),
    },
  };
  const targets: Record<string, { rps: number; cpu: number }> = {
    json: { rps: 0.8, cpu: 1.4 },
    stream: { rps: 0.85, cpu: 1.3 },
    'messages-stream': { rps: 0.85, cpu: 1.3 },
    'json-long': { rps: 0.8, cpu: 1.4 },
    'stream-long': { rps: 0.85, cpu: 1.3 },
  };

  interface Run {
    readonly rps: number;
    /** CPU µs per request of the measured process. */
    readonly cpu: number;
    readonly peakMb: number;
    /** Requests answered. */
    readonly total: number;
  }

  // Never reset: a unique body is never sent twice in one run, whichever gateway or round it goes to.
  let uniqueBodies = 0;
  /** The headers of a load scenario's requests to a contender: its key, JSON, and the Messages API's version. */
  const requestHeaders = (contender: Contender) => ({
    authorization: `Bearer ${contender.key ?? KEY}`,
    'content-type': 'application/json',
    'anthropic-version': '2023-06-01',
  });

  /**
   * `body` for every request, or with `unique`, a body of its own per request (`body` with a counter in its `user`
   * field).
   */
  async function measure(
    contender: Contender,
    path: string,
    body: string,
    duration = seconds,
    unique = false,
    rate?: number,
  ): Promise<Run> {
    const pids = contender.pids ?? [contender.pid];
    const cpuBefore = await totalCpuMicros(pids);
    const peak = rssPeak(pids);
    const result = await autocannon({
      url: `${contender.url}${path}`,
      method: 'POST',
      headers: requestHeaders(contender),
      body,
      connections,
      duration,
      ...(rate !== undefined && { overallRate: rate }),
      ...(unique && {
        requests: [
          {
            setupRequest: (req: autocannon.Request) => ({
              ...req,
              body: `${body.slice(0, -1)},"user":"bench-${(uniqueBodies += 1)}"}`,
            }),
          },
        ],
      }),
    });
    const peakMb = await peak.stop();
    if (result.non2xx > 0 || result.errors > 0)
      throw new Error(`${contender.name} ${path}: ${result.non2xx} non-2xx answers, ${result.errors} errors`);
    const cpu = (await totalCpuMicros(pids)) - cpuBefore;
    return { rps: result.requests.average, cpu: cpu / result.requests.total, peakMb, total: result.requests.total };
  }

  /**
   * Opens `count` streams at once (in batches, so the listen backlog is not the limit) through a
   * contender in front of the slow upstream, and waits for all to end. Peak RSS of the contender, the
   * most streams open at one time, and how many broke or never finished.
   */
  /**
   * Asks `/healthz` every 50 ms, one request at a time on a connection of its own, until stopped: the
   * worst time to its answer (whatever its status), in ms.
   */
  function healthProbe(base: string) {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    let worst = 0;
    let running = true;
    const done = (async () => {
      while (running) {
        const started = performance.now();
        await new Promise<void>((resolve) => {
          const req = request(new URL(`${base}/healthz`), { agent }, (res) => {
            res.resume();
            res.on('end', resolve);
          });
          req.on('error', () => resolve());
          req.end();
        });
        worst = Math.max(worst, performance.now() - started);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })();
    return {
      async stop(): Promise<number> {
        running = false;
        await done;
        agent.destroy();
        return worst;
      },
    };
  }

  async function holdStreams(
    contender: Contender,
    count: number,
  ): Promise<{
    peakMb: number;
    mostOpen: number;
    dropped: number;
    worstHealthMs: number;
    reasons: Record<string, number>;
  }> {
    const agent = new Agent({ keepAlive: false, maxSockets: Infinity });
    const body = loadScenarios.stream.body;
    const url = new URL(`${contender.slowUrl}/v1/chat/completions`);
    const peak = rssPeak([contender.slowPid]);
    // /healthz is asked throughout, the streams' common end included: the worst wait is reported.
    const health = healthProbe(contender.slowUrl);
    let open = 0;
    let mostOpen = 0;
    let dropped = 0;
    const reasons = new Map<string, number>();
    const drop = (reason: string) => {
      dropped += 1;
      reasons.set(reason, (reasons.get(reason) ?? 0) + 1);
    };
    const one = (answered: () => void) =>
      new Promise<void>((resolve) => {
        let counted = false;
        const settle = () => {
          if (!counted) answered();
          counted = true;
        };
        // A stream is open from its connection to its end: the gateway holds the response headers until
        // the first content event (to fail over unseen), so counting from the headers would undercount.
        let opened = false;
        const close = () => {
          if (opened) open -= 1;
          opened = false;
        };
        const req = request(
          url,
          {
            method: 'POST',
            agent,
            headers: {
              authorization: `Bearer ${KEY}`,
              'content-type': 'application/json',
              'content-length': Buffer.byteLength(body),
            },
          },
          (res) => {
            let tail = '';
            res.on('data', (chunk: Buffer) => (tail = (tail + chunk.toString('latin1')).slice(-64)));
            res.on('end', () => {
              close();
              if (res.statusCode !== 200) drop(`status ${res.statusCode}`);
              else if (!tail.includes('[DONE]')) drop('ended without [DONE]');
              resolve();
            });
            res.on('error', (error) => {
              close();
              drop(`response: ${error.message}`);
              resolve();
            });
          },
        );
        req.on('socket', (socket) =>
          socket.once('connect', () => {
            settle();
            opened = true;
            open += 1;
            mostOpen = Math.max(mostOpen, open);
          }),
        );
        req.on('error', (error) => {
          settle();
          close();
          drop(`request: ${error.message}`);
          resolve();
        });
        req.end(body);
      });
    // At most 200 requests wait for their connection at a time: a burst beyond the listen backlog would be
    // reset by the kernel before any process saw it, which says nothing about the process measured.
    const all: Promise<void>[] = [];
    let waiting = 0;
    let wake: (() => void) | undefined;
    for (let index = 0; index < count; index += 1) {
      while (waiting >= 200) await new Promise<void>((resolve) => (wake = resolve));
      waiting += 1;
      all.push(
        one(() => {
          waiting -= 1;
          wake?.();
        }),
      );
    }
    await Promise.all(all);
    agent.destroy();
    return {
      peakMb: await peak.stop(),
      mostOpen,
      dropped,
      worstHealthMs: await health.stop(),
      reasons: Object.fromEntries(reasons),
    };
  }

  /**
   * A warm-up, then `rounds` rounds of one scenario through each entrant, in alternating order: the runs by entrant
   * name.
   */
  async function alternateRounds(
    entrants: readonly Contender[],
    scenario: { path: string; body: string },
    unique = false,
  ): Promise<Map<string, Run[]>> {
    for (const entrant of entrants) await measure(entrant, scenario.path, scenario.body, Math.min(3, seconds), unique);
    const runs = new Map<string, Run[]>(entrants.map((entrant) => [entrant.name, []]));
    for (let round = 0; round < rounds; round += 1) {
      // Alternate the order too, so that no entrant always runs right after the same one.
      const order = round % 2 === 0 ? entrants : [...entrants].reverse();
      for (const entrant of order)
        runs.get(entrant.name)!.push(await measure(entrant, scenario.path, scenario.body, seconds, unique));
    }
    return runs;
  }

  /**
   * Rounds in which every entrant is loaded at once, each at the same fixed rate (`--paired-rate` requests per second,
   * below what the machine serves, so that none is starved by the others and each does the same work per second):
   * whatever the machine does to one in a round (another tenant, a slower core) it does to the others, so the ratio
   * of each round's CPU per request holds where alternating rounds at full load, seconds apart, differ by more than
   * what is measured (`--paired`).
   */
  async function concurrentRounds(
    entrants: readonly Contender[],
    scenario: { path: string; body: string },
  ): Promise<Map<string, Run[]>> {
    // The load of the entrant set going first starts first: each round turns the order, as a control run (two
    // gateways configured alike) showed the later one a few percent dearer every round otherwise.
    const all = async (duration: number, order: readonly Contender[]) => {
      const measured = await Promise.all(
        order.map((entrant) => measure(entrant, scenario.path, scenario.body, duration, false, pairedRate)),
      );
      return new Map(order.map((entrant, index) => [entrant.name, measured[index]!]));
    };
    // Warmed up at full load first, one at a time: at the paired rate alone, a fresh process's first round still ran
    // at twice to four times its later rounds' CPU per request (code not yet optimized).
    for (const entrant of entrants) await measure(entrant, scenario.path, scenario.body, Math.min(3, seconds));
    await all(Math.min(3, seconds), entrants);
    const runs = new Map<string, Run[]>(entrants.map((entrant) => [entrant.name, []]));
    for (let round = 0; round < rounds; round += 1) {
      const measured = await all(seconds, round % 2 === 0 ? entrants : [...entrants].reverse());
      for (const [name, run] of measured) runs.get(name)!.push(run);
    }
    return runs;
  }

  /** Each round's CPU per request of `entry` against `base`'s in the same round. */
  const roundRatios = (runs: Map<string, Run[]>, entry: string, base: string): number[] =>
    runs.get(entry)!.map((run, round) => run.cpu / runs.get(base)![round]!.cpu);

  /** The median over rounds of `entry`'s CPU per request against `base`'s in the same round. */
  const cpuRatio = (runs: Map<string, Run[]>, entry: string, base: string): number =>
    median(roundRatios(runs, entry, base));

  const median = (numbers: number[]) => [...numbers].sort((a, b) => a - b)[Math.floor(numbers.length / 2)]!;
  /** The 95 % interval of the median of `numbers` by the bootstrap (10,000 resamples): how far such a median holds. */
  const medianInterval = (numbers: number[]): [number, number] => {
    const medians = Array.from({ length: 10_000 }, () =>
      median(numbers.map(() => numbers[Math.floor(Math.random() * numbers.length)]!)),
    ).sort((a, b) => a - b);
    return [medians[250]!, medians[9_749]!];
  };
  const report: Record<string, unknown> = {
    date: new Date().toISOString(),
    seconds,
    rounds,
    connections,
    node: process.version,
    cpus: (await import('node:os')).cpus().length,
    loadavg: (await import('node:os')).loadavg(),
  };
  const rows: string[] = [];
  const names = contenders.map((contender) => contender.name);
  const header = `| scenario | ${names.map((name) => `${name} req/s | ${name} CPU µs/req`).join(' | ')} | ${names
    .slice(1)
    .map((name) => `${name} req/s ratio | ${name} CPU ratio`)
    .join(' | ')} | target |`;
  rows.push(
    header,
    `|${header
      .split('|')
      .slice(1, -1)
      .map(() => '---:')
      .join('|')}|`,
  );
  let failed = false;

  for (const [name, scenario] of Object.entries(loadScenarios)) {
    if (!wanted.has(name)) continue;
    const runs = await (values.paired ? concurrentRounds : alternateRounds)(contenders, scenario);
    const rps = (entry: string) => median(runs.get(entry)!.map((run) => run.rps));
    const cpu = (entry: string) => median(runs.get(entry)!.map((run) => run.cpu));
    // Paired rounds compare within each round; alternating ones, the medians.
    const ratioOfCpu = (entry: string) => (values.paired ? cpuRatio(runs, entry, 'bare') : cpu(entry) / cpu('bare'));
    const target = targets[name]!;
    report[name] = Object.fromEntries(runs);
    const gatewayRatio = rps('gateway') / rps('bare');
    // Paired rounds load at a fixed rate, which every contender serves: only their CPU is judged.
    failed ||= (!values.paired && gatewayRatio < target.rps) || ratioOfCpu('gateway') > target.cpu;
    rows.push(
      `| ${name} | ${names.map((entry) => `${rps(entry).toFixed(0)} | ${cpu(entry).toFixed(0)}`).join(' | ')} | ` +
        `${names
          .slice(1)
          .map((entry) => `${(rps(entry) / rps('bare')).toFixed(2)}× | ${ratioOfCpu(entry).toFixed(2)}×`)
          .join(' | ')} | ${values.paired ? `fixed rate / ≤ ${target.cpu}×` : `≥ ${target.rps}× / ≤ ${target.cpu}×`} |`,
    );
    if (values.paired && before) {
      rows.push(
        `| ${name}: gateway CPU per request / before's, median of paired rounds | ${cpuRatio(runs, 'gateway', 'before').toFixed(3)}× |`,
      );
    }
    process.stdout.write(`${rows.at(-1)}\n`);
  }

  /**
   * What the gateway adds to one request's time when nothing else runs: each contender in turn answers
   * `--unloaded-requests` requests one at a time on one kept-alive connection (timed from sending to the last
   * byte of the answer), in alternating rounds after a warm-up; each round's median and 99th percentile, and
   * the median of those over the rounds. The gateway's median is held to the bare proxy's plus 100 µs.
   */
  const unloadedRows: string[] = [];
  if (wanted.has('unloaded')) {
    const { Client } = await import('undici');
    const count = Number(values['unloaded-requests']);
    const timed = async (contender: Contender, scenario: { path: string; body: string }, requests: number) => {
      const client = new Client(contender.url, { pipelining: 1 });
      const times: number[] = [];
      try {
        for (let index = 0; index < requests; index += 1) {
          const started = performance.now();
          const answer = await client.request({
            path: scenario.path,
            method: 'POST',
            headers: requestHeaders(contender),
            body: scenario.body,
          });
          await answer.body.arrayBuffer();
          times.push(performance.now() - started);
          if (answer.statusCode !== 200) throw new Error(`${contender.name} ${scenario.path}: ${answer.statusCode}`);
        }
      } finally {
        await client.close();
      }
      return times.sort((a, b) => a - b);
    };
    const quantile = (sorted: readonly number[], q: number) =>
      sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
    unloadedRows.push(
      `| unloaded, one request at a time (ms, median / p99) | ${names.join(' | ')} | gateway − bare, median (p99) | target |`,
      `|---|${names.map(() => '---:|').join('')}---:|---|`,
    );
    for (const name of ['json', 'stream', 'messages-stream'] as const) {
      const scenario = loadScenarios[name];
      for (const contender of contenders) await timed(contender, scenario, Math.min(200, count));
      const medians = new Map<string, number[]>(names.map((entry) => [entry, []]));
      const tails = new Map<string, number[]>(names.map((entry) => [entry, []]));
      for (let round = 0; round < rounds; round += 1) {
        for (const contender of round % 2 === 0 ? contenders : [...contenders].reverse()) {
          const times = await timed(contender, scenario, count);
          medians.get(contender.name)!.push(quantile(times, 0.5));
          tails.get(contender.name)!.push(quantile(times, 0.99));
        }
      }
      const at = (entry: string) => median(medians.get(entry)!);
      const tail = (entry: string) => median(tails.get(entry)!);
      const added = (at('gateway') - at('bare')) * 1000;
      failed ||= added > 100;
      report[`unloaded-${name}`] = { medians: Object.fromEntries(medians), p99: Object.fromEntries(tails) };
      unloadedRows.push(
        `| ${name} | ${names.map((entry) => `${at(entry).toFixed(2)} / ${tail(entry).toFixed(2)}`).join(' | ')} | ` +
          `+${added.toFixed(0)} µs (+${((tail('gateway') - tail('bare')) * 1000).toFixed(0)} µs) | ≤ +100 µs |`,
      );
      process.stdout.write(`${unloadedRows.at(-1)}\n`);
    }
  }

  /**
   * The gateway as a cluster (`GATEWAY_WORKERS=2`, limits and usage on a Redis of the benchmark's own)
   * against the same bare proxy (one process), JSON and Chat stream, alternating rounds. CPU is the sum of
   * the primary's and the workers' time per request; on these 2-core machines the workers share the cores
   * with the load generator, the mock upstream and Redis, so the row shows what a second worker costs
   * and buys here rather than a scaling figure.
   */
  const workerRows: string[] = [];
  if (wanted.has('workers')) {
    const redis = await startRedis();
    let primary: Awaited<ReturnType<typeof start>> | undefined;
    try {
      const dataDir = await mkdtemp(join(work, 'data-workers-'));
      const env = gatewayEnv(here, upstream.url, dataDir, { REDIS_URL: redis.url, GATEWAY_WORKERS: '2' });
      primary = await start([...here.nodeArgs, here.script('src/main.ts')], env, /"url":"([^"]+)"/);
      let pids = await processTree(primary.pid);
      for (let waited = 0; pids.length < 3 && waited < 100; waited += 1) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        pids = await processTree(primary.pid);
      }
      await new Promise((resolve) => setTimeout(resolve, 1500));
      const cluster: Contender = {
        name: '2 workers',
        url: primary.url,
        pid: primary.pid,
        pids,
        slowUrl: '',
        slowPid: 0,
        idleMb: 0,
      };
      const bare = contenders[0]!;
      workerRows.push(
        '| scenario | bare req/s | bare CPU µs/req | 2 workers req/s | 2 workers CPU µs/req | req/s ratio | CPU ratio |',
        '|---:|---:|---:|---:|---:|---:|---:|',
      );
      const perScenario: Record<string, Record<string, Run[]>> = {};
      for (const name of ['json', 'stream'] as const) {
        const runs = await alternateRounds([bare, cluster], loadScenarios[name]);
        perScenario[name] = Object.fromEntries(runs);
        const rps = (entrant: Contender) => median(runs.get(entrant.name)!.map((run) => run.rps));
        const cpu = (entrant: Contender) => median(runs.get(entrant.name)!.map((run) => run.cpu));
        workerRows.push(
          `| ${name} | ${rps(bare).toFixed(0)} | ${cpu(bare).toFixed(0)} | ${rps(cluster).toFixed(0)} | ${cpu(cluster).toFixed(0)} | ${(rps(cluster) / rps(bare)).toFixed(2)}× | ${(cpu(cluster) / cpu(bare)).toFixed(2)}× |`,
        );
        process.stdout.write(`${workerRows.at(-1)}\n`);
      }
      report.workers = perScenario;
    } finally {
      // The cluster first (its primary and workers are one process group): its workers store their
      // last usage records in Redis as they stop, and wait for a Redis that is gone.
      if (primary) await stopTracked(primary.child);
      await redis.stop();
    }
  }

  /**
   * The cost of admission with token and money limits on: one gateway process, two managed keys in
   * alternating rounds, one without limits and one with a `tpm`, a daily quota and daily and monthly
   * money budgets (all far out of reach), so every request reserves and settles on five counters. CPU
   * per request of each; on Redis also the script calls (EVALSHA: rate limit, usage record,
   * reservation, settlement batches) Redis ran per request for each, from INFO commandstats (the
   * commands a script runs inside are counted there too, so only the calls themselves are read).
   */
  const admissionRows: string[] = [];
  if (wanted.has('admission')) {
    const { commandCalls } = await import('../test/helpers/redis-server.ts');
    const redis = await startRedis();
    const commands = () => commandCalls(redis.port, /^(evalsha|eval)$/);
    admissionRows.push(
      '| store | scenario | no limits CPU µs/req | tpm + quota + budgets CPU µs/req | difference µs/req | no limits Redis script calls/req | with limits Redis script calls/req | target |',
      '|---|---|---:|---:|---:|---:|---:|---|',
    );
    try {
      for (const store of ['embedded', 'redis'] as const) {
        if (!values['admission-stores'].split(',').includes(store)) continue;
        const dataDir = await mkdtemp(join(work, `data-admission-${store}-`));
        const admin = 'bench-admin-token-0123456789abcdef';
        const env = gatewayEnv(here, upstream.url, dataDir, {
          GATEWAY_ADMIN_TOKEN: admin,
          ...(store === 'redis' ? { REDIS_URL: redis.url } : {}),
        });
        const started = await start([...here.nodeArgs, here.script('src/main.ts')], env, /"url":"([^"]+)"/);
        try {
          const createKey = async (settings: Record<string, unknown>) => {
            const created = await fetch(`${started.url}/admin/keys`, {
              method: 'POST',
              headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
              body: JSON.stringify(settings),
            });
            return ((await created.json()) as { key: string }).key;
          };
          // Managed keys both, so the two differ in their limits only (a static key is found another way).
          const plainKey = await createKey({ name: 'no limits' });
          const limitedKey = await createKey({
            name: 'budgeted',
            tpm: 1_000_000_000_000,
            quota: { daily: 1_000_000_000_000 },
            budget: { daily_usd: 1_000_000, monthly_usd: 1_000_000 },
          });
          const plain: Contender = {
            name: 'no limits',
            url: started.url,
            pid: started.pid,
            slowUrl: '',
            slowPid: 0,
            idleMb: 0,
            key: plainKey,
          };
          const limited: Contender = { ...plain, name: 'with limits', key: limitedKey };
          for (const name of ['json', 'stream'] as const) {
            const scenario = loadScenarios[name];
            for (const entrant of [plain, limited])
              await measure(entrant, scenario.path, scenario.body, Math.min(3, seconds));
            const cpu: Record<string, number[]> = { [plain.name]: [], [limited.name]: [] };
            const perRequest: Record<string, number[]> = { [plain.name]: [], [limited.name]: [] };
            for (let round = 0; round < rounds; round += 1) {
              for (const entrant of round % 2 === 0 ? [plain, limited] : [limited, plain]) {
                const before = store === 'redis' ? await commands() : 0;
                const run = await measure(entrant, scenario.path, scenario.body);
                cpu[entrant.name]!.push(run.cpu);
                // Settlements are batched after the answers: let the last ones land before counting.
                await new Promise((resolve) => setTimeout(resolve, 300));
                if (store === 'redis') perRequest[entrant.name]!.push(((await commands()) - before) / run.total);
              }
            }
            const plainCpu = median(cpu[plain.name]!);
            const limitedCpu = median(cpu[limited.name]!);
            const redisCells =
              store === 'redis'
                ? `${median(perRequest[plain.name]!).toFixed(2)} | ${median(perRequest[limited.name]!).toFixed(2)}`
                : '– | –';
            const target = store === 'redis' ? 'one more script call (round trip) per request' : '≤ 20 µs more';
            // The embedded target is judged in process below: end to end, rounds of one key spread over ±10 µs here.
            if (store === 'redis') failed ||= median(perRequest[limited.name]!) - median(perRequest[plain.name]!) > 1.5;
            admissionRows.push(
              `| ${store} | ${name} | ${plainCpu.toFixed(0)} | ${limitedCpu.toFixed(0)} | ${(limitedCpu - plainCpu).toFixed(1)} | ${redisCells} | ${target} |`,
            );
            process.stdout.write(`${admissionRows.at(-1)}\n`);
            report[`admission-${store}-${name}`] = { cpu, perRequest };
          }
        } finally {
          // Before Redis stops, and before the next store's gateway starts.
          await stopTracked(started.child);
        }
      }
      const { admissionCost } = await import('./admission-cost.ts');
      const stage = await admissionCost();
      report['admission-in-process'] = stage;
      failed ||= stage.difference > 20;
      admissionRows.push(
        `| embedded | the admission stage alone, in process (estimate, reserve, tokens headers, settle) | ${stage.without.toFixed(1)} | ${stage.withLimits.toFixed(1)} | ${stage.difference.toFixed(1)} | – | – | ≤ 20 µs more |`,
      );
      process.stdout.write(`${admissionRows.at(-1)}\n`);
    } finally {
      await redis.stop();
    }
  }

  /**
   * The response cache's cost, on the load scenarios' store: this tree's gateway with the cache off and
   * with it on (`GATEWAY_CACHE_TTL_S`), in alternating rounds. Misses: every request a body of its own
   * (both gateways), so the cache hashes, looks up and stores each answer; the difference is what a miss
   * costs. Hits: one body, answered from the cache after the warm-up, against the bare proxy forwarding
   * the same request upstream.
   */
  const cacheRows: string[] = [];
  if (wanted.has('cache')) {
    const cacheGateway = async (name: string, extra: NodeJS.ProcessEnv): Promise<Contender> => {
      const dataDir = await mkdtemp(join(work, `data-${name.replace(/\W+/g, '-')}-`));
      const store = loadRedis ? { REDIS_URL: loadRedis.url } : {};
      const started = await start(
        [...here.nodeArgs, here.script('src/main.ts')],
        gatewayEnv(here, upstream.url, dataDir, { ...store, ...extra }),
        /"url":"([^"]+)"/,
      );
      return { name, url: started.url, pid: started.pid, slowUrl: '', slowPid: 0, idleMb: 0 };
    };
    const off = await cacheGateway('cache off', {});
    const on = await cacheGateway('cache on', { GATEWAY_CACHE_TTL_S: '3600' });
    const bare = contenders[0]!;
    cacheRows.push(
      '| scenario | reference | reference CPU µs/req | cache on CPU µs/req | difference µs/req | cache on req/s | target |',
      '|---|---|---:|---:|---:|---:|---|',
    );
    for (const name of ['json', 'stream'] as const) {
      const scenario = loadScenarios[name];
      const misses = await alternateRounds([off, on], scenario, true);
      const hits = await alternateRounds([bare, on], scenario);
      const cpu = (runs: Map<string, Run[]>, entrant: Contender) =>
        median(runs.get(entrant.name)!.map((run) => run.cpu));
      const rps = (runs: Map<string, Run[]>, entrant: Contender) =>
        median(runs.get(entrant.name)!.map((run) => run.rps));
      const missCost = cpu(misses, on) - cpu(misses, off);
      const hitCpu = cpu(hits, on);
      failed ||= hitCpu >= cpu(hits, bare);
      cacheRows.push(
        `| ${name}, every request a miss | cache off | ${cpu(misses, off).toFixed(0)} | ${cpu(misses, on).toFixed(0)} | ${missCost.toFixed(1)} | ${rps(misses, on).toFixed(0)} | ≤ 10 µs more (embedded) |`,
      );
      cacheRows.push(
        `| ${name}, every request a hit | bare proxy | ${cpu(hits, bare).toFixed(0)} | ${hitCpu.toFixed(0)} | ${(hitCpu - cpu(hits, bare)).toFixed(1)} | ${rps(hits, on).toFixed(0)} | less than the bare proxy |`,
      );
      process.stdout.write(`${cacheRows.at(-2)}\n${cacheRows.at(-1)}\n`);
      report[`cache-${name}`] = { misses: Object.fromEntries(misses), hits: Object.fromEntries(hits) };
    }
    const { cacheCost } = await import('./cache-cost.ts');
    const stage = await cacheCost();
    report['cache-in-process'] = stage;
    failed ||= stage.miss > 10;
    cacheRows.push(
      `| the cache's own stage, in process, a full 64 MB embedded cache: miss (key, lookup, capture, store, evictions) | – | – | ${stage.miss.toFixed(1)} | – | – | ≤ 10 µs |`,
    );
    cacheRows.push(`| the same, hit (key, lookup, the hit's head) | – | – | ${stage.hit.toFixed(1)} | – | – | |`);
    process.stdout.write(`${cacheRows.at(-2)}\n${cacheRows.at(-1)}\n`);
  }

  /**
   * Guardrails' cost: this tree's gateway with none configured and with a `regex` and a `pii` guardrail on
   * both phases, in alternating rounds, on a 2 KB prompt (JSON and stream; the mock repeats the start of
   * the prompt in its answer, so the response guardrails read a stream's deltas through their window);
   * then the in-process figures of `guardrail-cost.ts` (each guardrail on the 2 KB prompt, the request
   * stage, none configured, a stream per event).
   */
  const guardrailRows: string[] = [];
  if (wanted.has('guardrails')) {
    const config = join(work, 'guardrails.yaml');
    await writeFile(
      config,
      [
        'guardrails:',
        "  - { name: no-codes, use: regex, on: both, action: block, patterns: ['PROJECT-[0-9]{4}'] }",
        '  - { name: no-pii, use: pii, on: both, action: redact }',
        '',
      ].join('\n'),
    );
    const guardedGateway = async (name: string, extra: NodeJS.ProcessEnv): Promise<Contender> => {
      const dataDir = await mkdtemp(join(work, `data-${name.replace(/\W+/g, '-')}-`));
      const store = loadRedis ? { REDIS_URL: loadRedis.url } : {};
      const started = await start(
        [...here.nodeArgs, here.script('src/main.ts')],
        gatewayEnv(here, upstream.url, dataDir, { ...store, ...extra }),
        /"url":"([^"]+)"/,
      );
      return { name, url: started.url, pid: started.pid, slowUrl: '', slowPid: 0, idleMb: 0 };
    };
    await writeFile(join(work, 'no-guardrails.yaml'), '');
    const off = await guardedGateway('guardrails off', { GATEWAY_CONFIG: join(work, 'no-guardrails.yaml') });
    const on = await guardedGateway('guardrails on', { GATEWAY_CONFIG: config });
    const sentence =
      'The quarterly report covers revenue, churn and the roadmap for 2026; reply with a summary of 3 points. ';
    const prompt = [{ role: 'user', content: sentence.repeat(21).slice(0, 2048) }];
    const scenarios = {
      json: { path: '/v1/chat/completions', body: JSON.stringify({ model: 'delta/delta-4.7', messages: prompt }) },
      stream: {
        path: '/v1/chat/completions',
        body: JSON.stringify({
          model: 'delta/delta-4.7',
          stream: true,
          stream_options: { include_usage: true },
          messages: prompt,
        }),
      },
    };
    guardrailRows.push(
      '| scenario (2 KB prompt) | off req/s | off CPU µs/req | on req/s | on CPU µs/req | difference µs/req |',
      '|---|---:|---:|---:|---:|---:|',
    );
    for (const [name, scenario] of Object.entries(scenarios)) {
      const runs = await alternateRounds([off, on], scenario);
      const cpu = (entrant: Contender) => median(runs.get(entrant.name)!.map((run) => run.cpu));
      const rps = (entrant: Contender) => median(runs.get(entrant.name)!.map((run) => run.rps));
      guardrailRows.push(
        `| ${name}, regex + pii on both phases | ${rps(off).toFixed(0)} | ${cpu(off).toFixed(0)} | ${rps(on).toFixed(0)} | ${cpu(on).toFixed(0)} | ${(cpu(on) - cpu(off)).toFixed(1)} |`,
      );
      process.stdout.write(`${guardrailRows.at(-1)}\n`);
      report[`guardrails-${name}`] = Object.fromEntries(runs);
    }
    const { guardrailCost } = await import('./guardrail-cost.ts');
    const cost = await guardrailCost();
    report['guardrails-in-process'] = cost;
    guardrailRows.push(
      '',
      '| in process, CPU µs per call (median of rounds) | µs | target |',
      '|---|---:|---|',
      `| regex \`PROJECT-[0-9]{4}\` on a 2 KB prompt | ${cost.regexCleanUs!.toFixed(2)} | ≤ 20 |`,
      `| regex, two case-insensitive patterns with common first characters, on a 2 KB prompt | ${cost.regexTwoPatternsCleanUs!.toFixed(2)} | ≤ 20 |`,
      `| pii (every entity) on a 2 KB prompt, nothing found | ${cost.piiCleanUs!.toFixed(2)} | ≤ 20 |`,
      `| pii (every entity) on a 2 KB prompt, one e-mail address redacted | ${cost.piiRedactUs!.toFixed(2)} | ≤ 20 |`,
      `| the request stage: texts of a 2 KB chat body, regex + pii | ${cost.requestStageUs!.toFixed(2)} | – |`,
      `| a stream through regex, per 4-character delta | ${cost.streamRegexPerEventUs!.toFixed(2)} | – |`,
      `| a stream through pii, per 4-character delta | ${cost.streamPiiPerEventUs!.toFixed(2)} | – |`,
    );
    failed ||= [cost.regexCleanUs!, cost.regexTwoPatternsCleanUs!, cost.piiCleanUs!, cost.piiRedactUs!].some(
      (us) => us > 20,
    );
    process.stdout.write(`${guardrailRows.slice(-11).join('\n')}\n`);
  }

  /**
   * Tracing's cost, on the load scenarios' store: this tree's gateway with tracing off, on with every
   * request sampled, and on at a ratio of 0.1 (`parentbased_traceidratio`), in alternating rounds,
   * exporting OTLP/HTTP protobuf to a receiver of the benchmark's own (it answers 200 and counts the
   * bytes, decoding nothing). The difference in CPU per request is what tracing costs; spans the
   * gateways dropped (their queue full) are read from `/metrics` at the end.
   */
  const tracingRows: string[] = [];
  if (wanted.has('tracing')) {
    let exportRequests = 0;
    let exportBytes = 0;
    const collector = createServer((req, res) => {
      exportRequests += 1;
      req.on('data', (chunk: Buffer) => (exportBytes += chunk.length));
      req.on('end', () => res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end());
    });
    await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve));
    onStop(() => new Promise<void>((resolve) => collector.close(() => resolve())));
    const otlp = `http://127.0.0.1:${(collector.address() as AddressInfo).port}`;
    const tracedGateway = async (name: string, extra: NodeJS.ProcessEnv): Promise<Contender> => {
      const dataDir = await mkdtemp(join(work, `data-${name.replace(/\W+/g, '-')}-`));
      const store = loadRedis ? { REDIS_URL: loadRedis.url } : {};
      const started = await start(
        [...here.nodeArgs, here.script('src/main.ts')],
        gatewayEnv(here, upstream.url, dataDir, { ...store, ...extra }),
        /"url":"([^"]+)"/,
      );
      return { name, url: started.url, pid: started.pid, slowUrl: '', slowPid: 0, idleMb: 0 };
    };
    const off = await tracedGateway('tracing off', {});
    const all = await tracedGateway('ratio 1', {
      OTEL_EXPORTER_OTLP_ENDPOINT: otlp,
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '1',
    });
    const tenth = await tracedGateway('ratio 0.1', {
      OTEL_EXPORTER_OTLP_ENDPOINT: otlp,
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.1',
    });
    tracingRows.push(
      '| scenario | off req/s | off CPU µs/req | ratio 1 req/s | ratio 1 CPU µs/req | ratio 1 difference µs/req | ratio 0.1 req/s | ratio 0.1 CPU µs/req | ratio 0.1 difference µs/req | target |',
      '|---|---:|---:|---:|---:|---:|---:|---:|---:|---|',
    );
    for (const name of ['json', 'stream', 'messages-stream'] as const) {
      const runs = await alternateRounds([off, all, tenth], loadScenarios[name]);
      const cpu = (entrant: Contender) => median(runs.get(entrant.name)!.map((run) => run.cpu));
      const rps = (entrant: Contender) => median(runs.get(entrant.name)!.map((run) => run.rps));
      const difference = (entrant: Contender) => cpu(entrant) - cpu(off);
      // The target is judged in process below: end to end, rounds of one gateway spread over tens of µs here.
      tracingRows.push(
        `| ${name} | ${rps(off).toFixed(0)} | ${cpu(off).toFixed(0)} | ${rps(all).toFixed(0)} | ${cpu(all).toFixed(0)} | ${difference(all).toFixed(1)} | ${rps(tenth).toFixed(0)} | ${cpu(tenth).toFixed(0)} | ${difference(tenth).toFixed(1)} | ≤ 30 µs more at ratio 1 |`,
      );
      process.stdout.write(`${tracingRows.at(-1)}\n`);
      report[`tracing-${name}`] = Object.fromEntries(runs);
    }
    // What each traced gateway exported and dropped over the whole scenario.
    const spanCounts = async (entrant: Contender) => {
      const text = await (await fetch(`${entrant.url}/metrics`)).text();
      const value = (pattern: RegExp) =>
        text
          .split('\n')
          .filter((line) => pattern.test(line))
          .reduce((sum, line) => sum + Number(line.split(' ').at(-1)), 0);
      return {
        exported: value(/^gateway_trace_spans_exported_total /),
        dropped: value(/^gateway_trace_spans_dropped_total\{/),
      };
    };
    // The last batches go out within the default 5 s schedule delay.
    await new Promise((resolve) => setTimeout(resolve, 6000));
    const spans = { 'ratio 1': await spanCounts(all), 'ratio 0.1': await spanCounts(tenth) };
    const { tracingCost } = await import('./tracing-cost.ts');
    const stage = await tracingCost();
    report.tracing = { spans, exportRequests, exportBytes, inProcess: stage };
    failed ||= stage.ratio1 - stage.off > 30;
    tracingRows.push(
      `| the traced stages alone, in process (spans, attributes, traceparent, export) | – | ${stage.off.toFixed(1)} | – | ${stage.ratio1.toFixed(1)} | ${(stage.ratio1 - stage.off).toFixed(1)} | – | ${stage.ratio01.toFixed(1)} | ${(stage.ratio01 - stage.off).toFixed(1)} | ≤ 30 µs more at ratio 1 |`,
    );
    process.stdout.write(`${tracingRows.at(-1)}\n`);
    failed ||= stage.ratio0 - stage.off > 1;
    tracingRows.push(
      `| the same, every request sampled out (the decision and its traceparent) | – | ${stage.off.toFixed(1)} | – | ${stage.ratio0.toFixed(1)} | ${(stage.ratio0 - stage.off).toFixed(1)} | – | – | – | ≤ 1 µs more |`,
    );
    process.stdout.write(`${tracingRows.at(-1)}\n`);
    tracingRows.push(
      '',
      `Spans exported (dropped): ratio 1 ${spans['ratio 1'].exported} (${spans['ratio 1'].dropped}), ratio 0.1 ${spans['ratio 0.1'].exported} (${spans['ratio 0.1'].dropped}); the receiver took ${exportRequests} exports, ${(exportBytes / 1024 / 1024).toFixed(1)} MB.`,
    );
    process.stdout.write(`${tracingRows.at(-1)}\n`);
  }

  /**
   * What configured features cost a request they do not apply to, on the load scenarios' store: this tree's gateway
   * with nothing configured, against the same with the response cache, a response guardrail and traces configured,
   * the benchmark's key exempt from the cache (`cache: false`) and from every guardrail (`guardrails: []`) and every
   * trace sampled out (ratio 0), in paired rounds (`concurrentRounds`) over `--launches` fresh pairs of processes: the
   * median of every round's CPU ratio. Both read the key from the embedded key file. `--idle-control` configures both
   * alike, which measures the method's own spread.
   */
  const idleRows: string[] = [];
  if (wanted.has('idle-features')) {
    const { newKeyRecord } = await import('../src/core/api-keys.ts');
    const idleGateway = async (
      name: string,
      exempt: boolean,
      extra: NodeJS.ProcessEnv,
      tree: CompiledTree = here,
    ): Promise<Contender> => {
      const dataDir = await mkdtemp(join(work, `data-${name.replace(/\W+/g, '-')}-`));
      const record = newKeyRecord(KEY, exempt ? { name: 'bench', cache: false, guardrails: [] } : { name: 'bench' });
      await writeFile(join(dataDir, 'keys.json'), `${JSON.stringify({ keys: [record] })}\n`, { mode: 0o600 });
      const store = loadRedis ? { REDIS_URL: loadRedis.url } : {};
      const started = await startPinned(
        [...tree.nodeArgs, tree.script('src/main.ts')],
        gatewayEnv(tree, upstream.url, dataDir, { GATEWAY_API_KEYS: '', ...store, ...extra }),
        /"url":"([^"]+)"/,
      );
      return { name, url: started.url, pid: started.pid, slowUrl: '', slowPid: 0, idleMb: 0 };
    };
    await writeFile(join(work, 'nothing-configured.yaml'), '');
    const idleFeatures = new Set(values['idle-features'].split(','));
    const unknownFeatures = [...idleFeatures].filter((name) => !['cache', 'guardrails', 'traces'].includes(name));
    if (unknownFeatures.length) throw new Error(`--idle-features: unknown ${unknownFeatures.join(', ')}`);
    await writeFile(
      join(work, 'features-configured.yaml'),
      [
        ...(idleFeatures.has('cache') ? ['cache:\n  ttlSeconds: 60\n'] : []),
        ...(idleFeatures.has('guardrails')
          ? [
              "guardrails:\n  - { name: no-codes, use: regex, on: response, action: block, patterns: ['PROJECT-[0-9]{4}'] }\n",
            ]
          : []),
      ].join(''),
    );
    const withFeatures = {
      GATEWAY_CONFIG: join(work, 'features-configured.yaml'),
      // Traces alone (GenAI metrics and audit records over OTLP are features of their own), nothing sampled, so nothing
      // is exported: the port need not answer.
      ...(idleFeatures.has('traces')
        ? {
            OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9',
            OTEL_METRICS_EXPORTER: 'none',
            OTEL_LOGS_EXPORTER: 'none',
            OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
            OTEL_TRACES_SAMPLER_ARG: '0',
          }
        : {}),
    };
    const nothing = { GATEWAY_CONFIG: join(work, 'nothing-configured.yaml') };
    // With --idle-control both gateways are configured alike: the figure is then the method's own spread.
    const control = values['idle-control'];
    // With --idle-before, `--before`'s tree against this one, both with nothing configured.
    const againstBefore = values['idle-before'];
    if (againstBefore && !before) throw new Error('--idle-before needs --before');
    const names = values['idle-scenarios'].split(',') as (keyof typeof loadScenarios)[];
    const unknownScenarios = names.filter((name) => !(name in loadScenarios));
    if (unknownScenarios.length) throw new Error(`--idle-scenarios: unknown ${unknownScenarios.join(', ')}`);
    const runs = new Map(
      names.map((name) => [
        name,
        new Map<string, Run[]>([
          ['unconfigured', []],
          ['configured', []],
        ]),
      ]),
    );
    keepLoadOffPinnedCpu(true);
    // A launch differs from the next launch of the same tree by more than its rounds differ from each other, so
    // the rounds are spread over fresh pairs of processes, each started first in turn.
    for (let launch = 0; launch < Number(values.launches); launch += 1) {
      const starts = [
        () => idleGateway('unconfigured', false, nothing, againstBefore ? before : here),
        () => idleGateway('configured', !(control || againstBefore), control || againstBefore ? nothing : withFeatures),
      ];
      // Every step that favours one slot (which starts first, is warmed last, whose load starts first in the first
      // round) turns with the launches: a control run read the second slot 9 % dearer on json while only the start
      // order turned.
      const pair: Contender[] = [];
      for (const startOne of launch % 2 === 0 ? starts : [...starts].reverse()) pair.push(await startOne());
      for (const name of names) {
        for (const [entrant, of] of await concurrentRounds(pair, loadScenarios[name]))
          runs
            .get(name)!
            .get(entrant)!
            .push(...of);
      }
      for (const entrant of pair) await stopTracked(entrant.pid);
    }
    if (!values.paired) keepLoadOffPinnedCpu(false);
    idleRows.push(
      `| scenario${control ? ' (control: both unconfigured)' : againstBefore ? " (before's tree, then this one, both unconfigured)" : ''} | unconfigured req/s | unconfigured CPU µs/req | configured req/s | configured CPU µs/req | difference | 95 % interval | target |`,
      '|---|---:|---:|---:|---:|---:|---:|---|',
    );
    for (const name of names) {
      const of = runs.get(name)!;
      const cpu = (entrant: string) => median(of.get(entrant)!.map((run) => run.cpu));
      const rps = (entrant: string) => median(of.get(entrant)!.map((run) => run.rps));
      const difference = (cpuRatio(of, 'configured', 'unconfigured') - 1) * 100;
      const [low, high] = medianInterval(
        roundRatios(of, 'configured', 'unconfigured').map((ratio) => (ratio - 1) * 100),
      );
      const signed = (value: number) => `${value >= 0 ? '+' : ''}${value.toFixed(1)}`;
      idleRows.push(
        `| ${name} | ${rps('unconfigured').toFixed(0)} | ${cpu('unconfigured').toFixed(0)} | ${rps('configured').toFixed(0)} | ${cpu('configured').toFixed(0)} | ${signed(difference)} % | ${signed(low)} to ${signed(high)} % | ${againstBefore ? 'no higher' : 'within 3 %'} |`,
      );
      process.stdout.write(`${idleRows.at(-1)}\n`);
      report[`idle-features-${name}`] = Object.fromEntries(of);
    }
  }

  /**
   * Responses over WebSocket against HTTP streaming of the same request, on this tree's gateway, in
   * alternating rounds: `connections` sockets each sending its next `response.create` as soon as its
   * previous response ended (`websocket-load.ts`), and autocannon's `connections` streaming
   * `POST /v1/responses`. Responses per second and the gateway's CPU per response, from /proc.
   */
  const websocketRows: string[] = [];
  if (wanted.has('websocket')) {
    const { socketLoad } = await import('./websocket-load.ts');
    const gateway = contenders.at(-1)!;
    const request = { model: 'alpha/gen-5.5', input: 'Benchmark message of a realistic length for a chat turn.' };
    const stream = { path: '/v1/responses', body: JSON.stringify({ ...request, stream: true }) };
    const message = JSON.stringify({ type: 'response.create', ...request });
    const overSockets = async (duration: number): Promise<Run> => {
      const cpuBefore = await cpuMicros(gateway.pid);
      const peak = rssPeak([gateway.pid]);
      const load = await socketLoad(gateway.url, gateway.key ?? KEY, message, connections, duration);
      const peakMb = await peak.stop();
      if (load.failed > 0) throw new Error(`websocket: ${load.failed} responses did not complete`);
      const cpu = (await cpuMicros(gateway.pid)) - cpuBefore;
      return { rps: load.total / (load.ms / 1000), cpu: cpu / load.total, peakMb, total: load.total };
    };
    await measure(gateway, stream.path, stream.body, Math.min(3, seconds));
    await overSockets(Math.min(3, seconds));
    const runs: Record<'http' | 'websocket', Run[]> = { http: [], websocket: [] };
    for (let round = 0; round < rounds; round += 1) {
      const order = round % 2 === 0 ? (['http', 'websocket'] as const) : (['websocket', 'http'] as const);
      for (const entrant of order) {
        const run = entrant === 'http' ? await measure(gateway, stream.path, stream.body) : await overSockets(seconds);
        runs[entrant].push(run);
      }
    }
    report.websocket = runs;
    const rps = (entrant: 'http' | 'websocket') => median(runs[entrant].map((run) => run.rps));
    const cpu = (entrant: 'http' | 'websocket') => median(runs[entrant].map((run) => run.cpu));
    const cells = [rps('http'), cpu('http'), rps('websocket'), cpu('websocket')].map((figure) => figure.toFixed(0));
    const ratios = [rps('websocket') / rps('http'), cpu('websocket') / cpu('http')].map(
      (ratio) => `${ratio.toFixed(2)}×`,
    );
    const header = ['HTTP stream resp/s', 'CPU µs/resp', 'WebSocket resp/s', 'CPU µs/resp', 'ratio', 'CPU ratio'];
    websocketRows.push(
      `| Responses | ${header.join(' | ')} |`,
      '|---|---:|---:|---:|---:|---:|---:|',
      `| ${connections} connections, or sockets | ${[...cells, ...ratios].join(' | ')} |`,
    );
    process.stdout.write(`${websocketRows.join('\n')}\n`);
  }

  /** A figure in MB, or a dash for none (a contender no load scenario of this run measured). */
  const mb = (value: number | undefined) => (value === undefined || !Number.isFinite(value) ? '–' : value.toFixed(0));
  const memoryRows = [
    `| memory (MB) | ${names.join(' | ')} | target |`,
    `|---|${names.map(() => '---:').join('|')}|---:|`,
  ];
  memoryRows.push(
    `| RSS idle, 1.5 s after start | ${contenders.map((contender) => mb(contender.idleMb)).join(' | ')} | – |`,
  );
  if (restMb.size)
    memoryRows.push(
      `| RSS idle at rest, ${values['rest-seconds']} s after start | ${contenders.map((contender) => mb(restMb.get(contender.name))).join(' | ')} | ≤ 80 |`,
    );
  // Peaks of the load scenarios (json, stream, messages-stream) only: a run without them (`--scenarios
  // workers` alone, say) has no such figure, and the row is left out rather than filled with dashes.
  const loadPeaks = contenders.map((contender) => {
    const all = Object.keys(loadScenarios).flatMap((name) =>
      ((report[name] as Record<string, Run[]> | undefined)?.[contender.name] ?? []).map((run) => run.peakMb),
    );
    return all.length ? Math.max(...all) : undefined;
  });
  if (loadPeaks.some((peak) => peak !== undefined))
    memoryRows.push(`| RSS peak under load (${connections} connections) | ${loadPeaks.map(mb).join(' | ')} | ≤ 160 |`);
  if (wanted.has('open-streams')) {
    const held: Awaited<ReturnType<typeof holdStreams>>[] = [];
    for (const contender of contenders) {
      const outcome = await holdStreams(contender, openStreams);
      held.push(outcome);
      process.stdout.write(`open streams through ${contender.name}: ${JSON.stringify(outcome)}\n`);
    }
    report['open-streams'] = Object.fromEntries(contenders.map((contender, index) => [contender.name, held[index]]));
    memoryRows.push(
      `| RSS peak, ${openStreams} streams opened at once (most open together; dropped) | ${held.map((outcome) => `${outcome.peakMb.toFixed(0)} (${outcome.mostOpen}; ${outcome.dropped})`).join(' | ')} | ≤ 300, none dropped |`,
    );
    memoryRows.push(
      `| worst /healthz answer while they are open and end together (ms) | ${held.map((outcome) => outcome.worstHealthMs.toFixed(0)).join(' | ')} | ≤ 100 |`,
    );
  }

  const table = [
    `Benchmark ${report.date as string}, node ${process.version}, ${report.cpus as number} CPUs (load average at start ${(report.loadavg as number[]).map((value) => value.toFixed(1)).join(' ')}), ` +
      `${connections} connections, ${rounds} alternating rounds of ${seconds} s, medians, gateways on the ${values.store} store; ratios against the bare proxy.`,
    '',
    // The load scenarios' table, when any of them ran (the header alone otherwise).
    ...(rows.length > 2 ? [...rows, ''] : []),
    ...(unloadedRows.length ? [...unloadedRows, ''] : []),
    ...(workerRows.length
      ? ['Two workers (`GATEWAY_WORKERS=2`, Redis) against the same bare proxy:', '', ...workerRows, '']
      : []),
    ...(admissionRows.length
      ? [
          'Admission with token and money limits on, against the same gateway process without them (alternating rounds):',
          '',
          ...admissionRows,
          '',
        ]
      : []),
    ...(cacheRows.length
      ? [
          'The response cache: misses against the same gateway with the cache off, hits against the bare proxy (alternating rounds):',
          '',
          ...cacheRows,
          '',
        ]
      : []),
    ...(guardrailRows.length
      ? [
          'Guardrails (a regex and a pii guardrail on both phases) against the same gateway with none configured (alternating rounds), then in process:',
          '',
          ...guardrailRows,
          '',
        ]
      : []),
    ...(tracingRows.length
      ? [
          'Tracing (OTLP/HTTP protobuf to a local receiver) on at ratio 1 and 0.1, against the same gateway with it off (alternating rounds):',
          '',
          ...tracingRows,
          '',
        ]
      : []),
    ...(idleRows.length
      ? [
          'Cache, guardrails and traces configured but not applying to the benchmark key (exempt, sampled out), against the same gateway with nothing configured (alternating rounds):',
          '',
          ...idleRows,
          '',
        ]
      : []),
    ...(websocketRows.length
      ? ['Responses over WebSocket and HTTP streaming (alternating rounds):', '', ...websocketRows, '']
      : []),
    ...memoryRows,
    '',
  ].join('\n');
  process.stdout.write(`\n${table}`);
  await mkdir('bench/results', { recursive: true });
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  await writeFile(join('bench/results', `run-${stamp}.json`), `${JSON.stringify(report, null, 2)}\n`);
  await writeFile(join('bench/results', `run-${stamp}.md`), table);
  // runCleanly stops every process started and removes the work folder, then exits with this code.
  return failed ? 1 : 0;
});
