import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

/**
 * Every process a benchmark starts, so that none outlives it. Each starts in a process group of its
 * own (`detached`), so that one signal reaches it and whatever it starts in turn (a cluster's workers),
 * and a Ctrl-C on the terminal reaches the benchmark alone, which then stops them in order:
 * {@link stopAll} stops every group ({@link stopTracked}: SIGTERM, SIGKILL to what still runs after a
 * grace period), then runs the other clean-ups registered ({@link onStop}: temporary folders).
 * {@link runCleanly} runs a benchmark's body and stops everything however it ends: done, thrown, or
 * SIGINT/SIGTERM/SIGHUP of the benchmark (it then exits with 128 + the signal's number). Linux: which
 * processes still run is read from /proc.
 */

/** Process groups started (each the pid of its first process). */
const groups = new Set<number>();
const cleanups: (() => Promise<unknown>)[] = [];
/** Set once the benchmark stops: no process may start from then on. */
let stopped: Promise<void> | undefined;
let signalled: { name: NodeJS.Signals; code: number; at: number } | undefined;

/** The state and process group of every process, from /proc (Linux). */
function processTable(): { pid: number; state: string; pgrp: number }[] | undefined {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return undefined;
  }
  const table: { pid: number; state: string; pgrp: number }[] = [];
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // `pid (comm) state ppid pgrp …`; comm may hold spaces and parentheses, so fields count from the last `)`.
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      table.push({ pid: Number(entry), state: state!, pgrp: Number(pgrp) });
    } catch {
      // Ended while being read.
    }
  }
  return table;
}

/** The processes of a group still running (a zombie, left to an init that does not reap it, no longer runs). */
function groupMembers(pgid: number): number[] | undefined {
  return processTable()
    ?.filter((entry) => entry.pgrp === pgid && entry.state !== 'Z' && entry.state !== 'X')
    .map((entry) => entry.pid);
}

function groupRuns(pgid: number): boolean {
  const members = groupMembers(pgid);
  if (members) return members.length > 0;
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // Gone already.
  }
}

const signalGroup = (pgid: number, name: NodeJS.Signals) => signal(-pgid, name);

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function ended(pgid: number, withinMs: number): Promise<boolean> {
  for (const deadline = Date.now() + withinMs; Date.now() < deadline; await pause(50))
    if (!groupRuns(pgid)) return true;
  return !groupRuns(pgid);
}

/** Starts a process in a group of its own, tracked until the benchmark ends. */
export function spawnTracked(command: string, args: readonly string[], options: SpawnOptions = {}): ChildProcess {
  if (stopped) throw new Error(`not starting ${command}: the benchmark is stopping`);
  const child = spawn(command, args, { ...options, detached: true });
  if (child.pid !== undefined) groups.add(child.pid);
  // Without a listener a failure to start (ENOENT) would be thrown from the event loop; callers see the exit.
  child.on('error', () => {});
  return child;
}

/** Runs a tracked process to its end: resolves with its output, rejects when it fails (with its output). */
export function runTracked(command: string, args: readonly string[], options: SpawnOptions = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    let child: ChildProcess;
    try {
      child = spawnTracked(command, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
    } catch (error) {
      reject(error);
      return;
    }
    let output = '';
    child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('error', reject);
    child.once('close', (code, signal) => {
      if (child.pid !== undefined && !groupRuns(child.pid)) groups.delete(child.pid);
      if (code === 0) resolve(output);
      else
        reject(
          new Error(`${command} ${args.join(' ')} failed (${signal ?? `exit code ${code}`}):\n${output.slice(-4000)}`),
        );
    });
  });
}

/**
 * Stops a tracked process and everything in its group, and resolves once none of them runs any more:
 * SIGTERM; a second SIGTERM a second later if any still runs (a gateway then ends the requests it still
 * drains, e.g. those of load-generator connections cut mid-stream but left open: it would wait for them
 * `GATEWAY_DRAIN_MS`, 2 minutes by default; the two are a second apart, as signals sent at once may
 * arrive as one); SIGKILL once `graceMs` have passed since the first. SIGKILL goes to the processes the
 * first one started (a cluster's workers) before it, so that it reaps them rather than leave them to init.
 */
export async function stopTracked(child: ChildProcess | number, graceMs = 5000): Promise<void> {
  const pgid = typeof child === 'number' ? child : child.pid;
  if (pgid === undefined || !groups.has(pgid)) return;
  if (groupRuns(pgid)) {
    signalGroup(pgid, 'SIGTERM');
    if (!(await ended(pgid, Math.min(1000, graceMs)))) {
      signalGroup(pgid, 'SIGTERM');
      if (!(await ended(pgid, Math.max(0, graceMs - 1000)))) {
        process.stderr.write(
          `bench: process group ${pgid} (${groupMembers(pgid)?.join(', ') ?? '?'}) still running ${graceMs} ms after SIGTERM: SIGKILL\n`,
        );
        for (const pid of groupMembers(pgid) ?? []) if (pid !== pgid) signal(pid, 'SIGKILL');
        if (!(await ended(pgid, 1000))) signalGroup(pgid, 'SIGKILL');
        await ended(pgid, 2000);
      }
    }
  }
  groups.delete(pgid);
}

/** The `--env NAME=value` flags of a benchmark script as environment entries for the process it starts. */
export function envFlags(pairs: readonly string[]): Record<string, string> {
  return Object.fromEntries(pairs.map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]));
}

/** Runs `cleanup` when the benchmark stops, after every process has ended (in the order registered). */
export function onStop(cleanup: () => Promise<unknown>): void {
  cleanups.push(cleanup);
}

/** Stops every tracked process group (together), then runs the clean-ups. Once: later calls share the first. */
export function stopAll(): Promise<void> {
  stopped ??= (async () => {
    await Promise.all([...groups].map((pgid) => stopTracked(pgid)));
    for (const cleanup of cleanups)
      await cleanup().catch((error: unknown) => process.stderr.write(`bench: clean-up failed: ${String(error)}\n`));
  })();
  return stopped;
}

/** The last resort, synchronous (on `exit`): SIGKILL to every group still running. */
function killAllNow(): void {
  for (const pgid of groups) if (groupRuns(pgid)) signalGroup(pgid, 'SIGKILL');
}

const exitCodes: Partial<Record<NodeJS.Signals, number>> = { SIGHUP: 129, SIGINT: 130, SIGTERM: 143 };

/**
 * Runs a benchmark's body, then stops every process it started and exits with the code it returned;
 * 1 when it threw, 128 + the signal's number when SIGINT, SIGTERM or SIGHUP ended it. A second signal
 * more than a second after the first (not the same Ctrl-C passed on by npm) skips the grace period.
 */
export async function runCleanly(body: () => Promise<number>): Promise<never> {
  for (const [name, code] of Object.entries(exitCodes) as [NodeJS.Signals, number][]) {
    process.on(name, () => {
      if (signalled) {
        if (Date.now() - signalled.at > 1000) {
          killAllNow();
          process.exit(signalled.code);
        }
        return;
      }
      signalled = { name, code, at: Date.now() };
      process.stderr.write(`\nbench: ${name}: stopping every process it started\n`);
      void stopAll().finally(() => process.exit(code));
    });
  }
  process.on('exit', killAllNow);
  const fail = (error: unknown) => {
    if (!signalled)
      process.stderr.write(`bench: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    void stopAll().finally(() => process.exit(signalled?.code ?? 1));
  };
  process.on('uncaughtException', fail);
  process.on('unhandledRejection', fail);
  let code: number;
  try {
    code = await body();
  } catch (error) {
    // Once a signal has stopped the processes, the body fails on them: that is no news.
    if (!signalled)
      process.stderr.write(`bench: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    code = 1;
  }
  await stopAll();
  process.exit(signalled?.code ?? code);
}
