import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/**
 * How the process is started: the source under tsx (fast), the compiled build as `npm start` runs it
 * once built (`node dist/src/main.js`; `npm test` builds it first), or `npm start` itself.
 */
export type StartCommand = 'source' | 'compiled' | 'npm-start';

const COMMANDS: Record<StartCommand, [string, string[]]> = {
  source: [process.execPath, ['--import', 'tsx', 'src/main.ts']],
  compiled: [process.execPath, ['dist/src/main.js']],
  'npm-start': ['npm', ['start', '--silent']],
};

/** The compiled gateway's entry point; a clear failure when it was not built. */
export const COMPILED_MAIN = join(ROOT, 'dist', 'src', 'main.js');

/**
 * Waits for a started gateway's listening line and gives back its URL; every output chunk is kept in
 * `logs` meanwhile. Fails with the output so far when the process exits first or `timeoutMs` passes.
 */
export function listeningUrl(child: ChildProcess, logs: string[], timeoutMs: number): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`gateway did not start:\n${logs.join('')}`)), timeoutMs);
    const onData = (chunk: Buffer) => {
      logs.push(chunk.toString());
      const match = /"url":"(http:\/\/[^"]+)"/.exec(logs.join(''));
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`gateway exited with ${code}:\n${logs.join('')}`));
    });
  });
}

/** A gateway started as its own process (`node src/main.ts`, or `npm start`), as operators run it. */
export class GatewayProcess {
  readonly logs: string[] = [];
  private constructor(
    private readonly child: ChildProcess,
    readonly url: string,
  ) {}

  static async start(env: NodeJS.ProcessEnv, command: StartCommand = 'source'): Promise<GatewayProcess> {
    if (command === 'compiled' && !existsSync(COMPILED_MAIN))
      throw new Error(`${COMPILED_MAIN} is missing: run npm run build first (npm test does)`);
    const [file, args] = COMMANDS[command];
    const child = spawn(file, args, {
      cwd: ROOT,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
      // npm in its own process group, so that kill() also ends the node process it started.
      detached: command === 'npm-start',
    });
    const logs: string[] = [];
    const url = await listeningUrl(child, logs, command === 'npm-start' ? 90_000 : 15_000);
    const gateway = new GatewayProcess(child, url);
    gateway.logs.push(...logs);
    child.stdout!.on('data', (chunk: Buffer) => gateway.logs.push(chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => gateway.logs.push(chunk.toString()));
    return gateway;
  }

  /** The started process's id (npm's, with `npm start`). */
  get pid(): number {
    return this.child.pid!;
  }

  get exitCode(): number | null {
    return this.child.exitCode;
  }

  /** Sends a signal to the started process (npm, with `npm start`). */
  signal(signal: NodeJS.Signals): void {
    this.child.kill(signal);
  }

  /** Resolves with the exit code once the process has exited. */
  exited(): Promise<number | null> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return Promise.resolve(this.child.exitCode);
    return new Promise((resolve) => this.child.once('exit', (code) => resolve(code)));
  }

  /** Stops it with SIGTERM (graceful shutdown) and waits for the exit. */
  async stop(): Promise<number | null> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return this.child.exitCode;
    const exited = this.exited();
    this.child.kill('SIGTERM');
    return exited;
  }

  /** Ends it at once (SIGKILL), e.g. after a failed test. */
  async kill(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = this.exited();
    try {
      process.kill(-this.child.pid!, 'SIGKILL');
    } catch {
      this.child.kill('SIGKILL');
    }
    await exited;
  }
}

/**
 * Runs the gateway's entry point expecting it to refuse to start; returns what it printed and its exit
 * code. One that starts after all is killed after `timeoutMs` (code null), so no gateway outlives the test.
 */
export async function startupFailure(
  env: NodeJS.ProcessEnv,
  timeoutMs = 15_000,
): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, HOST: '127.0.0.1', PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  clearTimeout(timer);
  return { code, output };
}
