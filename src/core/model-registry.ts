import { fieldError, validationError } from './gateway-errors.ts';
import type {
  AliasDeclaration,
  ModelDeclaration,
  ProviderPlugin,
  RouteId,
  StreamFixupDeclaration,
  UpstreamRoute,
  UpstreamRouteId,
  UsageExtractor,
} from '../plugins/plugin-contract.ts';
import { PluginLoadError, ROUTE_IDS } from '../plugins/validate-plugin.ts';
import { describePlugin, originOf } from '../plugins/plugin-origin.ts';
import { routePath } from './route-table.ts';

/** What a requested model ID stands for on one route. */
export interface ResolvedModel {
  /** The ID as the client sent it. */
  readonly requestedId: string;
  /** The concrete model in its canonical prefixed form, e.g. `acme/model-1`; what usage is recorded against. */
  readonly canonicalId: string;
  /** The alias the client used, when it used one. */
  readonly alias?: string;
  readonly plugin: ProviderPlugin;
  readonly model: ModelDeclaration;
}

/**
 * The model ID the provider is sent for a resolved model on a route (its route's own, else the model's upstream ID,
 * else its ID).
 */
export function upstreamModelOf(resolved: ResolvedModel, route: RouteId): string {
  return resolved.model.upstreamModels?.[route] ?? resolved.model.upstreamModel ?? resolved.model.id;
}

export interface CatalogEntry {
  readonly id: string;
  readonly object: 'model';
  readonly owned_by: string;
  /**
   * Only for a model with an adapted route: each client path it serves and how, `adapted` (the
   * plugin's adapter maps the vendor's own format), `forwarded` (byte for byte) or `native` (`/v1/chat`).
   */
  readonly routes?: Readonly<Record<string, 'adapted' | 'forwarded' | 'native'>>;
}

interface ModelEntry {
  readonly plugin: ProviderPlugin;
  readonly model: ModelDeclaration;
  readonly canonicalId: string;
}

type RouteTable = Map<string, { entry: ModelEntry; alias?: string }>;

/**
 * The one source of truth built from the loaded plugins: which ID each route accepts, what it resolves
 * to, the catalog, and the hooks that apply to a route and model. Immutable: a config reload builds a
 * new registry.
 */
export class ModelRegistry {
  private readonly tables = new Map<RouteId, RouteTable>();
  private readonly fixups = new Map<string, StreamFixupDeclaration[]>();
  private readonly byCanonicalId = new Map<string, ModelDeclaration>();
  private readonly extractors = new Map<string, UsageExtractor>();
  readonly catalog: readonly CatalogEntry[];

  /**
   * @param plugins validated plugins in manifest (catalog) order.
   * @param aliasTargets alias → canonical target overrides from the operator's config.
   */
  constructor(
    readonly plugins: readonly ProviderPlugin[],
    aliasTargets: Readonly<Record<string, string>> = {},
  ) {
    for (const route of ROUTE_IDS) this.tables.set(route, new Map());
    const models = this.registerModels(plugins);
    const knownAliases = new Set<string>();
    for (const plugin of plugins) {
      for (const alias of plugin.aliases ?? []) {
        knownAliases.add(alias.id);
        this.registerAlias(plugin, alias, aliasTargets[alias.id] ?? alias.target, models);
      }
      this.registerStreamFixups(plugin, models);
      this.registerUsageExtractors(plugin, models);
    }
    const unknown = Object.keys(aliasTargets).filter((alias) => !knownAliases.has(alias));
    if (unknown.length)
      throw new PluginLoadError('config', 'aliases', `no plugin declares the alias(es) ${unknown.join(', ')}`);
    this.catalog = catalogOf(plugins);
  }

  /** Claims every model's IDs on its routes; the models by each of their prefixed IDs (alternate ones too). */
  private registerModels(plugins: readonly ProviderPlugin[]): Map<string, ModelEntry> {
    const models = new Map<string, ModelEntry>();
    for (const plugin of plugins) {
      for (const model of plugin.models) {
        const entry = { plugin, model, canonicalId: `${plugin.vendor}/${model.id}` };
        this.byCanonicalId.set(entry.canonicalId, model);
        for (const spelling of [model.id, ...(model.alternateIds ?? [])])
          models.set(`${plugin.vendor}/${spelling}`, entry);
        for (const route of model.routes) {
          for (const spelling of this.spellings(plugin, model, route))
            this.claim(route, spelling, { entry }, plugin, 'models');
        }
      }
    }
    return models;
  }

  /** Claims an alias on its routes for `target` (the configured one, else the plugin's), which must serve them all. */
  private registerAlias(
    plugin: ProviderPlugin,
    alias: AliasDeclaration,
    target: string,
    models: ReadonlyMap<string, ModelEntry>,
  ): void {
    const entry = models.get(target);
    if (!entry)
      throw new PluginLoadError(
        plugin.vendor,
        `aliases '${alias.id}'`,
        `the configured target '${target}' is not a known model`,
      );
    const missing = alias.routes.filter((route) => !entry.model.routes.includes(route));
    if (missing.length) {
      throw new PluginLoadError(
        plugin.vendor,
        `aliases '${alias.id}'`,
        `the target '${target}' does not serve the alias's route(s) ${missing.join(', ')}`,
      );
    }
    for (const route of alias.routes) this.claim(route, alias.id, { entry, alias: alias.id }, plugin, 'aliases');
  }

  private registerStreamFixups(plugin: ProviderPlugin, models: ReadonlyMap<string, ModelEntry>): void {
    for (const declaration of plugin.streamFixups ?? []) {
      for (const model of declaration.models) {
        const key = `${declaration.route} ${models.get(model)!.canonicalId}`;
        this.fixups.set(key, [...(this.fixups.get(key) ?? []), declaration]);
      }
    }
  }

  private registerUsageExtractors(plugin: ProviderPlugin, models: ReadonlyMap<string, ModelEntry>): void {
    // An adapted route's usage reader reads the vendor's shapes for every model on it; a declared extractor wins.
    for (const [route, upstream] of Object.entries(plugin.routes)) {
      if (!upstream?.adapter) continue;
      const served = plugin.models.filter((model) => model.routes.includes(route as RouteId));
      for (const { id } of served) this.extractors.set(`${route} ${plugin.vendor}/${id}`, upstream.adapter.usage);
    }
    for (const declaration of plugin.usageExtractors ?? []) {
      const scope = declaration.models ?? plugin.models.map((model) => `${plugin.vendor}/${model.id}`);
      for (const model of scope)
        this.extractors.set(`${declaration.route} ${models.get(model)!.canonicalId}`, declaration.extractor);
    }
  }

  private spellings(plugin: ProviderPlugin, model: ModelDeclaration, route: RouteId): string[] {
    const forms = route === 'chat' ? ['prefixed'] : (plugin.routes[route]?.modelIds ?? ['prefixed']);
    const names = [model.id, ...(model.alternateIds ?? [])];
    return forms.flatMap((form) => (form === 'prefixed' ? names.map((name) => `${plugin.vendor}/${name}`) : names));
  }

  private claim(
    route: RouteId,
    id: string,
    value: { entry: ModelEntry; alias?: string },
    plugin: ProviderPlugin,
    field: string,
  ): void {
    const table = this.tables.get(route)!;
    const holder = table.get(id);
    if (holder) {
      const where = originOf(plugin) ? ` (in ${originOf(plugin)})` : '';
      throw new PluginLoadError(
        plugin.vendor,
        field,
        `'${id}' on route ${route} is already claimed by ${describePlugin(holder.entry.plugin)}${where}`,
      );
    }
    table.set(id, value);
  }

  /** The declaration of a model by its canonical ID (`vendor/id`), undefined for none. */
  model(canonicalId: string): ModelDeclaration | undefined {
    return this.byCanonicalId.get(canonicalId);
  }

  /** Resolves a requested ID on a route, or throws the route's 400 with a field error on `model`. */
  resolve(route: RouteId, id: string): ResolvedModel {
    const found = this.tables.get(route)!.get(id);
    if (found) {
      const { entry, alias } = found;
      return { requestedId: id, canonicalId: entry.canonicalId, alias, plugin: entry.plugin, model: entry.model };
    }
    throw validationError([fieldError('model', this.whyNotAccepted(route, id))], 'model');
  }

  private whyNotAccepted(route: RouteId, id: string): string {
    const here = routePath(route);
    const elsewhere = ROUTE_IDS.filter((other) => other !== route && this.tables.get(other)!.has(id));
    if (elsewhere.length) {
      const { entry } = this.tables.get(elsewhere[0]!)!.get(id)!;
      const spelling = entry.model.routes.includes(route)
        ? this.spellings(entry.plugin, entry.model, route)[0]
        : undefined;
      if (spelling) return `'${id}' is not a model ID on ${here}; use '${spelling}'`;
      return `'${id}' is not available on ${here}; it is served on ${elsewhere.map((other) => routePath(other)).join(', ')}`;
    }
    const bare = id.slice(id.indexOf('/') + 1);
    if (id.includes('/') && this.tables.get(route)!.get(bare)?.alias)
      return `'${id}' is not a model ID; use the alias '${bare}'`;
    return `unknown model '${id}'; GET /v1/models lists the models`;
  }

  /** The upstream route a resolved model is sent to for a client route. */
  upstreamRoute(resolved: ResolvedModel, route: UpstreamRouteId): UpstreamRoute {
    return resolved.plugin.routes[route]!;
  }

  /** The model name the upstream expects on a route. */
  upstreamModel(resolved: ResolvedModel, route: RouteId): string {
    return upstreamModelOf(resolved, route);
  }

  /**
   * The fixup declarations a route's streams of a model go through, in declaration order (each stream makes its own
   * states).
   */
  streamFixups(route: UpstreamRouteId, canonicalId: string): readonly StreamFixupDeclaration[] {
    return this.fixups.get(`${route} ${canonicalId}`) ?? [];
  }

  /** A plugin's own usage extractor for a route and model, when it declares one. */
  usageExtractor(route: UpstreamRouteId, canonicalId: string): UsageExtractor | undefined {
    return this.extractors.get(`${route} ${canonicalId}`);
  }

  /** Every ID a route accepts (aliases included), in declaration order. */
  acceptedIds(route: RouteId): string[] {
    return [...this.tables.get(route)!.keys()];
  }
}

/** The catalog: per plugin, its listed aliases, then its listed models. */
function catalogOf(plugins: readonly ProviderPlugin[]): CatalogEntry[] {
  return plugins.flatMap((plugin) => {
    const entry = (id: string, routes: readonly RouteId[]) =>
      catalogEntry(id, plugin.vendor, servedRoutes(plugin, routes));
    const aliases = (plugin.aliases ?? []).filter((alias) => alias.listed !== false);
    const listed = plugin.models.filter((model) => model.listed);
    return [
      ...aliases.map((alias) => entry(alias.id, alias.routes)),
      ...listed.map((model) => entry(`${plugin.vendor}/${model.id}`, model.routes)),
    ];
  });
}

function catalogEntry(id: string, vendor: string, routes: CatalogEntry['routes']): CatalogEntry {
  return routes ? { id, object: 'model', owned_by: vendor, routes } : { id, object: 'model', owned_by: vendor };
}

/**
 * How an entry's routes reach its vendor, by client path, when one of them is adapted (its vendor's
 * format mapped by the plugin's adapter): otherwise the entry says nothing (every route forwards).
 */
function servedRoutes(plugin: ProviderPlugin, routes: readonly RouteId[]): CatalogEntry['routes'] {
  if (!routes.some((route) => route !== 'chat' && plugin.routes[route]?.adapter)) return undefined;
  const how = (route: RouteId) =>
    route === 'chat' ? 'native' : plugin.routes[route]?.adapter ? 'adapted' : 'forwarded';
  return Object.fromEntries(routes.map((route) => [routePath(route), how(route)]));
}
