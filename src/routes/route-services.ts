import type { RouteId, TokenUsage, UpstreamRouteId, UsageExtractor, WireFormat } from '../plugins/plugin-contract.ts';
import type { ModelRegistry, ResolvedModel } from '../plugins/model-registry.ts';
import type { EndpointPool } from '../upstream/endpoint-pool.ts';
import type { FallbackTable } from './model-fallbacks.ts';
import type { UpstreamClient, UpstreamEndpoint } from '../upstream/upstream-client.ts';
import type { UsageOutcome } from '../usage/stream-outcome.ts';
import type { TextSample } from '../usage/token-estimate.ts';

/** The caller as the auth middleware leaves it in `res.locals.apiKey` (never the key itself). */
export interface CallerKey {
  readonly id: string;
  /** Canonical model IDs the key may use; every model when absent. */
  readonly models?: readonly string[];
  /** Charged-token quotas of the key, per UTC day and per UTC month. */
  readonly quota?: { readonly daily?: number; readonly monthly?: number };
  /** The key's own request limit per window, instead of the gateway's. */
  readonly rpm?: number;
  /** The key's own limit of requests in flight at once, instead of the gateway's. */
  readonly concurrency?: number;
}

/** What one request to an upstream came to, handed to usage accounting when the response is done. */
export interface Exchange {
  readonly keyId: string | undefined;
  readonly route: RouteId;
  readonly resolved: ResolvedModel;
  /** The status the client received (499 when the client went away first). */
  readonly status: number;
  readonly stream: boolean;
  readonly latencyMs: number;
  /** The request's id (`x-request-id`, accepted from the client or generated). */
  readonly requestId?: string;
  /** Of `latencyMs`, the time spent waiting on the upstream (every attempt, the answer's body included). */
  readonly upstreamMs?: number;
  /** When the answer's status and headers went out, in ms after the start; undefined when the error path answered. */
  readonly firstByteMs?: number;
  /** The usage the upstream reported; `undefined` when it reported none. */
  readonly usage: TokenUsage | undefined;
  /** Whether tokens were consumed upstream, so that missing usage must be estimated (false for upstream errors). */
  readonly consumed: boolean;
  /** How the answer ended: whole, cut by the upstream, or left by the client. */
  readonly outcome: UsageOutcome;
  /** The endpoint that served or failed last (its configured name or index), when one was tried. */
  readonly endpoint?: string;
  /** Upstream attempts made, failed-over ones included. */
  readonly attempts?: number;
  /**
   * The request body (parsed on call: only estimates need it, so a stream does not hold the parsed body
   * while it runs) and the text streamed back so far (or a leading sample of it), for estimates.
   */
  readonly requestBody: () => Record<string, unknown>;
  readonly responseText: () => string | TextSample;
}

/** The usage a record stores once its estimate is made. */
export interface RecordedUsage {
  readonly usage: TokenUsage | undefined;
  /** Whether any of the figures is a tokenizer estimate. */
  readonly estimated: boolean;
}

/** The usage accounting the routes call; the usage module implements it. */
export interface UsageAccounting {
  /** Before dispatch: throws the 429 quota error when the caller's token quota is spent. */
  checkQuota(caller: CallerKey | undefined): Promise<void>;
  /** The extractor for answers of this format on this route and model (a plugin's own, or the standard one). */
  extractor(format: WireFormat, route: UpstreamRouteId, resolved: ResolvedModel): UsageExtractor;
  /** Text deltas of one streamed event (for estimates when a stream ends without usage). */
  streamedText(format: WireFormat, data: string): string;
  /** The derived counters of a usage under the model's pricing (the native chat result shows them). */
  charge(usage: TokenUsage, resolved: ResolvedModel): { readonly totalTokens: number; readonly chargedTokens: number };
  /**
   * Records one exchange. Never throws, never delays the response. Gives back undefined when the record
   * was taken as it is (the usual case), or, when its usage must first be estimated with a tokenizer,
   * a promise of the usage the record stores (it never rejects).
   */
  record(exchange: Exchange): Promise<RecordedUsage> | undefined;
}

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

export interface RouteServices {
  readonly registry: () => ModelRegistry;
  readonly upstream: UpstreamClient;
  readonly endpoints: ProviderEndpoints;
  readonly usage: UsageAccounting;
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
  /** Told when a streamed answer starts and ends being relayed (the open-streams gauge). */
  readonly openStreams?: { opened(): void; closed(): void };
}
