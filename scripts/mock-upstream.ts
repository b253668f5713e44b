import { parseArgs } from 'node:util';
import { startMockUpstream } from '../mock-upstream/mock-upstream-server.ts';

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '9000' },
    host: { type: 'string', default: '127.0.0.1' },
    'api-key': { type: 'string' },
    profile: { type: 'string', default: 'standard' },
    'chunk-delay-ms': { type: 'string', default: '0' },
  },
});
if (!['standard', 'running-usage', 'empty-function-call'].includes(values.profile)) {
  process.stderr.write('--profile must be standard, running-usage or empty-function-call\n');
  process.exit(1);
}
const upstream = await startMockUpstream({
  port: Number(values.port),
  host: values.host,
  apiKey: values['api-key'],
  profile: values.profile as 'standard',
  chunkDelayMs: Number(values['chunk-delay-ms']),
});
process.stdout.write(`mock upstream listening: base URL ${upstream.url}\n`);
const stop = () => void upstream.close().then(() => process.exit(0));
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
