// Bounded fault run (not part of `npm test`): the gateway under `ulimit -n 1024` gets 1,100 idle
// connections. Expected: connections past the cap (half the fd limit) are refused at once with a 503,
// a new client is answered (503, not a stall) while the idle ones are held, and the gateway serves
// 200 again once the headers timeout cut them. Exits 1 if a request stalls (is answered only once the
// headers timeout cut idle connections) or it never recovers.
import { mkdtemp, rm } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { startSoakGateway } from './soak-helpers.ts';

const IDLE = Number(process.env.IDLE_CONNECTIONS ?? 1100);
const FD_LIMIT = Number(process.env.FD_LIMIT ?? 1024);
const HEADERS_TIMEOUT_MS = 3000;

async function timed<T>(work: () => Promise<T>): Promise<[T, number]> {
  const started = performance.now();
  const result = await work();
  return [result, Math.round(performance.now() - started)];
}

async function health(url: string): Promise<number> {
  try {
    const response = await request(`${url}/healthz`, { reset: true, headersTimeout: 10_000, bodyTimeout: 10_000 });
    await response.body.dump();
    return response.statusCode;
  } catch {
    return 0;
  }
}

const dataDir = await mkdtemp(join(tmpdir(), 'soak-fd-'));
// Every connection comes from one address: its share is the whole cap, so that the global cap is what is run.
const CAP = String(Math.floor(FD_LIMIT / 2));
const gateway = await startSoakGateway(
  {
    GATEWAY_DATA_DIR: dataDir,
    GATEWAY_HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
    GATEWAY_REQUEST_TIMEOUT_MS: '10000',
    GATEWAY_MAX_CONNECTIONS: CAP,
    GATEWAY_MAX_CONNECTIONS_PER_ADDRESS: CAP,
  },
  { fdLimit: FD_LIMIT },
);
const { hostname, port } = new URL(gateway.url);
const sockets: Socket[] = [];
let refused = 0;
/** Idle connections that were accepted (no 503) and have closed since: the headers timeout cut them. */
let cut = 0;
let failed = false;
try {
  await Promise.all(
    Array.from(
      { length: IDLE },
      () =>
        new Promise<void>((resolve) => {
          const socket = connect(Number(port), hostname);
          sockets.push(socket);
          let text = '';
          socket.on('data', (chunk: Buffer) => {
            text += chunk.toString();
            if (text.startsWith('HTTP/1.1 503')) refused += 1;
          });
          let connected = false;
          socket.once('close', () => {
            if (connected && !text.startsWith('HTTP/1.1 503')) cut += 1;
          });
          socket.on('error', () => resolve());
          socket.once('connect', () => {
            connected = true;
            resolve();
          });
        }),
    ),
  );
  const [during, duringMs] = await timed(() => health(gateway.url));
  // Answered while every accepted idle connection was still held, not once the headers timeout freed some.
  const cutBefore = cut;
  let recovered = 0;
  const [, recoveryMs] = await timed(async () => {
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline && (recovered = await health(gateway.url)) !== 200)
      await new Promise((resolve) => setTimeout(resolve, 100));
  });
  console.log(`fd limit ${FD_LIMIT}, ${IDLE} idle connections opened, ${refused} refused at once with 503`);
  console.log(
    `new request while they are held: ${during} in ${duringMs} ms, ${cutBefore} idle connections cut by then`,
  );
  console.log(`200 again after ${recoveryMs} ms (headers timeout ${HEADERS_TIMEOUT_MS} ms): ${recovered === 200}`);
  failed = during === 0 || cutBefore !== 0 || recovered !== 200;
} finally {
  sockets.forEach((socket) => socket.destroy());
  gateway.child.kill('SIGTERM');
  console.log(`gateway exit code after SIGTERM: ${await gateway.exited}`);
  await rm(dataDir, { recursive: true, force: true });
}
process.exitCode = failed ? 1 : 0;
