import { expect } from 'chai';
import { spawn } from 'node:child_process';
import type { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/**
 * Runs a script with the gateway's loggers on standard output; gives back its output, one entry per
 * chunk read. `onChunk` sees each chunk as it comes, with the child's standard input to answer on.
 */
function run(script: string, onChunk?: (text: string, stdin: Writable) => void): Promise<{ stdout: string; chunks: string[] }> {
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', `import { createAccessLogger, createLogger } from '../src/core/logger.ts';\n${script}`], { cwd: ROOT, stdio: [onChunk ? 'pipe' : 'ignore', 'pipe', 'inherit'] });
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

describe('access log on standard output', function () {
  this.timeout(20_000);

  it('keeps every line, in order, when the process exits right after writing them', async () => {
    const { stdout } = await run(`
      const access = createAccessLogger(createLogger('info'));
      for (let index = 0; index < 500; index += 1) access.info({ index }, 'request');
      process.exit(0);
    `);
    const indexes = stdout.trim().split('\n').map((line) => JSON.parse(line) as { index?: number }).filter((line) => line.index !== undefined).map((line) => line.index);
    expect(indexes).to.deep.equal(Array.from({ length: 500 }, (_, index) => index));
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
