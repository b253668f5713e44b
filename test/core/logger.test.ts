import { expect } from 'chai';
import { spawn, type ChildProcess, type StdioOptions } from 'node:child_process';
import type { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { pino } from 'pino';
import { createLogger } from '../../src/core/logger.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** Starts a script with the gateway's loggers on standard output. */
function start(script: string, stdio: StdioOptions, env?: NodeJS.ProcessEnv): ChildProcess {
  return spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      '--input-type=module',
      '-e',
      `import { createAccessLogger, createLogger } from '../src/core/logger.ts';\n${script}`,
    ],
    {
      cwd: ROOT,
      stdio,
      env: env === undefined ? undefined : { ...process.env, ...env },
    },
  );
}

/**
 * Runs a script with the gateway's loggers on standard output; gives back its output, one entry per
 * chunk read. `onChunk` sees each chunk as it comes, with the child's standard input to answer on.
 */
function run(
  script: string,
  onChunk?: (text: string, stdin: Writable) => void,
  env?: NodeJS.ProcessEnv,
): Promise<{ stdout: string; chunks: string[] }> {
  const child = start(script, [onChunk ? 'pipe' : 'ignore', 'pipe', 'inherit'], env);
  const chunks: string[] = [];
  child.stdout!.on('data', (chunk: Buffer) => {
    chunks.push(chunk.toString());
    onChunk?.(chunk.toString(), child.stdin!);
  });
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', () => resolve({ stdout: chunks.join(''), chunks }));
  });
}

/** The `index` of each line whose `msg` is `msg`, in the order the lines came. */
function indexes(stdout: string, msg: string): number[] {
  return stdout
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { msg?: string; index?: number })
    .filter((line) => line.msg === msg)
    .map((line) => line.index!);
}

const upTo500 = Array.from({ length: 500 }, (_, index) => index);

describe('access log on standard output', function () {
  this.timeout(20_000);

  it('keeps every line, in order, when the process exits right after writing them', async () => {
    const { stdout } = await run(`
      const access = createAccessLogger(createLogger('info'));
      for (let index = 0; index < 500; index += 1) access.info({ index }, 'request');
      process.exit(0);
    `);
    expect(indexes(stdout, 'request')).to.deep.equal(upTo500);
  });

  it('keeps every line of both logs, in order, when a write issued before the exit could not start before it', async () => {
    // libuv's pool has one thread here, held by a read of standard input until the exit handlers have
    // run (the child's own comes last and says so). A write handed to the pool before the exit (an
    // asynchronous one) can then only happen after the lines written at exit: it would come out after them.
    let output = '';
    const { stdout } = await run(
      `
      import { read, writeSync } from 'node:fs';
      read(0, Buffer.alloc(1), 0, 1, null, () => {});
      const logger = createLogger('info');
      const access = createAccessLogger(logger);
      process.on('exit', () => writeSync(1, '{"msg":"exit handlers done"}\\n'));
      for (let index = 0; index < 500; index += 1) {
        access.info({ index }, 'request');
        logger.info({ index }, 'event');
      }
      process.exit(0);
    `,
      (text, stdin) => {
        output += text;
        if (output.includes('"msg":"exit handlers done"')) stdin.end();
      },
      { UV_THREADPOOL_SIZE: '1' },
    );
    expect(indexes(stdout, 'request'), 'access log').to.deep.equal(upTo500);
    expect(indexes(stdout, 'event'), 'log').to.deep.equal(upTo500);
  });

  it('exits at once when the reader of standard output has gone', async () => {
    const child = start(
      `
      const logger = createLogger('info');
      const access = createAccessLogger(logger);
      process.stdin.on('data', () => {}).once('end', () => {
        for (let index = 0; index < 500; index += 1) {
          access.info({ index }, 'request');
          logger.info({ index }, 'event');
        }
        process.exit(0);
      });
    `,
      ['pipe', 'pipe', 'inherit'],
    );
    child.stdout!.destroy();
    child.stdin!.end();
    const exited = new Promise<number | null>((resolve, reject) => {
      child.once('error', reject);
      child.once('exit', (code) => resolve(code));
    });
    let timer: NodeJS.Timeout | undefined;
    const stuck = new Promise<'stuck'>((resolve) => {
      timer = setTimeout(() => resolve('stuck'), 5_000);
    });
    const outcome = await Promise.race([exited, stuck]);
    clearTimeout(timer);
    if (outcome === 'stuck') child.kill('SIGKILL');
    expect(outcome, 'exit code').to.equal(0);
  });

  it('writes a lone line while the process keeps running, without waiting for more lines or the exit', async () => {
    // The child logs 'done' and exits only once this side has read the lone line: the line must come
    // out on its own (the periodic flush), or nothing ends the child and the test times out.
    const { chunks } = await run(
      `
      const logger = createLogger('info');
      createAccessLogger(logger).info({ request_id: 'lone' }, 'request');
      process.stdin.on('data', () => {}).once('end', () => logger.info('done'));
    `,
      (text, stdin) => {
        if (text.includes('"request_id":"lone"')) stdin.end();
      },
    );
    const line = chunks.findIndex((chunk) => chunk.includes('"request_id":"lone"'));
    const done = chunks.findIndex((chunk) => chunk.includes('"msg":"done"'));
    expect(line, 'the access line').to.not.equal(-1);
    expect(chunks[line]).to.not.include('"msg":"done"');
    expect(done, 'the line after it').to.be.greaterThan(line);
  });
});

describe('log lines as docs/operations.md states them', () => {
  it('carry the level as the number the docs map to each name, and the time in epoch ms', async () => {
    const docs = await readFile(join(ROOT, '..', 'docs', 'operations.md'), 'utf8');
    const row = docs.split('\n').find((line) => line.startsWith('| `level` |'));
    expect(row, 'the level row of the log fields table').to.be.a('string');
    const documented = Object.fromEntries(
      [...row!.matchAll(/`(\d+)` (\w+)/g)].map((match) => [match[2]!, Number(match[1])]),
    );
    const { levels } = pino();
    expect(documented).to.deep.equal(
      Object.fromEntries(Object.entries(levels.values).filter(([name]) => name !== 'silent')),
    );
    const sink = new PassThrough();
    let text = '';
    sink.on('data', (chunk: Buffer) => (text += chunk.toString()));
    const before = Date.now();
    const logger = createLogger('trace', sink);
    for (const name of Object.keys(documented))
      (logger as unknown as Record<string, (message: string) => void>)[name]!(name);
    await new Promise((resolve) => setImmediate(resolve));
    const lines = text
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { level: number; time: number; msg: string; service: string });
    expect(lines.map((line) => [line.msg, line.level])).to.deep.equal(Object.entries(documented));
    for (const line of lines) {
      expect(line.service).to.equal('model-gateway');
      expect(line.time).to.be.within(before, Date.now());
    }
  });
});
