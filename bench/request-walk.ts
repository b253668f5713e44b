import { Session } from 'node:inspector';
import { relative, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { EVENTS } from '../src/core/diagnostics.ts';
import { startTestGateway, TEST_KEY, type TestGateway } from '../test/helpers/test-gateway.ts';

/**
 * The walk of one streaming Chat Completions request through the gateway's own code: the files of
 * `src/` a function of which ran for it, in the order the request reached them, and how often the walk
 * came back to a folder it had left. Measured with V8's precise coverage (the counters reset after a
 * warm-up, then read at each of the request's events, so that each file is placed in the stretch of
 * the request where it first ran; within a stretch, files keep the pipeline's order of folders).
 *
 *   node --import tsx bench/request-walk.ts [--features]
 *
 * `--features` turns on the response cache, a response guardrail and traces (to a collector that is
 * not there: spans are dropped, as with a collector that is down).
 */

interface FunctionCoverage {
  readonly ranges: readonly { readonly count: number }[];
}
interface ScriptCoverage {
  readonly url: string;
  readonly functions: readonly FunctionCoverage[];
}

const ROOT = fileURLToPath(new URL('..', import.meta.url));

function post<T>(session: Session, method: string, params: object = {}): T {
  let result: T | undefined;
  let failure: Error | null = null;
  // An in-process session answers before `post` returns.
  session.post(method, params, (error, answer) => {
    failure = error;
    result = answer as T;
  });
  if (failure) throw failure;
  return result!;
}

/** The files of src/ with a function that ran since the last read. */
function ranSince(session: Session): string[] {
  const { result } = post<{ result: ScriptCoverage[] }>(session, 'Profiler.takePreciseCoverage');
  const files: string[] = [];
  for (const script of result) {
    if (!script.url.startsWith('file://')) continue;
    const path = relative(ROOT, fileURLToPath(script.url));
    if (!path.startsWith('src/')) continue;
    if (script.functions.some((fn) => fn.ranges[0]!.count > 0)) files.push(path);
  }
  return files;
}

const folderOf = (path: string) => path.slice(0, path.lastIndexOf('/'));

export async function requestWalk(features: boolean): Promise<{ files: string[]; returns: number; folders: number }> {
  const dir = await mkdtemp(join(tmpdir(), 'gateway-walk-'));
  const config = join(dir, 'gateway.yaml');
  await writeFile(
    config,
    features
      ? "cache:\n  ttlSeconds: 60\nguardrails:\n  - { name: no-codes, use: regex, on: response, action: block, patterns: ['PROJECT-[0-9]{4}'] }\n"
      : 'logLevel: silent\n',
  );
  const env = features
    ? { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9', LOG_LEVEL: 'silent' }
    : { LOG_LEVEL: 'silent' };
  const test: TestGateway = await startTestGateway({ configFile: config, env });
  const session = new Session();
  session.connect();
  const ask = async (prompt: string) => {
    const response = await fetch(`${test.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'alpha-latest', stream: true, messages: [{ role: 'user', content: prompt }] }),
    });
    await response.text();
  };
  try {
    for (let warm = 0; warm < 5; warm++) {
      await ask(`warm-up ${warm}`);
      await test.gateway.flushUsage();
    }
    post(session, 'Profiler.enable');
    post(session, 'Profiler.startPreciseCoverage', { callCount: true, detailed: false });
    ranSince(session);
    const stretches: string[][] = [];
    const cut = () => stretches.push(ranSince(session));
    const off = [
      EVENTS.exchangeStart,
      EVENTS.authenticated,
      EVENTS.attemptStart,
      EVENTS.attemptHeaders,
      EVENTS.streamOpened,
      EVENTS.exchangeRecorded,
      EVENTS.exchangeEnd,
    ].map((event) => event.subscribe(test.gateway.source, cut));
    // The walk ends with the exchange (its usage record handed to the store); the store's periodic flush to disk is
    // not the request's.
    const ended = new Promise<void>((resolve) => {
      const off = EVENTS.exchangeEnd.subscribe(test.gateway.source, () => {
        off();
        setImmediate(resolve);
      });
    });
    await ask('the one request walked');
    await ended;
    cut();
    off.forEach((unsubscribe) => unsubscribe());
    post(session, 'Profiler.stopPreciseCoverage');
    const order: string[] = [];
    for (const stretch of stretches) {
      // Within a stretch: the pipeline's order of floors, top down.
      const rank = (path: string) =>
        [
          'src/server',
          'src/control-plane',
          'src/data-plane',
          'src/stores',
          'src/usage',
          'src/ops',
          'src/guardrails',
          'src/core',
          'src/plugins',
        ].findIndex((floor) => path.startsWith(floor));
      for (const file of [...stretch].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b)))
        if (!order.includes(file)) order.push(file);
    }
    const left = new Set<string>();
    let returns = 0;
    let current: string | undefined;
    for (const file of order) {
      const folder = folderOf(file);
      if (folder === current) continue;
      if (current !== undefined) left.add(current);
      if (left.has(folder)) returns += 1;
      current = folder;
    }
    return { files: order, returns, folders: new Set(order.map(folderOf)).size };
  } finally {
    session.disconnect();
    await test.close();
    await rm(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const walk = await requestWalk(process.argv.includes('--features'));
  process.stdout.write(`${walk.files.map((file, index) => `${String(index + 1).padStart(2)}. ${file}`).join('\n')}\n`);
  process.stdout.write(
    `${walk.files.length} files in ${walk.folders} folders; ${walk.returns} returns to a folder left\n`,
  );
}
