import { createRequire } from 'node:module';
import type { Agent as UndiciAgent, Dispatcher } from 'undici';

/**
 * undici's `Agent` alone. The package's index loads fetch, WebSocket, the HTTP cache and the mocks too
 * (about 9 MB of a gateway's idle memory) where the gateway needs only the agent's pools.
 */
export const Agent = createRequire(import.meta.url)('undici/lib/dispatcher/agent.js') as typeof UndiciAgent;

let shared: UndiciAgent | undefined;

/** One request through a shared agent, as undici's `request` makes it through its global dispatcher. */
export function request(
  url: string,
  options: Omit<Dispatcher.RequestOptions, 'origin' | 'path'>,
): Promise<Dispatcher.ResponseData> {
  const target = new URL(url);
  shared ??= new Agent();
  return shared.request({ ...options, origin: target.origin, path: `${target.pathname}${target.search}` });
}
