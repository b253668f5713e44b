import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { request } from 'undici';
import { startMockUpstream, type MockUpstream } from '../mock-upstream/mock-upstream-server.ts';
import { loadConfig } from '../src/config/gateway-config.ts';
import { createLogger } from '../src/core/logger.ts';
import { startGateway } from '../src/server/gateway.ts';

/**
 * What prompt-cache-aware routing is worth: the real gateway in process, in front of `endpoints` mock
 * upstreams of one provider, each with its own prompt cache (the mock's `promptCache`: an instance
 * reports a request's system prompt and first message as cached once it has answered them). `sessions`
 * conversations of `turns` turns each (the sessions of a turn at once, turn after turn) go through it
 * once with `routing.affinity` on and once off (weighted random spread), and the cached share of the
 * input tokens the upstreams reported is compared. The sessions carry no `x-session-id`: the gateway
 * finds them by their stable prefix, as it does for any client.
 */
export interface ShareOptions {
  readonly sessions?: number;
  readonly turns?: number;
  readonly endpoints?: number;
}

/** One run's figures, as the upstreams reported them. */
export interface Share {
  readonly requests: number;
  readonly inputTokens: number;
  readonly cachedTokens: number;
  /** `cachedTokens / inputTokens`. */
  readonly cachedShare: number;
  /** Requests with any cached tokens, of all requests. */
  readonly hitRate: number;
  /** Cached input tokens per endpoint, as `gateway_cached_input_tokens_total` shows them. */
  readonly perEndpoint: Readonly<Record<string, number>>;
}

const CLIENT_KEY = 'sk-affinity-share-0001-0123456789abcdef';
const UPSTREAM_KEY = 'affinity-share-upstream';
const MODEL = 'alpha/gen-5.5';
// A system prompt of a realistic size (2,700 characters, about 680 tokens as the mock counts them), the same for every
// session.
const SYSTEM_PROMPT = `You are the support assistant of an online shop. ${'Answer from the policy below, cite its section, never invent an order number. '.repeat(34)}`;

/**
 * The Chat Completions body of one turn of one session: the system prompt, the session's first question, and the turns
 * since.
 */
function turnBody(session: number, turn: number): Record<string, unknown> {
  const messages: { role: string; content: string }[] = [
    { role: 'system', content: SYSTEM_PROMPT },
    {
      role: 'user',
      content: `Customer ${session} asks: where is my parcel, ordered ${session % 28} days ago? ${'It was a gift and it matters. '.repeat(8)}`,
    },
  ];
  for (let earlier = 1; earlier <= turn; earlier += 1) {
    messages.push(
      { role: 'assistant', content: `Answer ${earlier} to customer ${session}.` },
      { role: 'user', content: `Follow-up ${earlier}: and what about the refund?` },
    );
  }
  return { model: MODEL, messages };
}

async function run(affinity: boolean, sessions: number, turns: number, endpoints: number): Promise<Share> {
  const upstreams: MockUpstream[] = await Promise.all(
    Array.from({ length: endpoints }, () => startMockUpstream({ apiKey: UPSTREAM_KEY, promptCache: true })),
  );
  const dataDir = await mkdtemp(join(tmpdir(), 'affinity-share-'));
  const env: NodeJS.ProcessEnv = {
    PORT: '0',
    HOST: '127.0.0.1',
    GATEWAY_CONFIG: '/dev/null',
    GATEWAY_DATA_DIR: dataDir,
    GATEWAY_API_KEYS: CLIENT_KEY,
    ALPHA_BASE_URL: upstreams.map((upstream) => upstream.url).join(','),
    ALPHA_API_KEY: UPSTREAM_KEY,
    GATEWAY_ROUTING_AFFINITY: String(affinity),
    RATE_LIMIT_MAX: '1000000',
  };
  const gateway = await startGateway(loadConfig(env), env, createLogger('silent'));
  try {
    for (let turn = 0; turn < turns; turn += 1) {
      await Promise.all(
        Array.from({ length: sessions }, async (_, session) => {
          const response = await request(`${gateway.url}/v1/chat/completions`, {
            method: 'POST',
            headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' },
            body: JSON.stringify(turnBody(session, turn)),
          });
          const text = await response.body.text();
          if (response.statusCode !== 200) throw new Error(`the gateway answered ${response.statusCode}: ${text}`);
        }),
      );
    }
    const reported = upstreams.flatMap((upstream) => upstream.requests).map((seen) => seen.reportedUsage!);
    const inputTokens = reported.reduce((sum, usage) => sum + usage.inputTokens, 0);
    const cachedTokens = reported.reduce((sum, usage) => sum + usage.cachedTokens, 0);
    const perEndpoint: Record<string, number> = {};
    const { body } = await gateway.metrics.scrape();
    for (const [, name, value] of body.matchAll(
      /^gateway_cached_input_tokens_total\{provider="alpha",endpoint="([^"]*)"\} (\d+)$/gm,
    ))
      perEndpoint[name!] = Number(value);
    return {
      requests: reported.length,
      inputTokens,
      cachedTokens,
      cachedShare: cachedTokens / inputTokens,
      hitRate: reported.filter((usage) => usage.cachedTokens > 0).length / reported.length,
      perEndpoint,
    };
  } finally {
    await gateway.close();
    await Promise.all(upstreams.map((upstream) => upstream.close()));
    await rm(dataDir, { recursive: true, force: true });
  }
}

/** The cached input share with affinity and with random spreading, over the same traffic. */
export async function affinityShare(options: ShareOptions = {}): Promise<{ affinity: Share; random: Share }> {
  const { sessions = 40, turns = 8, endpoints = 3 } = options;
  return {
    affinity: await run(true, sessions, turns, endpoints),
    random: await run(false, sessions, turns, endpoints),
  };
}

const percent = (value: number) => `${(value * 100).toFixed(1)}%`;

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: {
      sessions: { type: 'string', default: '40' },
      turns: { type: 'string', default: '8' },
      endpoints: { type: 'string', default: '2,3' },
    },
  });
  const sessions = Number(values.sessions);
  const turns = Number(values.turns);
  for (const endpoints of values.endpoints.split(',').map(Number)) {
    const { affinity, random } = await affinityShare({ sessions, turns, endpoints });
    process.stdout.write(
      `${endpoints} endpoints, ${sessions} sessions x ${turns} turns (${affinity.requests} requests each):\n`,
    );
    for (const [name, share] of [
      ['affinity', affinity],
      ['random  ', random],
    ] as const) {
      const spread = Object.entries(share.perEndpoint)
        .map(([endpoint, tokens]) => `${endpoint}: ${tokens}`)
        .join(', ');
      process.stdout.write(
        `  ${name} cached input share ${percent(share.cachedShare)} (${share.cachedTokens} of ${share.inputTokens} tokens), requests with a cache hit ${percent(share.hitRate)}; cached tokens per endpoint ${spread}\n`,
      );
    }
  }
}
