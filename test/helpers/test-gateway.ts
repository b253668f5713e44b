import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../src/config/gateway-config.ts';
import { startGateway, type Gateway } from '../../src/server/gateway.ts';
import { createLogger } from '../../src/core/logger.ts';
import {
  startMockUpstream,
  type MockUpstream,
  type MockUpstreamOptions,
} from '../../mock-upstream/mock-upstream-server.ts';

export const VENDORS = ['alpha', 'beta', 'gamma', 'delta', 'epsilon', 'zeta'] as const;
export const TEST_KEY = 'sk-test-gateway-key-0001-0123456789abcdef';
export const UPSTREAM_KEY = 'upstream-secret-0001';

export interface TestGateway {
  readonly gateway: Gateway;
  readonly url: string;
  /** One mock upstream per vendor, so each request's vendor is visible. */
  readonly upstreams: Record<(typeof VENDORS)[number], MockUpstream>;
  readonly dataDir: string;
  /** All requests every mock received, with the usage each reported. */
  allRequests(): MockUpstream['requests'];
  close(): Promise<void>;
}

/** The real gateway (real plugins, stores, limits) in this process, in front of six mock upstreams. */
export async function startTestGateway(
  options: {
    env?: NodeJS.ProcessEnv;
    mock?: MockUpstreamOptions;
    dataDir?: string;
    logTo?: NodeJS.WritableStream;
    /** A config file the gateway starts from and reloads (default: the checkout's, with an absent one to reload). */
    configFile?: string;
  } = {},
): Promise<TestGateway> {
  const upstreams = {} as Record<(typeof VENDORS)[number], MockUpstream>;
  for (const vendor of VENDORS) upstreams[vendor] = await startMockUpstream({ apiKey: UPSTREAM_KEY, ...options.mock });
  const dataDir = options.dataDir ?? (await mkdtemp(join(tmpdir(), 'gateway-test-')));
  const env: NodeJS.ProcessEnv = {
    PORT: '0',
    HOST: '127.0.0.1',
    GATEWAY_DATA_DIR: dataDir,
    GATEWAY_API_KEYS: TEST_KEY,
    GATEWAY_CONFIG: join(dataDir, 'no-config.yaml'),
    ...Object.fromEntries(
      VENDORS.flatMap((vendor) => [
        [`${vendor.toUpperCase()}_BASE_URL`, upstreams[vendor].url],
        [`${vendor.toUpperCase()}_API_KEY`, UPSTREAM_KEY],
      ]),
    ),
    ...options.env,
  };
  if (options.configFile) env.GATEWAY_CONFIG = options.configFile;
  const config = { ...loadConfig({ ...env, GATEWAY_CONFIG: options.configFile }, process.cwd()), dataDir };
  const gateway = await startGateway(
    config,
    env,
    createLogger(env.LOG_LEVEL ?? (options.configFile ? config.logLevel : 'silent'), options.logTo),
  );
  return {
    gateway,
    url: gateway.url,
    upstreams,
    dataDir,
    allRequests: () => VENDORS.flatMap((vendor) => upstreams[vendor].requests),
    async close() {
      await gateway.close();
      await Promise.all(VENDORS.map((vendor) => upstreams[vendor].close()));
      if (!options.dataDir) await rm(dataDir, { recursive: true, force: true });
    },
  };
}
