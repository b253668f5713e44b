import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { ConfigError, loadConfig } from '../src/config/gateway-config.ts';
import { startGateway } from '../src/server/gateway.ts';
import { createLogger } from '../src/core/logger.ts';
import { loadPlugins } from '../src/plugins/load-plugins.ts';
import { envPrefixOf } from '../src/data-plane/upstream/endpoint-pool.ts';
import { startMockUpstream } from '../mock-upstream/mock-upstream-server.ts';

// Everything on one machine, no external service: a mock upstream for every provider, the embedded
// key and usage store under data/demo, a fresh API key and a fresh admin token (unless one is set).
const upstreamKey = 'demo-upstream-key';
const env: NodeJS.ProcessEnv = {
  ...process.env,
  GATEWAY_DATA_DIR: process.env.GATEWAY_DATA_DIR ?? join('data', 'demo'),
};
const ownToken = Boolean(env.GATEWAY_ADMIN_TOKEN);
env.GATEWAY_ADMIN_TOKEN ||= randomBytes(32).toString('base64url');
let config;
try {
  config = loadConfig(env);
} catch (error) {
  if (!(error instanceof ConfigError)) throw error;
  process.stderr.write(`demo: invalid configuration:\n${error.problems.map((problem) => `  ${problem}\n`).join('')}`);
  process.exit(1);
}
const upstream = await startMockUpstream({ apiKey: upstreamKey, chunkDelayMs: 40 });
for (const plugin of await loadPlugins(config.manifestPath, config.pluginPath)) {
  env[`${envPrefixOf(plugin)}_BASE_URL`] ??= upstream.url;
  env[`${envPrefixOf(plugin)}_API_KEY`] ??= upstreamKey;
}
const logger = createLogger(process.env.LOG_LEVEL ?? 'warn');
const gateway = await startGateway(config, env, logger);
const { key } = await gateway.keys.create({ name: 'demo' });

process.stdout.write(`
Model gateway running at ${gateway.url} (mock upstreams at ${upstream.url}, data in ${config.dataDir})

API key (shown once): ${key}
${ownToken ? 'Admin token: the GATEWAY_ADMIN_TOKEN you set' : `Admin token (shown once): ${config.adminToken}`}
Account page (sign in with the admin token): ${gateway.url}/account

Try it:
  curl -s ${gateway.url}/v1/models
  curl -s ${gateway.url}/v1/chat/completions -H "Authorization: Bearer ${key}" -d '{"model":"alpha-latest","messages":[{"role":"user","content":"Hello"}]}'
  curl -sN ${gateway.url}/v1/chat/completions -H "Authorization: Bearer ${key}" -d '{"model":"gamma-latest","stream":true,"messages":[{"role":"user","content":"Stream please"}]}'
  curl -s ${gateway.url}/v1/chat -H "Authorization: Bearer ${key}" -d '{"model":"beta-latest","input":"Hello"}'
  curl -s ${gateway.url}/v1/usage -H "Authorization: Bearer ${key}"

Ctrl-C stops it.
`);

const stop = () => {
  void gateway
    .close()
    .then(() => upstream.close())
    .then(() => process.exit(0));
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
