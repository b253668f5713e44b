import { Session } from 'node:inspector/promises';
import { Writable } from 'node:stream';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { startTestGateway, TEST_KEY } from '../test/helpers/test-gateway.ts';
import { envFlags } from './processes.ts';

/**
 * Where the gateway allocates per request: the real gateway in this process in front of the mock upstreams, loaded
 * with Chat Completions requests (`--scenario json|stream`) over `--connections` connections, under V8's sampling heap
 * profiler with the objects later collected kept in the profile, so the figures are bytes allocated, not bytes live.
 * Each sample is charged to the innermost frame of the gateway's own code (`src/`, `providers/`) on its stack, so
 * node's and the libraries' allocations count where the gateway called them. The load's own allocations (the undici
 * client in this process) come out as "outside the gateway".
 * `node --import tsx bench/allocation-sites.ts [--scenario stream] [--requests 5000] [--env NAME=value ...]`
 */
const { values } = parseArgs({
  options: {
    scenario: { type: 'string', default: 'json' },
    requests: { type: 'string', default: '5000' },
    connections: { type: 'string', default: '16' },
    top: { type: 'string', default: '30' },
    /** Further environment of the gateway, `NAME=value` (repeatable), e.g. a trace sampler. */
    env: { type: 'string', multiple: true, default: [] },
  },
});
if (!['json', 'stream'].includes(values.scenario)) throw new Error('--scenario must be json or stream');
const requests = Number(values.requests);
const connections = Number(values.connections);

interface ProfileNode {
  readonly callFrame: { readonly functionName: string; readonly url: string };
  readonly selfSize: number;
  readonly children: readonly ProfileNode[];
}

const gateway = await startTestGateway({
  logTo: new Writable({ write: (_chunk, _encoding, done) => done() }),
  env: {
    RATE_LIMIT_MAX: '100000000',
    GATEWAY_KEY_CONCURRENCY: '100000',
    LOG_LEVEL: 'info',
    ...envFlags(values.env),
  },
});
const pool = new Pool(gateway.url, { connections });
const body = JSON.stringify({
  model: 'delta/delta-4.7',
  messages: [{ role: 'user', content: 'Benchmark message of a realistic length for a chat turn.' }],
  ...(values.scenario === 'stream' ? { stream: true, stream_options: { include_usage: true } } : {}),
});
const load = async (count: number) => {
  let sent = 0;
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (sent < count) {
        sent += 1;
        const answer = await pool.request({
          path: '/v1/chat/completions',
          method: 'POST',
          headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' },
          body,
        });
        await answer.body.text();
        if (answer.statusCode !== 200) throw new Error(`answered ${answer.statusCode}`);
      }
    }),
  );
};

try {
  // Warmed up first, so that what is made once (compiled code, children of metrics, caches) is not counted.
  await load(Math.min(3000, requests));
  const session = new Session();
  session.connect();
  await session.post('HeapProfiler.startSampling', {
    samplingInterval: 256,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  await load(requests);
  const { profile } = await session.post('HeapProfiler.stopSampling');
  session.disconnect();
  const bySite = new Map<string, number>();
  let total = 0;
  const walk = (node: ProfileNode, owner: string) => {
    const { url, functionName } = node.callFrame;
    const own = /\/(src|providers)\//.exec(url);
    const site = own ? `${url.slice(own.index + 1)} ${functionName || '(anonymous)'}` : owner;
    total += node.selfSize;
    if (node.selfSize > 0) bySite.set(site, (bySite.get(site) ?? 0) + node.selfSize);
    for (const child of node.children) walk(child, site);
  };
  walk(profile.head as unknown as ProfileNode, 'outside the gateway (node, the load)');
  const outside = bySite.get('outside the gateway (node, the load)') ?? 0;
  process.stdout.write(
    `${values.scenario}: ${requests} requests, ${(total / requests / 1024).toFixed(1)} KB allocated per request, ` +
      `${((total - outside) / requests / 1024).toFixed(1)} KB of it under the gateway's code\n` +
      '| bytes/request | where (innermost gateway frame) |\n|---:|---|\n',
  );
  for (const [site, bytes] of [...bySite].sort((a, b) => b[1] - a[1]).slice(0, Number(values.top)))
    process.stdout.write(`| ${Math.round(bytes / requests)} | ${site} |\n`);
} finally {
  await pool.close();
  await gateway.close();
}
