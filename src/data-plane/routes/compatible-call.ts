import type { CallerKey, UsageAccounting } from '../../core/exchange.ts';
import { WIRE_FORMATS } from '../../core/formats/index.ts';
import type { EarlyEventRules } from '../upstream/upstream-client.ts';
import type { ModelRegistry, ResolvedModel } from '../../core/model-registry.ts';
import type { UpstreamRoute, UpstreamRouteId, UsageExtractor, WireFormat } from '../../plugins/plugin-contract.ts';
import { type JsonMember, upstreamBody } from '../http/json-body.ts';
import { type FallbackTable, nextFallback } from './model-fallbacks.ts';
import { fieldError, forbidden, validationError } from '../../core/gateway-errors.ts';

/** The client's request body: its bytes, its top-level members and where its object ends. */
export interface ClientBody {
  readonly bytes: Buffer;
  readonly members: readonly JsonMember[];
  readonly end: number;
}

/** What a compatible call reads beyond the request: the catalog, the fallbacks and who has endpoints. */
export interface CallCatalog {
  readonly registry: ModelRegistry;
  readonly fallbacks: FallbackTable | undefined;
  /** Whether the vendor has endpoints configured (a fallback without any is skipped). */
  readonly served: (vendor: string) => boolean;
  readonly usage: Pick<UsageAccounting, 'extractor'>;
}

/**
 * One compatible request as forwarded upstream: the client's bytes with only `model` replaced (and
 * `include_usage` set on a stream whose format asks for it), for the model being tried (the one
 * requested, then its fallbacks, all of the same wire format). The bytes are spliced when first read,
 * so a guardrail's rewrite of the body before that is what goes.
 */
export class CompatibleCall {
  model: ResolvedModel;
  upstreamRoute: UpstreamRoute;
  /** The model ID the provider is sent (`gen_ai.request.model`). */
  upstreamModel: string;
  extractor: UsageExtractor;
  readonly format: WireFormat;
  private fallbackIndex = 0;
  private spliced: Buffer | undefined;

  constructor(
    protected readonly catalog: CallCatalog,
    readonly route: UpstreamRouteId,
    readonly requested: ResolvedModel,
    readonly stream: boolean,
    protected readonly client: () => ClientBody,
  ) {
    const { registry } = catalog;
    this.model = requested;
    this.upstreamRoute = registry.upstreamRoute(requested, route);
    this.format = this.upstreamRoute.format;
    this.upstreamModel = registry.upstreamModel(requested, route);
    this.extractor = catalog.usage.extractor(this.format, route, requested);
  }

  get registry(): ModelRegistry {
    return this.catalog.registry;
  }

  /** The upstream request's method (an adapted call's may differ). */
  get method(): 'POST' | 'PUT' {
    return 'POST';
  }

  /** How a stream's events before any content are judged: by the route's format (an adapted call's: its vendor's). */
  get earlyEvents(): WireFormat | EarlyEventRules {
    return this.format;
  }

  /** The body sent upstream for the model being tried. */
  get forwarded(): Buffer {
    if (this.spliced === undefined) {
      const { bytes, members, end } = this.client();
      const withIncludeUsage = this.stream && WIRE_FORMATS[this.format].asksForStreamUsage;
      this.spliced = upstreamBody(bytes, members, end, { model: this.upstreamModel, withIncludeUsage });
    }
    return this.spliced;
  }

  /** Whether a fallback may follow the requested model (its pool may then be asked for a session). */
  get hasFallbacks(): boolean {
    return this.catalog.fallbacks?.has(this.requested.canonicalId) === true;
  }

  /** Moves on to the model's next fallback the caller may use and has an endpoint; false when none is left. */
  nextFallback(caller: CallerKey | undefined): boolean {
    const { registry, fallbacks, served, usage } = this.catalog;
    const chain = fallbacks?.get(this.requested.canonicalId);
    const allowed = (target: ResolvedModel) => mayUseModel(caller, target.canonicalId) && served(target.plugin.vendor);
    const next = chain && nextFallback(registry, chain, this.fallbackIndex, this.route, this.requested, allowed);
    if (!next) return false;
    this.fallbackIndex = next.index;
    this.model = next.resolved;
    this.upstreamRoute = registry.upstreamRoute(next.resolved, this.route);
    this.upstreamModel = registry.upstreamModel(next.resolved, this.route);
    this.spliced = undefined;
    this.extractor = usage.extractor(this.format, this.route, next.resolved);
    return true;
  }
}

/** Whether the key may use the model (its resolved canonical ID): every model when it lists none. */
export function mayUseModel(key: CallerKey | undefined, canonicalModelId: string): boolean {
  return !key?.models || key.models.includes(canonicalModelId);
}

export function assertModelAllowed(key: CallerKey | undefined, canonicalModelId: string): void {
  if (!mayUseModel(key, canonicalModelId)) {
    throw forbidden(`This API key may not use the model '${canonicalModelId}'`);
  }
}

/**
 * Checks the request's output cap fields: each one it sets must be a safe integer and at most the
 * model's `maxOutputTokens` (when its plugin declares one), else the 400 names the field. A cap beyond
 * either is never a request the upstream serves, and would make a reservation meaningless.
 */
export function checkOutputCaps(
  body: Readonly<Record<string, unknown>>,
  fields: readonly string[],
  resolved: ResolvedModel,
): void {
  const problems: string[] = [];
  let first: string | undefined;
  const most = resolved.model.maxOutputTokens;
  for (const field of fields) {
    const value = body[field];
    if (typeof value !== 'number') continue;
    if (!Number.isSafeInteger(value))
      problems.push(fieldError(field, 'must be a safe integer (at most 9007199254740991)'));
    else if (most !== undefined && value > most)
      problems.push(fieldError(field, `must be at most ${most}, the most '${resolved.canonicalId}' writes`));
    else continue;
    first ??= field;
  }
  if (problems.length) throw validationError(problems, first);
}

/** The request's own output cap: the first of its route's cap fields it sets to a positive number. */
export function outputCapOf(body: Readonly<Record<string, unknown>>, fields: readonly string[]): number | undefined {
  for (const field of fields) {
    const value = body[field];
    if (typeof value === 'number' && value > 0) return value;
  }
  return undefined;
}

/** How many answers the upstream writes for the request (`n`, `best_of`), each up to the output cap. */
export function choicesOf(body: Readonly<Record<string, unknown>>): number {
  let choices = 1;
  for (const field of ['n', 'best_of']) {
    const value = body[field];
    if (typeof value === 'number' && Number.isFinite(value) && value > choices) choices = Math.floor(value);
  }
  return choices;
}

/**
 * The request field that makes the upstream read context the gateway cannot see (and so cannot bound):
 * a stored response or conversation to continue, or a background run whose work ends after the answer.
 */
export function unboundedField(body: Readonly<Record<string, unknown>>): string | undefined {
  if (typeof body.previous_response_id === 'string' && body.previous_response_id !== '') return 'previous_response_id';
  if (body.conversation !== undefined && body.conversation !== null) return 'conversation';
  if (body.background === true) return 'background';
  return undefined;
}
