import { Counter, type Registry } from 'prom-client';

/** The tokens the upstreams reported: by model and type, and the cached input tokens by endpoint. */
export interface TokenMetrics {
  readonly byModel: Counter<'model' | 'type'>;
  readonly cachedInput: Counter<'provider' | 'endpoint'>;
}

export function defineTokenMetrics(registers: Registry[]): TokenMetrics {
  return {
    byModel: new Counter({
      name: 'gateway_tokens_total',
      help: 'Tokens the upstreams reported, by canonical model and type',
      labelNames: ['model', 'type'],
      registers,
    }),
    cachedInput: new Counter({
      name: 'gateway_cached_input_tokens_total',
      help: "Input tokens the upstreams reported as read from their prompt cache, by provider and endpoint (its configured name), to see prompt-cache-aware routing's effect",
      labelNames: ['provider', 'endpoint'],
      registers,
    }),
  };
}
