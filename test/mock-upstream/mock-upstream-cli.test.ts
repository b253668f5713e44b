import { expect } from 'chai';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

function run(args: string[]): ChildProcessWithoutNullStreams {
  return spawn(process.execPath, ['--import', 'tsx', 'scripts/mock-upstream.ts', ...args], { cwd: ROOT });
}

async function output(child: ChildProcessWithoutNullStreams, pattern: RegExp): Promise<RegExpExecArray> {
  let text = '';
  for await (const chunk of child.stdout) {
    text += String(chunk);
    const match = pattern.exec(text);
    if (match) return match;
  }
  throw new Error(`the CLI ended without printing ${pattern}: ${text}`);
}

describe('mock upstream CLI', function () {
  this.timeout(20_000);

  it('prints the base URL, serves the chosen profile with its options, and exits 0 on SIGTERM', async () => {
    const child = run([
      '--port',
      '0',
      '--api-key',
      'cli-key',
      '--profile',
      'running-usage',
      '--crlf',
      '--cached-tokens',
      '2',
    ]);
    try {
      const [, url] = await output(child, /base URL (http:\/\/127\.0\.0\.1:\d+\/v1)\n/);
      const body = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'Hello there' }], stream: true });
      const refused = await fetch(`${url}/chat/completions`, { method: 'POST', body });
      expect(refused.status).to.equal(401);
      const response = await fetch(`${url}/chat/completions`, {
        method: 'POST',
        headers: { authorization: 'Bearer cli-key' },
        body,
      });
      const text = await response.text();
      expect(text).to.contain('\r\n\r\n');
      const chunks = text
        .split('\r\n\r\n')
        .filter((event) => event.startsWith('data: {'))
        .map((event) => JSON.parse(event.slice(6)));
      expect(chunks.length).to.be.greaterThan(1);
      expect(chunks.every((chunk) => chunk.usage?.prompt_tokens_details.cached_tokens === 2)).to.equal(true);
    } finally {
      child.kill('SIGTERM');
    }
    const [code] = await once(child, 'exit');
    expect(code).to.equal(0);
  });

  it('refuses an unknown profile with exit code 2', async () => {
    const child = run(['--profile', 'nope']);
    let err = '';
    child.stderr.on('data', (chunk) => (err += String(chunk)));
    const [code] = await once(child, 'exit');
    expect(code).to.equal(2);
    expect(err).to.contain('--profile must be one of standard, running-usage, empty-function-call');
  });
});
