import { parseArgs } from 'node:util';
import { PROFILES, type Profile } from '../mock-upstream/mock-answer.ts';
import { startMockUpstream } from '../mock-upstream/mock-upstream-server.ts';

const usage = `usage: npm run mock-upstream -- [--port 9000] [--host 127.0.0.1] [--api-key KEY] [--profile ${PROFILES.join('|')}]
                               [--chunk-delay-ms 0] [--cached-tokens 0] [--prompt-cache] [--crlf]\n`;

function fail(message: string): never {
  process.stderr.write(`${message}\n${usage}`);
  process.exit(2);
}

let values;
try {
  ({ values } = parseArgs({
    options: {
      port: { type: 'string', default: '9000' },
      host: { type: 'string', default: '127.0.0.1' },
      'api-key': { type: 'string' },
      profile: { type: 'string', default: 'standard' },
      'chunk-delay-ms': { type: 'string', default: '0' },
      'cached-tokens': { type: 'string', default: '0' },
      'prompt-cache': { type: 'boolean', default: false },
      crlf: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  }));
} catch (error) {
  fail((error as Error).message);
}
if (values.help) {
  process.stdout.write(usage);
  process.exit(0);
}
const integer = (name: string, text: string) =>
  /^\d+$/.test(text) ? Number(text) : fail(`--${name} must be a whole number, got '${text}'`);
if (!PROFILES.includes(values.profile as Profile)) fail(`--profile must be one of ${PROFILES.join(', ')}`);

const upstream = await startMockUpstream({
  port: integer('port', values.port),
  host: values.host,
  apiKey: values['api-key'],
  profile: values.profile as Profile,
  chunkDelayMs: integer('chunk-delay-ms', values['chunk-delay-ms']),
  cachedTokens: integer('cached-tokens', values['cached-tokens']),
  promptCache: values['prompt-cache'],
  lineEnding: values.crlf ? '\r\n' : '\n',
  // Nobody reads the records of a standalone mock; a benchmark would only fill memory with them.
  recordRequests: false,
});
// bench/run.ts reads the URL from this line.
process.stdout.write(`mock upstream listening: base URL ${upstream.url}\n`);
const stop = () => void upstream.close().then(() => process.exit(0));
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
