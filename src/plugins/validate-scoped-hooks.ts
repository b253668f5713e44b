import { KNOWN_FIELDS, isRecord } from './known-fields.ts';
import type { DeclarationProblems } from './declaration-problems.ts';
import type { DeclaredModels } from './validate-models.ts';
import type { DeclaresRoute } from './validate-routes.ts';

/** What an entry of a scoped hook list is checked against: the plugin's routes and models. */
export interface HookScope {
  readonly declares: DeclaresRoute;
  readonly models: DeclaredModels;
}

/** One list of hooks a plugin scopes to one of its routes (and some of its models), as the contract declares it. */
interface ScopedHookKind {
  readonly known: readonly string[];
  /** Whether an entry must name its models (a non-empty list); otherwise none named means every model. */
  readonly modelsRequired: boolean;
  /** The field holding the hook itself, what it must be, and what is said when it is not. */
  readonly hook: 'fixup' | 'extractor';
  readonly isHook: (hook: unknown) => boolean;
  readonly notHook: string;
  /** Whether an entry may carry a `createState` function. */
  readonly takesState: boolean;
}

const SCOPED_HOOK_KINDS: Readonly<Record<'streamFixups' | 'usageExtractors', ScopedHookKind>> = {
  streamFixups: {
    known: KNOWN_FIELDS.streamFixup,
    modelsRequired: true,
    hook: 'fixup',
    isHook: (hook) => typeof hook === 'function',
    notHook: 'must be a function',
    takesState: true,
  },
  usageExtractors: {
    known: KNOWN_FIELDS.usageExtractor,
    modelsRequired: false,
    hook: 'extractor',
    isHook: (hook) =>
      isRecord(hook) && typeof hook.fromBody === 'function' && typeof hook.fromStreamEvent === 'function',
    notHook: 'must have fromBody and fromStreamEvent functions',
    takesState: false,
  },
};

/** Checks the plugin's `streamFixups`, then its `usageExtractors` (each a list, none by default). */
export function checkScopedHooks(
  problems: DeclarationProblems,
  plugin: Record<string, unknown>,
  scope: HookScope,
): void {
  for (const key of ['streamFixups', 'usageExtractors'] as const) {
    const list: unknown = plugin[key] ?? [];
    if (!Array.isArray(list)) problems.add(key, 'must be a list');
    else
      list.forEach((entry: unknown, index) =>
        checkEntry(problems, SCOPED_HOOK_KINDS[key], entry, `${key}[${index}]`, scope),
      );
  }
}

function checkEntry(
  problems: DeclarationProblems,
  kind: ScopedHookKind,
  entry: unknown,
  field: string,
  scope: HookScope,
): void {
  if (!isRecord(entry)) {
    problems.add(field, 'must be an object');
    return;
  }
  problems.refuseUnknownFields(entry, kind.known, field);
  const onRoute = scope.declares(entry.route);
  if (onRoute === false) problems.add(`${field}.route`, `'${String(entry.route)}' is not one of the plugin's routes`);
  if (entry.models !== undefined || kind.modelsRequired) checkEntryModels(problems, kind, entry, field, onRoute, scope);
  if (!kind.isHook(entry[kind.hook])) problems.add(`${field}.${kind.hook}`, kind.notHook);
  if (kind.takesState && entry.createState !== undefined && typeof entry.createState !== 'function')
    problems.add(`${field}.createState`, 'must be a function');
}

/**
 * Refuses an entry's `models` that are not a list of the plugin's models on the entry's route (told only when the
 * route is one the plugin declares).
 */
function checkEntryModels(
  problems: DeclarationProblems,
  kind: ScopedHookKind,
  entry: Record<string, unknown>,
  field: string,
  onRoute: boolean | undefined,
  scope: HookScope,
): void {
  const models = entry.models;
  if (!Array.isArray(models) || (kind.modelsRequired && models.length === 0)) {
    problems.add(`${field}.models`, "must be a list of the plugin's model IDs");
    return;
  }
  if (!onRoute) return;
  for (const model of models) {
    if (scope.models.serves(model, entry.route as string) === false) {
      problems.add(
        `${field}.models`,
        `'${String(model)}' is not a model of the plugin on route '${String(entry.route)}' (use the prefixed ID)`,
      );
    }
  }
}
