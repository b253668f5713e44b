import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** Runs a script with the gateway's loggers on standard output; gives back its output, and when each chunk came. */
function run(script: string): Promise<{ stdout: string; chunks: { at: number; text: string }[] }> {
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', `import { createAccessLogger, createLogger } from '../src/core/logger.ts';\n${script}`], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  const startedAt = Date.now();
  const chunks: { at: number; text: string }[] = [];
  child.stdout.on('data', (chunk: Buffer) => chunks.push({ at: Date.now() - startedAt, text: chunk.toString() }));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', () => resolve({ stdout: chunks.map((chunk) => chunk.text).join(''), chunks }));
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

  it('writes a lone line within a second while the process keeps running', async () => {
    const { chunks } = await run(`
      const logger = createLogger('info');
      createAccessLogger(logger).info({ request_id: 'lone' }, 'request');
      setTimeout(() => logger.info('done'), 3000);
    `);
    const line = chunks.find((chunk) => chunk.text.includes('"request_id":"lone"'));
    expect(line, 'the access line').to.not.equal(undefined);
    expect(line!.text).to.not.include('"msg":"done"');
    expect(line!.at).to.be.below(chunks.find((chunk) => chunk.text.includes('"msg":"done"'))!.at - 1000);
  });
});
