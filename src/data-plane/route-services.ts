import type { ModelRegistry } from '../core/model-registry.ts';
import type { EndpointPool } from './upstream/endpoint-pool.ts';
import type { FallbackTable } from './routes/model-fallbacks.ts';
import type { UpstreamClient, UpstreamEndpoint } from './upstream/upstream-client.ts';
import type { UsageAccounting } from '../core/exchange.ts';
import type { PluginFault } from '../plugins/plugin-fault.ts';
import type { BudgetGate } from './limits/budget-gate.ts';
import type { FailedAttempt, FailoverPlan } from './upstream/failover/attempt-upstream.ts';
import type { ResponseCaching } from './cache/response-caching.ts';
import type { GuardrailSet } from '../guardrails/guardrail-set.ts';
import type { GuardrailActed } from './guardrails/guardrail-run.ts';
import type { RequestTrace } from '../ops/tracing/request-trace.ts';

/** Resolved upstream endpoints per vendor; `undefined` where the operator configured none. */
export interface ProviderEndpoints {
  /** The vendor's first endpoint (for views that show one). */
  get(vendor: string): UpstreamEndpoint | undefined;
  /** The vendor's endpoints with their breakers; `state()` lists them for metrics and health views. */
  pool(vendor: string): EndpointPool | undefined;
  /** Every configured vendor's pool. */
  pools(): ReadonlyMap<string, EndpointPool>;
  /** The env prefix an operator sets for the vendor, for the "not configured" message. */
  envPrefix(vendor: string): string;
}

/** Where a plugin fault happened. */
export interface PluginFaultSite {
  readonly route: string;
  readonly model: string;
  readonly requestId: string | undefined;
  /** The request's trace, which shows the fault as an event. */
  readonly trace?: RequestTrace;
}

export interface RouteServices {
  readonly registry: () => ModelRegistry;
  readonly upstream: UpstreamClient;
  readonly endpoints: ProviderEndpoints;
  readonly usage: UsageAccounting;
  /** Reserves on the token and money limits of a caller's key and team; none when limits are off (tests). */
  readonly budgets?: Pick<BudgetGate, 'admit'>;
  readonly bodyLimitBytes: number;
  /** Largest upstream JSON answer the gateway reads, in bytes. */
  readonly upstreamBodyLimitBytes: number;
  /** Largest single SSE event relayed; a larger one ends the stream with an in-band error. */
  readonly maxSseEventBytes: number;
  /** Models tried when every endpoint of the requested one failed before the first byte (opt-in). */
  readonly fallbacks?: FallbackTable;
  /** Longest wait for an upstream's headers and a stream's first content event before failing over, in ms. */
  readonly firstByteTimeoutMs?: number;
  /** Longest silence of a stream once content flows, in ms. */
  readonly idleTimeoutMs?: number;
  /**
   * Longest a client may leave its answer unread (the connection's buffers full) before the answer is
   * ended and its upstream dropped, in ms.
   */
  readonly clientWriteTimeoutMs: number;
  /** Told of each plugin hook that threw or returned a wrong shape (logged at error level and counted by plugin and hook). */
  readonly pluginFaults?: (fault: PluginFault, where: PluginFaultSite) => void;
  /** Told when a streamed answer starts and ends being relayed (the open-streams gauge). */
  readonly openStreams?: { opened(): void; closed(): void };
  /** The exact response cache (off while no TTL is configured); none in tests that leave it out. */
  readonly caching?: ResponseCaching;
  /** The guardrails of the configuration in force (read per request); undefined when none is configured. */
  readonly guardrails?: () => GuardrailSet | undefined;
  /** Told of each guardrail action (the metric; a log line for each block, never with what was found). */
  readonly guardrailActed?: (acted: GuardrailActed) => void;
  /** Told of each upstream attempt that failed (logged at warn: the failover warning). */
  readonly upstreamAttemptFailed?: (failed: FailedAttempt, requestId: string | undefined) => void;
}

/** A failover plan's `onFailure` for one request: the services' failover warning, with the request's id. */
export function failoverWarning(services: RouteServices, requestId: string | undefined): FailoverPlan['onFailure'] {
  const report = services.upstreamAttemptFailed;
  return report && ((failed) => report(failed, requestId));
}
