import { closestName, KNOWN_FIELDS, unknownFields } from './known-fields.ts';
import {
  SUPPORTED_CONTRACT_VERSIONS,
  type AuthStyle,
  type ProviderPlugin,
  type RouteId,
  type UpstreamRouteId,
} from './plugin-contract.ts';
import { guardAdapters } from './adapter-hooks.ts';
import { adapterProblems } from './validate-adapter.ts';
import { authProblems, credentialHeaderNames } from './validate-auth.ts';
import { guardHooks } from './plugin-fault.ts';

export const ROUTE_IDS: readonly RouteId[] = ['chat', 'chat-completions', 'messages', 'count-tokens', 'responses'];
const UPSTREAM_ROUTE_IDS: readonly string[] = ROUTE_IDS.filter((route) => route !== 'chat');
const WIRE_FORMATS: readonly string[] = ['chat-completions', 'responses', 'messages', 'count-tokens'];
const ID_FORMS: readonly string[] = ['prefixed', 'native'];

/**
 * A plugin that does not fit the contract, on one line: the plugin, the bad field and, when known, the
 * file it is declared in (or the plugin's directory, when there is no file to name).
 *
 * One error may carry several problems (every problem of a plugin, of every plugin loaded):
 * {@link PluginLoadError.combine} makes it, {@link PluginLoadError.problems} lists them one per line,
 * and `message` joins them with `; `. `plugin`, `field`, `problem` and `location` are the first one's.
 */
export class PluginLoadError extends Error {
  /** The single problems this error carries, when it carries more than one. */
  #parts: readonly PluginLoadError[] | undefined;

  constructor(
    readonly plugin: string,
    readonly field: string,
    readonly problem: string,
    readonly location?: string,
  ) {
    super(`plugin '${plugin}': ${field}: ${problem}${location ? ` (in ${location})` : ''}`);
    this.name = 'PluginLoadError';
  }

  /**
   * One error carrying every problem of `errors` (each of them may carry several already), in order;
   * the error itself when there is only one. `errors` must not be empty.
   */
  static combine(errors: readonly PluginLoadError[]): PluginLoadError {
    const parts = errors.flatMap((error) => error.parts);
    const first = parts[0];
    if (!first) throw new RangeError('PluginLoadError.combine needs at least one error');
    if (parts.length === 1) return first;
    const combined = new PluginLoadError(first.plugin, first.field, first.problem, first.location);
    combined.#parts = parts;
    combined.message = parts.map((part) => part.message).join('; ');
    return combined;
  }

  /** Each problem as an error of its own (this error alone when it carries one). */
  get parts(): readonly PluginLoadError[] {
    return this.#parts ?? [this];
  }

  /** Every problem, one line each: the plugin (or manifest), the field and where it is declared. */
  get problems(): readonly string[] {
    return this.parts.map((part) => part.message);
  }

  /** The same error, naming the file (or directory) of the plugin where a problem names none. */
  at(location: string): PluginLoadError {
    if (this.#parts) return PluginLoadError.combine(this.#parts.map((part) => part.at(location)));
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

/**
 * The wire formats each upstream route key may speak (today one each, the route's own): a route's `format` must be one
 * of them.
 */
const FORMATS_OF_ROUTE: Readonly<Record<UpstreamRouteId, readonly string[]>> = {
  'chat-completions': ['chat-completions'],
  messages: ['messages'],
  'count-tokens': ['count-tokens'],
  responses: ['responses'],
};

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
const isName = (value: unknown): value is string =>
  typeof value === 'string' && /^[A-Za-z0-9][A-Za-z0-9._:-]*$/.test(value);

/**
 * Checks one plugin whole, as it came from its module (so nothing about it is trusted), and throws a
 * {@link PluginLoadError} carrying every bad field, each named with its path. A check that needs an
 * earlier one to pass (a field of the wrong type, a reference to a route or model the plugin does not
 * declare validly) is skipped when that one fails, so one mistake is one problem. Cross-plugin checks
 * (an ID claimed twice) are the registry's.
 */
export function validatePlugin(name: string, candidate: unknown): ProviderPlugin {
  const problems: PluginLoadError[] = [];
  const fail = (field: string, problem: string): void => {
    problems.push(new PluginLoadError(name, field, problem));
  };
  if (!isRecord(candidate))
    throw new PluginLoadError(name, 'default export', 'must be the object made by definePlugin({...})');
  const plugin = candidate;
  /** Refuses each field the contract does not know, under `at` (`''` for the plugin's top level). */
  const exact = (value: Record<string, unknown>, known: readonly string[], at: string) => {
    for (const unknown of unknownFields(value, known))
      fail(at ? `${at}.${unknown.field}` : unknown.field, unknown.problem);
  };
  exact(plugin, KNOWN_FIELDS.plugin, '');
  const supported = SUPPORTED_CONTRACT_VERSIONS.join(', ');
  if (plugin.contract === undefined)
    fail(
      'contract',
      `missing: declare the contract version the plugin is written for (this gateway supports ${supported})`,
    );
  else if (!(SUPPORTED_CONTRACT_VERSIONS as readonly unknown[]).includes(plugin.contract)) {
    fail(
      'contract',
      `version ${JSON.stringify(plugin.contract)} is not supported (this gateway supports ${supported})`,
    );
  }
  if (plugin.vendor !== name)
    fail('vendor', `must equal the plugin's folder and manifest name '${name}', got ${JSON.stringify(plugin.vendor)}`);
  if (!/^[a-z0-9][a-z0-9-]*$/.test(name)) fail('vendor', 'must be lower case letters, digits and dashes');
  if (
    plugin.envPrefix !== undefined &&
    !(typeof plugin.envPrefix === 'string' && /^[A-Z][A-Z0-9_]*$/.test(plugin.envPrefix))
  ) {
    fail('envPrefix', 'must be upper case letters, digits and underscores');
  }

  // The routes the plugin declares, for the checks of fields that name one; `undefined` when `routes`
  // itself is refused (those checks are skipped then). A misspelled route key stands for the route it
  // was meant to be, so that what names that route is not refused a second time for it.
  let declaredRoutes: Set<string> | undefined;
  if (!isRecord(plugin.routes)) fail('routes', 'must be an object keyed by route');
  else {
    declaredRoutes = new Set(Object.keys(plugin.routes));
    for (const [routeId, route] of Object.entries(plugin.routes)) {
      const field = `routes.${routeId}`;
      const knownRoute = UPSTREAM_ROUTE_IDS.includes(routeId);
      if (!knownRoute) {
        const meant = closestName(routeId, UPSTREAM_ROUTE_IDS);
        if (meant) declaredRoutes.add(meant);
        fail(
          field,
          meant ? `unknown route: did you mean '${meant}'?` : `unknown route (known: ${UPSTREAM_ROUTE_IDS.join(', ')})`,
        );
      }
      if (!isRecord(route)) {
        fail(field, 'must be an object');
        continue;
      }
      exact(route, KNOWN_FIELDS.route, field);
      if (typeof route.path !== 'string' || !route.path.startsWith('/'))
        fail(`${field}.path`, "must be a path starting with '/'");
      if (!WIRE_FORMATS.includes(route.format as string))
        fail(`${field}.format`, `must be one of ${WIRE_FORMATS.join(', ')}`);
      else if (knownRoute && !FORMATS_OF_ROUTE[routeId as UpstreamRouteId].includes(route.format as string)) {
        const keyFormat = FORMATS_OF_ROUTE[routeId as UpstreamRouteId].join("' or '");
        fail(
          `${field}.format`,
          `is '${String(route.format)}', but the route '${routeId}' speaks '${keyFormat}': declare format '${keyFormat}', or declare this upstream under routes.${String(route.format)}`,
        );
      }
      const badAuth = authProblems(route.auth);
      for (const [suffix, problem] of badAuth) fail(`${field}.auth${suffix}`, problem);
      // With a bad auth, the names that carry a credential whatever the auth are still checked.
      const credentialNames = credentialHeaderNames(badAuth.length ? undefined : (route.auth as AuthStyle));
      if (route.modelIds !== undefined) {
        if (
          !Array.isArray(route.modelIds) ||
          route.modelIds.length === 0 ||
          route.modelIds.some((form) => !ID_FORMS.includes(form))
        ) {
          fail(`${field}.modelIds`, `must be a non-empty list of ${ID_FORMS.join(', ')}`);
        }
      }
      for (const key of ['forwardHeaders'] as const) {
        const headers = route[key];
        if (
          headers !== undefined &&
          (!Array.isArray(headers) ||
            headers.some((header) => typeof header !== 'string' || header !== header.toLowerCase()))
        ) {
          fail(`${field}.${key}`, 'must be a list of lower case header names');
        } else if (headers?.some((header) => credentialNames.includes(header))) {
          fail(
            `${field}.${key}`,
            `must not name ${credentialNames.join(' or ')}: the client's gateway key never goes upstream, only the declared credential does`,
          );
        }
      }
      if (
        route.defaultHeaders !== undefined &&
        (!isRecord(route.defaultHeaders) || Object.values(route.defaultHeaders).some((v) => typeof v !== 'string'))
      ) {
        fail(`${field}.defaultHeaders`, 'must map header names to strings');
      } else {
        const credentialDefault = Object.keys(route.defaultHeaders ?? {}).find((header) =>
          credentialNames.includes(header.toLowerCase()),
        );
        if (credentialDefault) {
          fail(
            `${field}.defaultHeaders`,
            `must not set '${credentialDefault}': credentials come from the endpoint's configured key, sent as the route's auth declares`,
          );
        }
      }
      if (route.adapter !== undefined) {
        const problemsOfAdapter = adapterProblems(route.adapter, routeId);
        for (const [suffix, problem] of problemsOfAdapter) fail(`${field}.adapter${suffix}`, problem);
      }
    }
  }
  /** Whether `route` names a route the plugin declares; `undefined` when that cannot be told (`routes` is refused). */
  const declares = (route: unknown): boolean | undefined =>
    declaredRoutes ? typeof route === 'string' && declaredRoutes.has(route) : undefined;

  if (plugin.nativeChat !== undefined) {
    const adapter = plugin.nativeChat;
    if (!isRecord(adapter)) fail('nativeChat', 'must be an object');
    else {
      exact(adapter, KNOWN_FIELDS.nativeChat, 'nativeChat');
      if (declares(adapter.route) === false)
        fail('nativeChat.route', `'${String(adapter.route)}' is not one of the plugin's routes`);
      if (typeof adapter.buildRequest !== 'function') fail('nativeChat.buildRequest', 'must be a function');
      if (typeof adapter.readText !== 'function') fail('nativeChat.readText', 'must be a function');
    }
  }

  // Every ID and alternate ID of the plugin's models, and the routes each serves (canonical IDs;
  // `undefined` routes when the model's list is refused). `modelsComplete` is false when some model's
  // IDs could not be read: a reference to a model not found is then not refused (it may be that one).
  const modelIds = new Set<string>();
  const modelRoutes = new Map<string, readonly string[] | undefined>();
  let modelsComplete = true;
  if (!Array.isArray(plugin.models) || plugin.models.length === 0) {
    fail('models', 'must be a non-empty list');
    modelsComplete = false;
  } else {
    plugin.models.forEach((model: unknown, index) => {
      const field = `models[${index}]`;
      if (!isRecord(model)) {
        fail(field, 'must be an object');
        modelsComplete = false;
        return;
      }
      exact(model, KNOWN_FIELDS.model, field);
      const spellings: string[] = [];
      if (!isName(model.id) || model.id.includes('/')) {
        fail(`${field}.id`, 'must be a model name without the vendor prefix');
        modelsComplete = false;
      } else spellings.push(model.id);
      if (model.alternateIds !== undefined) {
        if (!Array.isArray(model.alternateIds) || !model.alternateIds.every(isName)) {
          fail(`${field}.alternateIds`, 'must be a list of model IDs');
          modelsComplete = false;
        } else spellings.push(...(model.alternateIds as string[]));
      }
      for (const spelling of spellings) {
        if (modelIds.has(spelling)) fail(`${field}.id`, `duplicate model ID '${spelling}'`);
        modelIds.add(spelling);
      }
      if (typeof model.listed !== 'boolean') fail(`${field}.listed`, 'must be true or false');
      let routes: string[] | undefined;
      if (!Array.isArray(model.routes) || model.routes.length === 0)
        fail(`${field}.routes`, 'must be a non-empty list');
      else {
        // A route it cannot be told is meant (a misspelling) leaves the model's routes unknown to what names the model.
        routes = model.routes.every((route) => ROUTE_IDS.includes(route as RouteId))
          ? (model.routes as string[])
          : undefined;
        model.routes.forEach((route: unknown, routeIndex: number) => {
          const routeField = `${field}.routes[${routeIndex}]`;
          if (!ROUTE_IDS.includes(route as RouteId))
            fail(routeField, `unknown route '${String(route)}' (known: ${ROUTE_IDS.join(', ')})`);
          else if (route === 'chat') {
            if (plugin.nativeChat === undefined)
              fail(routeField, "the model serves 'chat' but the plugin declares no nativeChat adapter");
          } else if (declares(route) === false)
            fail(routeField, `route '${String(route)}' is not declared in the plugin's routes`);
        });
      }
      for (const spelling of spellings) modelRoutes.set(`${name}/${spelling}`, routes);
      const pricing = model.pricing;
      if (!isRecord(pricing))
        fail(`${field}.pricing`, 'missing: give input, cachedInput and output as USD per 1M tokens (numbers >= 0)');
      else {
        exact(pricing, KNOWN_FIELDS.pricing, `${field}.pricing`);
        for (const key of KNOWN_FIELDS.pricing) {
          if (pricing[key] === undefined) fail(`${field}.pricing.${key}`, 'missing: USD per 1M tokens (a number >= 0)');
          else if (!(typeof pricing[key] === 'number' && pricing[key] >= 0))
            fail(
              `${field}.pricing.${key}`,
              `must be USD per 1M tokens (a number >= 0), got ${JSON.stringify(pricing[key])}`,
            );
        }
      }
      if (model.webSearch !== undefined && typeof model.webSearch !== 'boolean')
        fail(`${field}.webSearch`, 'must be true or false');
      if (
        model.maxOutputTokens !== undefined &&
        !(Number.isSafeInteger(model.maxOutputTokens) && (model.maxOutputTokens as number) > 0)
      )
        fail(`${field}.maxOutputTokens`, 'must be a positive integer');
      if (model.upstreamModel !== undefined && typeof model.upstreamModel !== 'string')
        fail(`${field}.upstreamModel`, 'must be a string');
      if (model.upstreamModels !== undefined) {
        if (!isRecord(model.upstreamModels)) fail(`${field}.upstreamModels`, 'must map routes to names');
        else {
          for (const [route, upstreamName] of Object.entries(model.upstreamModels)) {
            if (!ROUTE_IDS.includes(route as RouteId) || typeof upstreamName !== 'string')
              fail(`${field}.upstreamModels.${route}`, 'must map a known route to a name');
          }
        }
      }
    });
  }
  /**
   * Whether the plugin has the model `id` (canonical) on `route`: `false` when it does not, `undefined`
   * when that cannot be told (the model's routes, or some model's IDs, are refused already).
   */
  const servesModel = (id: unknown, route: string): boolean | undefined => {
    if (typeof id !== 'string' || !modelRoutes.has(id)) return modelsComplete ? false : undefined;
    const routes = modelRoutes.get(id);
    return routes ? routes.includes(route) : undefined;
  };

  const aliases: unknown = plugin.aliases ?? [];
  if (!Array.isArray(aliases)) fail('aliases', 'must be a list');
  else {
    const aliasIds: string[] = [];
    aliases.forEach((alias: unknown, index) => {
      const field = `aliases[${index}]`;
      if (!isRecord(alias)) return fail(field, 'must be an object');
      exact(alias, KNOWN_FIELDS.alias, field);
      if (!isName(alias.id) || alias.id.includes('/')) fail(`${field}.id`, 'must be a bare ID without a vendor prefix');
      else {
        if (modelIds.has(alias.id)) fail(`${field}.id`, `'${alias.id}' is also a model ID`);
        aliasIds.push(alias.id);
      }
      let routes: string[] | undefined;
      if (!Array.isArray(alias.routes) || alias.routes.length === 0)
        fail(`${field}.routes`, 'must be a non-empty list');
      else {
        for (const route of alias.routes)
          if (!ROUTE_IDS.includes(route)) fail(`${field}.routes`, `unknown route '${String(route)}'`);
        routes = (alias.routes as unknown[]).filter((route): route is string => ROUTE_IDS.includes(route as RouteId));
      }
      if (typeof alias.target !== 'string' || !modelRoutes.has(alias.target)) {
        if (modelsComplete)
          fail(`${field}.target`, `'${String(alias.target)}' is not one of the plugin's models (use the prefixed ID)`);
      } else if (routes) {
        const missing = routes.filter((route) => servesModel(alias.target, route) === false);
        if (missing.length)
          fail(`${field}.target`, `'${alias.target}' does not serve the alias's route(s) ${missing.join(', ')}`);
      }
      if (alias.listed !== undefined && typeof alias.listed !== 'boolean')
        fail(`${field}.listed`, 'must be true or false');
    });
    const duplicateAliases = new Set(aliasIds.filter((id, index) => aliasIds.indexOf(id) !== index));
    for (const duplicate of duplicateAliases) fail('aliases', `duplicate alias '${duplicate}'`);
  }

  const scoped = (key: 'streamFixups' | 'usageExtractors', functionField: 'fixup' | 'extractor') => {
    const list: unknown = plugin[key] ?? [];
    if (!Array.isArray(list)) return fail(key, 'must be a list');
    list.forEach((entry: unknown, index) => {
      const field = `${key}[${index}]`;
      if (!isRecord(entry)) return fail(field, 'must be an object');
      exact(entry, key === 'streamFixups' ? KNOWN_FIELDS.streamFixup : KNOWN_FIELDS.usageExtractor, field);
      const onRoute = declares(entry.route);
      if (onRoute === false) fail(`${field}.route`, `'${String(entry.route)}' is not one of the plugin's routes`);
      const models = entry.models;
      if (models !== undefined || key === 'streamFixups') {
        if (!Array.isArray(models) || (key === 'streamFixups' && models.length === 0))
          fail(`${field}.models`, "must be a list of the plugin's model IDs");
        else if (onRoute) {
          for (const model of models) {
            if (servesModel(model, entry.route as string) === false) {
              fail(
                `${field}.models`,
                `'${String(model)}' is not a model of the plugin on route '${String(entry.route)}' (use the prefixed ID)`,
              );
            }
          }
        }
      }
      const fn = entry[functionField];
      const ok =
        functionField === 'fixup'
          ? typeof fn === 'function'
          : isRecord(fn) && typeof fn.fromBody === 'function' && typeof fn.fromStreamEvent === 'function';
      if (!ok)
        fail(
          `${field}.${functionField}`,
          functionField === 'fixup' ? 'must be a function' : 'must have fromBody and fromStreamEvent functions',
        );
      if (key === 'streamFixups' && entry.createState !== undefined && typeof entry.createState !== 'function')
        fail(`${field}.createState`, 'must be a function');
    });
  };
  scoped('streamFixups', 'fixup');
  scoped('usageExtractors', 'extractor');
  if (problems.length) throw PluginLoadError.combine(problems);
  // Hooks come out guarded: a throw is the plugin's fault, named with the plugin and the hook.
  return guardAdapters(guardHooks(plugin as unknown as ProviderPlugin));
}
