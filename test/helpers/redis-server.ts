import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';

const run = promisify(execFile);

/** A free TCP port on 127.0.0.1, as the OS hands it out. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}

async function waitForPing(port: number, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const client = new Redis({
      port,
      host: '127.0.0.1',
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    client.on('error', () => {});
    try {
      await client.connect();
      await client.ping();
      client.disconnect();
      return;
    } catch (error) {
      client.disconnect();
      if (Date.now() > deadline) throw new Error(`redis-server on port ${port} did not answer: ${String(error)}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

/** Calls of the named commands a Redis has run so far (INFO commandstats; a script's own commands count too). */
export async function commandCalls(port: number, pattern: RegExp): Promise<number> {
  const client = new Redis({ port, host: '127.0.0.1' });
  try {
    const info = await client.info('commandstats');
    return [...info.matchAll(/^cmdstat_([a-z|]+):calls=(\d+)/gm)]
      .filter((match) => pattern.test(match[1]!))
      .reduce((sum, match) => sum + Number(match[2]), 0);
  } finally {
    client.disconnect();
  }
}

/** A real redis-server the test owns: started on a free port, stoppable and restartable on the same port. */
export class TestRedisServer {
  private process: ChildProcess | undefined;

  private constructor(
    readonly port: number,
    private readonly extraArgs: readonly string[],
    private readonly dir: string,
  ) {}

  static async start(options: { port?: number; args?: readonly string[] } = {}): Promise<TestRedisServer> {
    const dir = await mkdtemp(join(tmpdir(), 'gateway-redis-'));
    const server = new TestRedisServer(options.port ?? (await freePort()), options.args ?? [], dir);
    await server.startProcess();
    return server;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get running(): boolean {
    return this.process !== undefined;
  }

  private async startProcess(): Promise<void> {
    const child = spawn(
      'redis-server',
      [
        '--port',
        String(this.port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        'no',
        '--dir',
        this.dir,
        ...this.extraArgs,
      ],
      { stdio: 'ignore' },
    );
    this.process = child;
    child.once('exit', () => {
      if (this.process === child) this.process = undefined;
    });
    await waitForPing(this.port);
  }

  /** Stops the server (SIGKILL by default, as a crash would). Its data is gone. */
  async stop(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const child = this.process;
    if (!child) return;
    this.process = undefined;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGCONT');
    child.kill(signal);
    await exited;
  }

  /** Freezes the server (SIGSTOP): connections stay open and nothing answers, as in a stall. */
  pause(): void {
    this.process?.kill('SIGSTOP');
  }

  /** Lets a paused server go on (SIGCONT). */
  resume(): void {
    this.process?.kill('SIGCONT');
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.startProcess();
  }

  async close(): Promise<void> {
    await this.stop();
    await rm(this.dir, { recursive: true, force: true });
  }
}

/** A real Redis Cluster of three masters (no replicas), started for one test suite. */
export class TestRedisCluster {
  private constructor(readonly nodes: readonly TestRedisServer[]) {}

  static async start(): Promise<TestRedisCluster> {
    const nodes: TestRedisServer[] = [];
    for (let index = 0; index < 3; index += 1) {
      nodes.push(
        await TestRedisServer.start({
          args: ['--cluster-enabled', 'yes', '--cluster-config-file', `nodes-${index}.conf`],
        }),
      );
    }
    await run('redis-cli', [
      '--cluster',
      'create',
      ...nodes.map((node) => `127.0.0.1:${node.port}`),
      '--cluster-replicas',
      '0',
      '--cluster-yes',
    ]);
    const cluster = new TestRedisCluster(nodes);
    await cluster.waitUntilReady();
    return cluster;
  }

  get startupNodes(): { host: string; port: number }[] {
    return this.nodes.map((node) => ({ host: '127.0.0.1', port: node.port }));
  }

  private async waitUntilReady(timeoutMs = 10000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const { stdout } = await run('redis-cli', ['-p', String(this.nodes[0]!.port), 'cluster', 'info']);
      if (stdout.includes('cluster_state:ok')) return;
      if (Date.now() > deadline) throw new Error(`Redis Cluster did not become ready:\n${stdout}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  async close(): Promise<void> {
    await Promise.all(this.nodes.map((node) => node.close()));
  }
}
