import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** A gateway started as its own process (`node src/main.ts`), as operators run it. */
export class GatewayProcess {
  readonly logs: string[] = [];
  private constructor(
    private readonly child: ChildProcess,
    readonly url: string,
  ) {}

  static async start(env: NodeJS.ProcessEnv): Promise<GatewayProcess> {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const logs: string[] = [];
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`gateway did not start:\n${logs.join('')}`)), 15_000);
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
    const gateway = new GatewayProcess(child, url);
    gateway.logs.push(...logs);
    child.stdout!.on('data', (chunk: Buffer) => gateway.logs.push(chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => gateway.logs.push(chunk.toString()));
    return gateway;
  }

  /** Stops it with SIGTERM (graceful shutdown) and waits for the exit. */
  async stop(): Promise<number | null> {
    if (this.child.exitCode !== null) return this.child.exitCode;
    const exited = new Promise<number | null>((resolve) => this.child.once('exit', resolve));
    this.child.kill('SIGTERM');
    return exited;
  }
}

/** Runs the gateway's entry point expecting it to refuse to start; returns what it printed and its exit code. */
export async function startupFailure(env: NodeJS.ProcessEnv): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, HOST: '127.0.0.1', PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  return { code, output };
}
