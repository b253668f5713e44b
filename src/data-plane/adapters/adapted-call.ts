import type { CallerKey } from '../../core/exchange.ts';
import type { ResolvedModel } from '../../core/model-registry.ts';
import { ADAPTER_SHAPES } from '../../plugins/adapter-hooks.ts';
import type {
  AdapterContext,
  EventMatch,
  RequestProblem,
  RouteAdapter,
  SseEvent,
  UpstreamRouteId,
} from '../../plugins/plugin-contract.ts';
import { upstreamJson } from '../../plugins/plugin-fault.ts';
import type { JsonRequestBody } from '../http/json-body.ts';
import { CompatibleCall, type CallCatalog, type EarlyEventRules } from '../upstream/upstream-client.ts';

/** Whether a vendor's event is the one a stream mapping names (by its `event:` field, or its predicate). */
export function matches(match: EventMatch, event: SseEvent): boolean {
  return typeof match === 'string' ? event.event === match : match(event);
}

const CONTENT = () => 'content' as const;
const NEVER = () => false;

/**
 * One compatible request to a vendor whose format is not the route's, through its plugin's route
 * adapter: the vendor's request is built by the adapter (once per model tried, after the request
 * guardrails), sent to the path, method and headers it chose, and the vendor's answers are mapped back
 * by the adapted relay. Everything else (the model, its fallbacks, the usage reader) is the compatible
 * call's; a fallback is adapted too (fallbacks keep to models served alike).
 */
export class AdaptedCall extends CompatibleCall {
  adapter: RouteAdapter;
  /** The exchange's request id and when it was taken (Unix seconds), for the adapter's context. */
  requestId = '';
  created = 0;
  private built: { readonly body: Buffer; readonly method: 'POST' | 'PUT' } | undefined;
  private opening: EarlyEventRules | undefined;

  constructor(
    catalog: CallCatalog,
    route: UpstreamRouteId,
    requested: ResolvedModel,
    stream: boolean,
    private readonly request: () => JsonRequestBody,
  ) {
    super(catalog, route, requested, stream, request);
    this.adapter = this.upstreamRoute.adapter!;
  }

  /** What the adapter's hooks are told of the request, for the model being tried. */
  get context(): AdapterContext {
    const { route, stream, requestId, created } = this;
    return { route, model: this.model.canonicalId, upstreamModel: this.upstreamModel, stream, requestId, created };
  }

  /** Whether the client asked for the usage event of a stream (`stream_options.include_usage`). */
  get includeUsage(): boolean {
    const options = this.request().body.stream_options as { include_usage?: unknown } | null | undefined;
    return options?.include_usage === true;
  }

  /** Why the vendor cannot serve the client's request (the route's 400), `[]` when it can; a fault throws. */
  problems(): readonly RequestProblem[] {
    const refused = this.adapter.checkRequest?.({ ...this.context, body: this.request().body }) ?? [];
    if (!this.stream || this.adapter.stream) return refused;
    const message = `'${this.model.canonicalId}' answers whole, never as a stream: send stream: false`;
    return [...refused, { field: 'stream', message }];
  }

  /** Builds the vendor's request for the model being tried (the body as request guardrails left it); a fault throws. */
  build(): void {
    const declared = this.registry.upstreamRoute(this.model, this.route);
    const request = this.adapter.buildRequest({ ...this.context, body: this.request().body });
    const hook = `routes.${this.route}.adapter.buildRequest`;
    const body = Buffer.from(upstreamJson(this.model.plugin.vendor, request.body, hook, ADAPTER_SHAPES.buildRequest));
    const { path, headers } = request;
    this.upstreamRoute =
      path === undefined && headers === undefined
        ? declared
        : { ...declared, path: path ?? declared.path, defaultHeaders: { ...declared.defaultHeaders, ...headers } };
    this.built = { body, method: request.method ?? 'POST' };
  }

  override get forwarded(): Buffer {
    if (this.built === undefined) this.build();
    return this.built!.body;
  }

  override get method(): 'POST' | 'PUT' {
    return this.built?.method ?? 'POST';
  }

  /** The vendor's events are its own: none only opens a stream; its declared error event fails the attempt over. */
  override get earlyEvents(): EarlyEventRules {
    const error = this.adapter.stream?.error;
    const isErrorEvent = error === undefined ? NEVER : (event: SseEvent) => matches(error, event);
    return (this.opening ??= { judgeEarlyEvent: CONTENT, isErrorEvent });
  }

  /** Moves on to the next fallback, and builds its vendor's request (a fault of its adapter throws). */
  override nextFallback(caller: CallerKey | undefined): boolean {
    if (!super.nextFallback(caller)) return false;
    this.adapter = this.upstreamRoute.adapter!;
    this.opening = undefined;
    this.build();
    return true;
  }
}

/**
 * The call of a request on a route some plugin adapts: adapted when the model's plugin adapts it, else
 * the forwarded one.
 */
export function callOnAdaptedRoute(
  catalog: CallCatalog,
  route: UpstreamRouteId,
  resolved: ResolvedModel,
  stream: boolean,
  client: () => JsonRequestBody,
): CompatibleCall {
  if (resolved.plugin.routes[route]?.adapter) return new AdaptedCall(catalog, route, resolved, stream, client);
  return new CompatibleCall(catalog, route, resolved, stream, client);
}
