import { KNOWN_FIELDS, unknownField } from './known-fields.ts';
import { SUPPORTED_CONTRACT_VERSIONS, type AuthStyle, type ProviderPlugin, type RouteId, type UpstreamRouteId } from './plugin-contract.ts';
import { authProblem, credentialHeaderNames } from './validate-auth.ts';
import { guardHooks } from './plugin-fault.ts';

export const ROUTE_IDS: readonly RouteId[] = ['chat', 'chat-completions', 'messages', 'count-tokens', 'responses'];
const UPSTREAM_ROUTE_IDS: readonly string[] = ROUTE_IDS.filter((route) => route !== 'chat');
const WIRE_FORMATS: readonly string[] = ['chat-completions', 'responses', 'messages', 'count-tokens'];
const ID_FORMS: readonly string[] = ['prefixed', 'native'];

/**
 * A plugin that does not fit the contract, on one line: the plugin, the bad field and, when known, the
 * file it is declared in (or the plugin's directory, when there is no file to name).
 */
export class PluginLoadError extends Error {
  constructor(
    readonly plugin: string,
    readonly field: string,
    readonly problem: string,
    readonly location?: string,
  ) {
    super(`plugin '${plugin}': ${field}: ${problem}${location ? ` (in ${location})` : ''}`);
    this.name = 'PluginLoadError';
  }

  /** The same error, naming the file (or directory) of the plugin. */
  at(location: string): PluginLoadError {
    return this.location ? this : new PluginLoadError(this.plugin, this.field, this.problem, location);
  }
}

/** A manifest that cannot be read: names the manifest file and the bad key or entry, on one line. */
export class ManifestError extends PluginLoadError {
  constructor(
    readonly manifestPath: string,
    field: string,
    problem: string,
  ) {
    super('manifest', field, problem, manifestPath);
    this.message = `manifest ${manifestPath}: ${field}: ${problem}`;
    this.name = 'ManifestError';
  }
}

/** The wire formats each upstream route key may speak (today one each, the route's own): a route's `format` must be one of them. */
const FORMATS_OF_ROUTE: Readonly<Record<UpstreamRouteId, readonly string[]>> = {
  'chat-completions': ['chat-completions'],
  messages: ['messages'],
  'count-tokens': ['count-tokens'],
  responses: ['responses'],
};

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
const isName = (value: unknown): value is string => typeof value === 'string' && /^[A-Za-z0-9][A-Za-z0-9._:-]*$/.test(value);

/**
 * Checks one plugin whole, as it came from its module (so nothing about it is trusted), and throws a
 * {@link PluginLoadError} naming the first bad field. Cross-plugin checks (an ID claimed twice) are the
 * registry's.
 */
export function validatePlugin(name: string, candidate: unknown): ProviderPlugin {
  const fail = (field: string, problem: string): never => {
    throw new PluginLoadError(name, field, problem);
  };
  if (!isRecord(candidate)) return fail('default export', 'must be the object made by definePlugin({...})');
  const plugin = candidate;
  /** Refuses a field the contract does not know, under `at` (`''` for the plugin's top level). */
  const exact = (value: Record<string, unknown>, known: readonly string[], at: string) => {
    const unknown = unknownField(value, known);
    if (unknown) fail(at ? `${at}.${unknown.field}` : unknown.field, unknown.problem);
  };
  exact(plugin, KNOWN_FIELDS.plugin, '');
  const supported = SUPPORTED_CONTRACT_VERSIONS.join(', ');
  if (plugin.contract === undefined) fail('contract', `missing: declare the contract version the plugin is written for (this gateway supports ${supported})`);
  if (!(SUPPORTED_CONTRACT_VERSIONS as readonly unknown[]).includes(plugin.contract)) {
    fail('contract', `version ${JSON.stringify(plugin.contract)} is not supported (this gateway supports ${supported})`);
  }
  if (plugin.vendor !== name) fail('vendor', `must equal the plugin's folder and manifest name '${name}', got ${JSON.stringify(plugin.vendor)}`);
  if (!/^[a-z0-9][a-z0-9-]*$/.test(name)) fail('vendor', 'must be lower case letters, digits and dashes');
  if (plugin.envPrefix !== undefined && !(typeof plugin.envPrefix === 'string' && /^[A-Z][A-Z0-9_]*$/.test(plugin.envPrefix))) {
    fail('envPrefix', 'must be upper case letters, digits and underscores');
  }

  if (!isRecord(plugin.routes)) return fail('routes', 'must be an object keyed by route');
  const routes = plugin.routes;
  for (const [routeId, route] of Object.entries(routes)) {
    const field = `routes.${routeId}`;
    if (!UPSTREAM_ROUTE_IDS.includes(routeId)) fail(field, `unknown route (known: ${UPSTREAM_ROUTE_IDS.join(', ')})`);
    if (!isRecord(route)) return fail(field, 'must be an object');
    exact(route, KNOWN_FIELDS.route, field);
    if (typeof route.path !== 'string' || !route.path.startsWith('/')) fail(`${field}.path`, "must be a path starting with '/'");
    if (!WIRE_FORMATS.includes(route.format as string)) fail(`${field}.format`, `must be one of ${WIRE_FORMATS.join(', ')}`);
    const keyFormat = FORMATS_OF_ROUTE[routeId as UpstreamRouteId].join("' or '");
    if (!FORMATS_OF_ROUTE[routeId as UpstreamRouteId].includes(route.format as string)) {
      fail(`${field}.format`, `is '${String(route.format)}', but the route '${routeId}' speaks '${keyFormat}': declare format '${keyFormat}', or declare this upstream under routes.${String(route.format)}`);
    }
    const badAuth = authProblem(route.auth);
    if (badAuth) fail(`${field}.auth${badAuth[0]}`, badAuth[1]);
    const credentialNames = credentialHeaderNames(route.auth as AuthStyle);
    if (route.modelIds !== undefined) {
      if (!Array.isArray(route.modelIds) || route.modelIds.length === 0 || route.modelIds.some((form) => !ID_FORMS.includes(form))) {
        fail(`${field}.modelIds`, `must be a non-empty list of ${ID_FORMS.join(', ')}`);
      }
    }
    for (const key of ['forwardHeaders'] as const) {
      const headers = route[key];
      if (headers !== undefined && (!Array.isArray(headers) || headers.some((header) => typeof header !== 'string' || header !== header.toLowerCase()))) {
        fail(`${field}.${key}`, 'must be a list of lower case header names');
      } else if (headers?.some((header) => credentialNames.includes(header))) {
        fail(`${field}.${key}`, `must not name ${credentialNames.join(' or ')}: the client's gateway key never goes upstream, only the declared credential does`);
      }
    }
    if (route.defaultHeaders !== undefined && (!isRecord(route.defaultHeaders) || Object.values(route.defaultHeaders).some((v) => typeof v !== 'string'))) {
      fail(`${field}.defaultHeaders`, 'must map header names to strings');
    }
    const credentialDefault = Object.keys(route.defaultHeaders ?? {}).find((header) => credentialNames.includes(header.toLowerCase()));
    if (credentialDefault) {
      fail(`${field}.defaultHeaders`, `must not set '${credentialDefault}': credentials come from the endpoint's configured key, sent as the route's auth declares`);
    }
  }

  if (plugin.nativeChat !== undefined) {
    const adapter = plugin.nativeChat;
    if (!isRecord(adapter)) return fail('nativeChat', 'must be an object');
    exact(adapter, KNOWN_FIELDS.nativeChat, 'nativeChat');
    if (!(typeof adapter.route === 'string' && adapter.route in routes)) fail('nativeChat.route', `'${String(adapter.route)}' is not one of the plugin's routes`);
    if (typeof adapter.buildRequest !== 'function') fail('nativeChat.buildRequest', 'must be a function');
    if (typeof adapter.readText !== 'function') fail('nativeChat.readText', 'must be a function');
  }

  if (!Array.isArray(plugin.models) || plugin.models.length === 0) return fail('models', 'must be a non-empty list');
  const modelIds = new Set<string>();
  const modelRoutes = new Map<string, readonly string[]>();
  plugin.models.forEach((model: unknown, index) => {
    const field = `models[${index}]`;
    if (!isRecord(model)) return fail(field, 'must be an object');
    exact(model, KNOWN_FIELDS.model, field);
    if (!isName(model.id) || model.id.includes('/')) fail(`${field}.id`, 'must be a model name without the vendor prefix');
    const id = model.id as string;
    const spellings = [id, ...(Array.isArray(model.alternateIds) ? model.alternateIds : [])];
    if (model.alternateIds !== undefined && (!Array.isArray(model.alternateIds) || !model.alternateIds.every(isName))) {
      fail(`${field}.alternateIds`, 'must be a list of model IDs');
    }
    for (const spelling of spellings) {
      if (modelIds.has(spelling)) fail(`${field}.id`, `duplicate model ID '${spelling}'`);
      modelIds.add(spelling);
    }
    if (typeof model.listed !== 'boolean') fail(`${field}.listed`, 'must be true or false');
    if (!Array.isArray(model.routes) || model.routes.length === 0) return fail(`${field}.routes`, 'must be a non-empty list');
    model.routes.forEach((route: unknown, routeIndex: number) => {
      const routeField = `${field}.routes[${routeIndex}]`;
      if (!ROUTE_IDS.includes(route as RouteId)) fail(routeField, `unknown route '${String(route)}' (known: ${ROUTE_IDS.join(', ')})`);
      if (route === 'chat' && plugin.nativeChat === undefined) fail(routeField, "the model serves 'chat' but the plugin declares no nativeChat adapter");
      if (route !== 'chat' && !((route as string) in routes)) fail(routeField, `route '${String(route)}' is not declared in the plugin's routes`);
    });
    modelRoutes.set(`${name}/${id}`, model.routes as string[]);
    for (const spelling of (model.alternateIds as string[] | undefined) ?? []) modelRoutes.set(`${name}/${spelling}`, model.routes as string[]);
    const pricing = model.pricing;
    if (!isRecord(pricing)) return fail(`${field}.pricing`, 'missing: give input, cachedInput and output as USD per 1M tokens (numbers >= 0)');
    exact(pricing, KNOWN_FIELDS.pricing, `${field}.pricing`);
    for (const key of KNOWN_FIELDS.pricing) {
      if (pricing[key] === undefined) fail(`${field}.pricing.${key}`, 'missing: USD per 1M tokens (a number >= 0)');
      if (!(typeof pricing[key] === 'number' && pricing[key] >= 0)) fail(`${field}.pricing.${key}`, `must be USD per 1M tokens (a number >= 0), got ${JSON.stringify(pricing[key])}`);
    }
    if (model.webSearch !== undefined && typeof model.webSearch !== 'boolean') fail(`${field}.webSearch`, 'must be true or false');
    if (model.maxOutputTokens !== undefined && !(Number.isSafeInteger(model.maxOutputTokens) && (model.maxOutputTokens as number) > 0)) fail(`${field}.maxOutputTokens`, 'must be a positive integer');
    if (model.upstreamModel !== undefined && typeof model.upstreamModel !== 'string') fail(`${field}.upstreamModel`, 'must be a string');
    if (model.upstreamModels !== undefined) {
      if (!isRecord(model.upstreamModels)) return fail(`${field}.upstreamModels`, 'must map routes to names');
      for (const [route, upstreamName] of Object.entries(model.upstreamModels)) {
        if (!ROUTE_IDS.includes(route as RouteId) || typeof upstreamName !== 'string') fail(`${field}.upstreamModels.${route}`, 'must map a known route to a name');
      }
    }
  });

  const aliases: unknown = plugin.aliases ?? [];
  if (!Array.isArray(aliases)) return fail('aliases', 'must be a list');
  aliases.forEach((alias: unknown, index) => {
    const field = `aliases[${index}]`;
    if (!isRecord(alias)) return fail(field, 'must be an object');
    exact(alias, KNOWN_FIELDS.alias, field);
    if (!isName(alias.id) || alias.id.includes('/')) fail(`${field}.id`, 'must be a bare ID without a vendor prefix');
    if (modelIds.has(alias.id as string)) fail(`${field}.id`, `'${String(alias.id)}' is also a model ID`);
    if (!Array.isArray(alias.routes) || alias.routes.length === 0) return fail(`${field}.routes`, 'must be a non-empty list');
    for (const route of alias.routes) if (!ROUTE_IDS.includes(route)) fail(`${field}.routes`, `unknown route '${String(route)}'`);
    const targetRoutes = modelRoutes.get(alias.target as string);
    if (!targetRoutes) return fail(`${field}.target`, `'${String(alias.target)}' is not one of the plugin's models (use the prefixed ID)`);
    const missing = (alias.routes as string[]).filter((route) => !targetRoutes.includes(route));
    if (missing.length) fail(`${field}.target`, `'${String(alias.target)}' does not serve the alias's route(s) ${missing.join(', ')}`);
    if (alias.listed !== undefined && typeof alias.listed !== 'boolean') fail(`${field}.listed`, 'must be true or false');
  });
  const aliasIds = aliases.map((alias) => (alias as { id: string }).id);
  const duplicateAlias = aliasIds.find((id, index) => aliasIds.indexOf(id) !== index);
  if (duplicateAlias) fail('aliases', `duplicate alias '${duplicateAlias}'`);

  const scoped = (key: 'streamFixups' | 'usageExtractors', functionField: 'fixup' | 'extractor') => {
    const list: unknown = plugin[key] ?? [];
    if (!Array.isArray(list)) return fail(key, 'must be a list');
    list.forEach((entry: unknown, index) => {
      const field = `${key}[${index}]`;
      if (!isRecord(entry)) return fail(field, 'must be an object');
      exact(entry, key === 'streamFixups' ? KNOWN_FIELDS.streamFixup : KNOWN_FIELDS.usageExtractor, field);
      if (!(typeof entry.route === 'string' && entry.route in routes)) fail(`${field}.route`, `'${String(entry.route)}' is not one of the plugin's routes`);
      const models = entry.models;
      if (models !== undefined || key === 'streamFixups') {
        if (!Array.isArray(models) || (key === 'streamFixups' && models.length === 0)) return fail(`${field}.models`, 'must be a list of the plugin\'s model IDs');
        for (const model of models) {
          if (!modelRoutes.get(model)?.includes(entry.route as UpstreamRouteId)) {
            fail(`${field}.models`, `'${String(model)}' is not a model of the plugin on route '${String(entry.route)}' (use the prefixed ID)`);
          }
        }
      }
      const fn = entry[functionField];
      const ok = functionField === 'fixup' ? typeof fn === 'function' : isRecord(fn) && typeof fn.fromBody === 'function' && typeof fn.fromStreamEvent === 'function';
      if (!ok) fail(`${field}.${functionField}`, functionField === 'fixup' ? 'must be a function' : 'must have fromBody and fromStreamEvent functions');
    });
  };
  scoped('streamFixups', 'fixup');
  scoped('usageExtractors', 'extractor');
  (plugin.streamFixups as unknown[] | undefined)?.forEach((entry, index) => {
    const createState = (entry as Record<string, unknown>).createState;
    if (createState !== undefined && typeof createState !== 'function') fail(`streamFixups[${index}].createState`, 'must be a function');
  });
  // Hooks come out guarded: a throw is the plugin's fault, named with the plugin and the hook.
  return guardHooks(plugin as unknown as ProviderPlugin);
}
