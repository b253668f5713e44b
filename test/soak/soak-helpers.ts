import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { listeningUrl } from '../helpers/gateway-process.ts';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface SoakGateway {
  readonly child: ChildProcess;
  readonly url: string;
  readonly logs: string[];
  /** Resolves with the exit code. */
  readonly exited: Promise<number | null>;
}

/**
 * Starts the gateway from source as its own process on loopback, optionally under a lower open-file
 * limit (`ulimit -n`), and waits for its listening line.
 */
export async function startSoakGateway(
  env: NodeJS.ProcessEnv,
  options: { fdLimit?: number } = {},
): Promise<SoakGateway> {
  const command = `${options.fdLimit ? `ulimit -n ${options.fdLimit} && ` : ''}exec "${process.execPath}" --import tsx src/main.ts`;
  const child = spawn('bash', ['-c', command], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: string[] = [];
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const url = await listeningUrl(child, logs, 30_000);
  return { child, url, logs, exited };
}

/** Resident memory of a process in MB, from /proc. */
export function rssMb(pid: number): number {
  const match = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match ? Number(match[1]) / 1024 : Number.NaN;
}

/** Least-squares slope of y over x. */
export function slope(points: readonly (readonly [number, number])[]): number {
  const n = points.length;
  if (n < 2) return 0;
  const mx = points.reduce((sum, [x]) => sum + x, 0) / n;
  const my = points.reduce((sum, [, y]) => sum + y, 0) / n;
  const num = points.reduce((sum, [x, y]) => sum + (x - mx) * (y - my), 0);
  const den = points.reduce((sum, [x]) => sum + (x - mx) ** 2, 0);
  return den === 0 ? 0 : num / den;
}
