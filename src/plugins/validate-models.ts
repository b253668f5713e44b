import { KNOWN_FIELDS, isRecord } from './known-fields.ts';
import type { RouteId } from './plugin-contract.ts';
import type { DeclarationProblems } from './declaration-problems.ts';
import { ROUTE_IDS, type DeclaresRoute } from './validate-routes.ts';

const isName = (value: unknown): value is string =>
  typeof value === 'string' && /^[A-Za-z0-9][A-Za-z0-9._:-]*$/.test(value);
const isRouteId = (route: unknown): route is RouteId => ROUTE_IDS.includes(route as RouteId);

/** What the checks of a plugin's models need to know of the rest of the plugin. */
export interface ModelsContext {
  /** The plugin's name: a model's canonical ID is `<vendor>/<id>`. */
  readonly vendor: string;
  readonly declares: DeclaresRoute;
  /** Whether the plugin declares a nativeChat adapter, which a model serving 'chat' needs. */
  readonly nativeChat: boolean;
}

/** What the plugin's models declare, for the checks of fields that name a model. */
export class DeclaredModels {
  /** Every ID and alternate ID of the plugin's models, bare. */
  readonly ids = new Set<string>();
  /** The routes each canonical ID serves; `undefined` when the model's list is refused. */
  readonly routesOf = new Map<string, readonly string[] | undefined>();
  /**
   * False when some model's IDs could not be read: a reference to a model not found is then not refused (it may be
   * that one).
   */
  complete = true;

  /**
   * Whether the plugin has the model `id` (canonical) on `route`: `false` when it does not, `undefined`
   * when that cannot be told (the model's routes, or some model's IDs, are refused already).
   */
  serves(id: unknown, route: string): boolean | undefined {
    if (typeof id !== 'string' || !this.routesOf.has(id)) return this.complete ? false : undefined;
    const routes = this.routesOf.get(id);
    return routes ? routes.includes(route) : undefined;
  }
}

/** Checks the plugin's `models`, each model whole, and tells what they declare. */
export function checkModels(problems: DeclarationProblems, models: unknown, context: ModelsContext): DeclaredModels {
  const declared = new DeclaredModels();
  if (!Array.isArray(models) || models.length === 0) {
    problems.add('models', 'must be a non-empty list');
    declared.complete = false;
  } else {
    models.forEach((model: unknown, index) => checkModel(problems, model, `models[${index}]`, declared, context));
  }
  return declared;
}

function checkModel(
  problems: DeclarationProblems,
  model: unknown,
  field: string,
  declared: DeclaredModels,
  context: ModelsContext,
): void {
  if (!isRecord(model)) {
    problems.add(field, 'must be an object');
    declared.complete = false;
    return;
  }
  problems.refuseUnknownFields(model, KNOWN_FIELDS.model, field);
  const spellings = checkSpellings(problems, model, field, declared);
  if (typeof model.listed !== 'boolean') problems.add(`${field}.listed`, 'must be true or false');
  const routes = checkModelRoutes(problems, model.routes, field, context);
  for (const spelling of spellings) declared.routesOf.set(`${context.vendor}/${spelling}`, routes);
  checkPricing(problems, model.pricing, `${field}.pricing`);
  checkCapabilities(problems, model, field);
  checkUpstreamNames(problems, model, field);
}

/**
 * The model's valid ID and alternate IDs, each recorded as one of the plugin's; refuses a bad one (the plugin's
 * models are then incomplete) and one another model took already.
 */
function checkSpellings(
  problems: DeclarationProblems,
  model: Record<string, unknown>,
  field: string,
  declared: DeclaredModels,
): string[] {
  const spellings: string[] = [];
  if (!isName(model.id) || model.id.includes('/')) {
    problems.add(`${field}.id`, 'must be a model name without the vendor prefix');
    declared.complete = false;
  } else spellings.push(model.id);
  if (model.alternateIds !== undefined) {
    if (!Array.isArray(model.alternateIds) || !model.alternateIds.every(isName)) {
      problems.add(`${field}.alternateIds`, 'must be a list of model IDs');
      declared.complete = false;
    } else spellings.push(...(model.alternateIds as string[]));
  }
  for (const spelling of spellings) {
    if (declared.ids.has(spelling)) problems.add(`${field}.id`, `duplicate model ID '${spelling}'`);
    declared.ids.add(spelling);
  }
  return spellings;
}

/**
 * Refuses a model's `routes` that are not a non-empty list of routes the plugin serves; the model's routes, or
 * `undefined` when they are refused. A route it cannot be told is meant (a misspelling) leaves the model's routes
 * unknown to what names the model.
 */
function checkModelRoutes(
  problems: DeclarationProblems,
  routes: unknown,
  field: string,
  context: ModelsContext,
): string[] | undefined {
  if (!Array.isArray(routes) || routes.length === 0) {
    problems.add(`${field}.routes`, 'must be a non-empty list');
    return undefined;
  }
  routes.forEach((route: unknown, routeIndex: number) => {
    const routeField = `${field}.routes[${routeIndex}]`;
    if (!isRouteId(route))
      problems.add(routeField, `unknown route '${String(route)}' (known: ${ROUTE_IDS.join(', ')})`);
    else if (route === 'chat') {
      if (!context.nativeChat)
        problems.add(routeField, "the model serves 'chat' but the plugin declares no nativeChat adapter");
    } else if (context.declares(route) === false)
      problems.add(routeField, `route '${String(route)}' is not declared in the plugin's routes`);
  });
  return routes.every(isRouteId) ? (routes as string[]) : undefined;
}

/** Refuses a model's `pricing` that is not input, cachedInput and output as USD per 1M tokens. */
function checkPricing(problems: DeclarationProblems, pricing: unknown, field: string): void {
  if (!isRecord(pricing)) {
    problems.add(field, 'missing: give input, cachedInput and output as USD per 1M tokens (numbers >= 0)');
    return;
  }
  problems.refuseUnknownFields(pricing, KNOWN_FIELDS.pricing, field);
  for (const key of KNOWN_FIELDS.pricing) {
    const price = pricing[key];
    if (price === undefined) problems.add(`${field}.${key}`, 'missing: USD per 1M tokens (a number >= 0)');
    else if (!(typeof price === 'number' && price >= 0))
      problems.add(`${field}.${key}`, `must be USD per 1M tokens (a number >= 0), got ${JSON.stringify(price)}`);
  }
}

/** Refuses a bad `webSearch` or `maxOutputTokens`: what the model can do, when declared. */
function checkCapabilities(problems: DeclarationProblems, model: Record<string, unknown>, field: string): void {
  if (model.webSearch !== undefined && typeof model.webSearch !== 'boolean')
    problems.add(`${field}.webSearch`, 'must be true or false');
  if (
    model.maxOutputTokens !== undefined &&
    !(Number.isSafeInteger(model.maxOutputTokens) && (model.maxOutputTokens as number) > 0)
  )
    problems.add(`${field}.maxOutputTokens`, 'must be a positive integer');
}

/** Refuses a bad `upstreamModel` or `upstreamModels`: the names the vendor knows the model by, when declared. */
function checkUpstreamNames(problems: DeclarationProblems, model: Record<string, unknown>, field: string): void {
  if (model.upstreamModel !== undefined && typeof model.upstreamModel !== 'string')
    problems.add(`${field}.upstreamModel`, 'must be a string');
  if (model.upstreamModels === undefined) return;
  if (!isRecord(model.upstreamModels)) {
    problems.add(`${field}.upstreamModels`, 'must map routes to names');
    return;
  }
  for (const [route, upstreamName] of Object.entries(model.upstreamModels)) {
    if (!isRouteId(route) || typeof upstreamName !== 'string')
      problems.add(`${field}.upstreamModels.${route}`, 'must map a known route to a name');
  }
}

/** Checks the plugin's `aliases` (a list, none by default) against its models; an alias ID given twice is refused. */
export function checkAliases(problems: DeclarationProblems, aliases: unknown, models: DeclaredModels): void {
  if (!Array.isArray(aliases)) {
    problems.add('aliases', 'must be a list');
    return;
  }
  const aliasIds: string[] = [];
  aliases.forEach((alias: unknown, index) => {
    const id = checkAlias(problems, alias, `aliases[${index}]`, models);
    if (id !== undefined) aliasIds.push(id);
  });
  const duplicateAliases = new Set(aliasIds.filter((id, index) => aliasIds.indexOf(id) !== index));
  for (const duplicate of duplicateAliases) problems.add('aliases', `duplicate alias '${duplicate}'`);
}

/** Checks one alias whole; its ID, when that is valid. */
function checkAlias(
  problems: DeclarationProblems,
  alias: unknown,
  field: string,
  models: DeclaredModels,
): string | undefined {
  if (!isRecord(alias)) {
    problems.add(field, 'must be an object');
    return undefined;
  }
  problems.refuseUnknownFields(alias, KNOWN_FIELDS.alias, field);
  let id: string | undefined;
  if (!isName(alias.id) || alias.id.includes('/'))
    problems.add(`${field}.id`, 'must be a bare ID without a vendor prefix');
  else {
    if (models.ids.has(alias.id)) problems.add(`${field}.id`, `'${alias.id}' is also a model ID`);
    id = alias.id;
  }
  const routes = checkAliasRoutes(problems, alias.routes, field);
  checkAliasTarget(problems, alias.target, routes, field, models);
  if (alias.listed !== undefined && typeof alias.listed !== 'boolean')
    problems.add(`${field}.listed`, 'must be true or false');
  return id;
}

/** Refuses an alias's `routes` that are not a non-empty list of routes; the known ones (`undefined`: refused whole). */
function checkAliasRoutes(problems: DeclarationProblems, routes: unknown, field: string): string[] | undefined {
  if (!Array.isArray(routes) || routes.length === 0) {
    problems.add(`${field}.routes`, 'must be a non-empty list');
    return undefined;
  }
  for (const route of routes)
    if (!isRouteId(route)) problems.add(`${field}.routes`, `unknown route '${String(route)}'`);
  return (routes as unknown[]).filter((route): route is string => isRouteId(route));
}

/** Refuses an alias `target` that is not one of the plugin's models, or does not serve every route of the alias. */
function checkAliasTarget(
  problems: DeclarationProblems,
  target: unknown,
  routes: readonly string[] | undefined,
  field: string,
  models: DeclaredModels,
): void {
  if (typeof target !== 'string' || !models.routesOf.has(target)) {
    if (models.complete)
      problems.add(`${field}.target`, `'${String(target)}' is not one of the plugin's models (use the prefixed ID)`);
    return;
  }
  if (!routes) return;
  const missing = routes.filter((route) => models.serves(target, route) === false);
  if (missing.length)
    problems.add(`${field}.target`, `'${target}' does not serve the alias's route(s) ${missing.join(', ')}`);
}
