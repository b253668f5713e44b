import type {
  NativeChatAdapter,
  ProviderPlugin,
  SseEvent,
  StreamFixupDeclaration,
  TokenUsage,
  UsageExtractor,
  UsageExtractorDeclaration,
} from './plugin-contract.ts';

/**
 * A plugin's hook threw, or returned what the contract does not allow: the fault is the plugin's, not
 * the upstream's. Carries the plugin and the hook (`streamFixups.<name>`,
 * `streamFixups.<name>.createState`, `usageExtractors[<i>].fromBody`,
 * `usageExtractors[<i>].fromStreamEvent`, `nativeChat.buildRequest`, `nativeChat.readText`), and as
 * `cause` the thrown value, or a `TypeError` saying what came back and what the hook may return.
 */
export class PluginFault extends Error {
  constructor(
    readonly plugin: string,
    readonly hook: string,
    cause: unknown,
    /** How the hook failed: it threw, or its result is not of the shape the contract allows. */
    readonly failure: 'threw' | 'returned' = 'threw',
  ) {
    // A wrong shape's cause says it all: "returned 42; a stream fixup returns …".
    const told = cause instanceof Error ? cause.message : String(cause);
    super(`plugin '${plugin}', hook '${hook}' ${failure === 'threw' ? `threw: ${told}` : told}`, { cause });
    this.name = 'PluginFault';
  }
}

export function isPluginFault(error: unknown): error is PluginFault {
  return error instanceof PluginFault;
}

/** The fault of a hook that threw `error` (a fault of a hook it called stays that hook's). */
export function thrown(plugin: string, hook: string, error: unknown): PluginFault {
  return error instanceof PluginFault ? error : new PluginFault(plugin, hook, error);
}

/** What each hook may return, for the fault's message. */
const SHAPES = {
  fixup:
    'a stream fixup returns undefined, null, an event ({ data: string, event?: string, id?: string }) or a list of events',
  usage:
    'a usage extractor returns undefined or { inputTokens, outputTokens, cachedTokens }, each a finite number, not negative',
  buildRequest:
    'nativeChat.buildRequest returns the upstream JSON body, an object (not a list) that JSON.stringify can write',
  readText: 'nativeChat.readText returns a string or undefined',
} as const;

/** The fault of a hook that returned `value`, which is not of the shape the contract allows. */
function wrongShape(plugin: string, hook: string, value: unknown, shape: keyof typeof SHAPES): PluginFault {
  return new PluginFault(plugin, hook, new TypeError(`returned ${describe(value)}; ${SHAPES[shape]}`), 'returned');
}

/**
 * The fault of a hook that returned `value`, which is not of the shape the contract allows; `shape` says
 * what the hook returns (for hooks of other kinds than the ones above, e.g. a route adapter's).
 */
export function shapeFault(plugin: string, hook: string, value: unknown, shape: string): PluginFault {
  return new PluginFault(plugin, hook, new TypeError(`returned ${describe(value)}; ${shape}`), 'returned');
}

/** A short description of a returned value for logs (only ever built on the fault path). */
function describe(value: unknown, depth = 0): string {
  if (
    value === null ||
    value === undefined ||
    typeof value === 'number' ||
    typeof value === 'boolean' ||
    typeof value === 'bigint'
  )
    return String(value);
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (typeof value === 'function' || typeof value === 'symbol') return `a ${typeof value}`;
  if (Array.isArray(value)) {
    if (depth > 0) return `a list of ${value.length}`;
    const bad = value.findIndex((item) => !isEvent(item));
    return bad === -1 ? `a list of ${value.length}` : `a list whose item ${bad} is ${describe(value[bad], depth + 1)}`;
  }
  if (depth > 0) return 'an object';
  const fields = Object.entries(value as Record<string, unknown>)
    .slice(0, 4)
    .map(
      ([key, field]) =>
        `${key}: ${typeof field === 'object' && field !== null ? (Array.isArray(field) ? 'a list' : 'an object') : describe(field, depth + 1)}`,
    );
  if (fields.length === 0) return '{}';
  return `{ ${fields.join(', ')}${Object.keys(value).length > 4 ? ', …' : ''} }`;
}

/** An event a fixup may put out: `data` a string, `event` and `id` strings when present. */
export function isEvent(value: unknown): value is SseEvent {
  if (typeof value !== 'object' || value === null) return false;
  const { data, event, id } = value as { data?: unknown; event?: unknown; id?: unknown };
  return (
    typeof data === 'string' &&
    (event === undefined || typeof event === 'string') &&
    (id === undefined || typeof id === 'string')
  );
}

/** Every item of a fixup's list an event. */
export function allEvents(list: readonly unknown[]): boolean {
  for (let index = 0; index < list.length; index++) if (!isEvent(list[index])) return false;
  return true;
}

/** A token count: a finite number, not negative (NaN fails the comparison). */
function isCount(value: unknown): boolean {
  return typeof value === 'number' && value >= 0 && value !== Infinity;
}

/** A usage value: three token counts (further fields are the plugin's own and ignored). */
export function isUsage(value: unknown): value is TokenUsage {
  if (typeof value !== 'object' || value === null) return false;
  const usage = value as Partial<Record<keyof TokenUsage, unknown>>;
  return isCount(usage.inputTokens) && isCount(usage.outputTokens) && isCount(usage.cachedTokens);
}

// The wrappers below sit on the per-event path: fixed arity (no rest arguments), no allocation, the
// result checked with typeof / Array.isArray only, after the common answers (undefined, the same value).

function guardFixup(
  plugin: string,
  hook: string,
  fixup: StreamFixupDeclaration['fixup'],
): StreamFixupDeclaration['fixup'] {
  return function guardedFixup(event: SseEvent, state: unknown) {
    let result;
    try {
      result = fixup(event, state);
    } catch (error) {
      throw thrown(plugin, hook, error);
    }
    if (
      result === undefined ||
      result === null ||
      result === event ||
      isEvent(result) ||
      (Array.isArray(result) && allEvents(result))
    )
      return result;
    throw wrongShape(plugin, hook, result, 'fixup');
  };
}

function guardCreateState(plugin: string, hook: string, createState: () => unknown): () => unknown {
  return function guardedCreateState() {
    try {
      return createState();
    } catch (error) {
      throw thrown(plugin, hook, error);
    }
  };
}

function guardExtractor(plugin: string, index: number, extractor: UsageExtractor): UsageExtractor {
  const bodyHook = `usageExtractors[${index}].fromBody`;
  const eventHook = `usageExtractors[${index}].fromStreamEvent`;
  const { fromBody, fromStreamEvent } = extractor;
  return {
    fromBody(body: unknown) {
      let result;
      try {
        result = fromBody(body);
      } catch (error) {
        throw thrown(plugin, bodyHook, error);
      }
      if (result === undefined || isUsage(result)) return result;
      throw wrongShape(plugin, bodyHook, result, 'usage');
    },
    fromStreamEvent(seen: TokenUsage | undefined, event: SseEvent) {
      let result;
      try {
        result = fromStreamEvent(seen, event);
      } catch (error) {
        throw thrown(plugin, eventHook, error);
      }
      if (result === seen || result === undefined || isUsage(result)) return result;
      throw wrongShape(plugin, eventHook, result, 'usage');
    },
  };
}

function guardAdapter(plugin: string, adapter: NativeChatAdapter): NativeChatAdapter {
  const { buildRequest, readText } = adapter;
  return {
    ...adapter,
    buildRequest(request) {
      let result;
      try {
        result = buildRequest(request);
      } catch (error) {
        throw thrown(plugin, 'nativeChat.buildRequest', error);
      }
      if (typeof result === 'object' && result !== null && !Array.isArray(result)) return result;
      throw wrongShape(plugin, 'nativeChat.buildRequest', result, 'buildRequest');
    },
    readText(body) {
      let result;
      try {
        result = readText(body);
      } catch (error) {
        throw thrown(plugin, 'nativeChat.readText', error);
      }
      if (result === undefined || typeof result === 'string') return result;
      throw wrongShape(plugin, 'nativeChat.readText', result, 'readText');
    },
  };
}

/**
 * The upstream JSON body `nativeChat.buildRequest` made (or another hook's JSON object, named by `hook`
 * with what it returns in `shape`), as text: a body `JSON.stringify` cannot write (a cycle, a BigInt)
 * or writes as something else than an object (a `toJSON`) is the plugin's fault, like any other wrong shape.
 */
export function upstreamJson(
  plugin: string,
  body: Record<string, unknown>,
  hook = 'nativeChat.buildRequest',
  shape: string = SHAPES.buildRequest,
): string {
  let text: unknown;
  try {
    text = JSON.stringify(body);
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    const told = new TypeError(`returned a body JSON.stringify cannot write (${why}); ${shape}`);
    throw new PluginFault(plugin, hook, told, 'returned');
  }
  if (typeof text === 'string' && text.startsWith('{')) return text;
  const told = new TypeError(`returned a body JSON.stringify writes as ${describe(text)}; ${shape}`);
  throw new PluginFault(plugin, hook, told, 'returned');
}

/**
 * A checked plugin with each of its hooks (stream fixups and their state, usage extractors, the native
 * chat adapter) guarded: a throw, or a result of a shape the contract does not allow, comes out as a
 * {@link PluginFault}, which the data plane answers as the plugin's fault (and `plugin test` reports
 * with the plugin and the hook). A wrong result is caught where the hook returns it, so it is never
 * charged to the hook or the code that reads it next.
 */
export function guardHooks(plugin: ProviderPlugin): ProviderPlugin {
  const vendor = plugin.vendor;
  const streamFixups = plugin.streamFixups?.map((declaration): StreamFixupDeclaration => ({
    ...declaration,
    fixup: guardFixup(vendor, `streamFixups.${declaration.name}`, declaration.fixup),
    ...(declaration.createState
      ? {
          createState: guardCreateState(
            vendor,
            `streamFixups.${declaration.name}.createState`,
            declaration.createState,
          ),
        }
      : {}),
  }));
  const usageExtractors = plugin.usageExtractors?.map((declaration, index): UsageExtractorDeclaration => ({
    ...declaration,
    extractor: guardExtractor(vendor, index, declaration.extractor),
  }));
  const nativeChat = plugin.nativeChat && guardAdapter(vendor, plugin.nativeChat);
  return {
    ...plugin,
    ...(streamFixups ? { streamFixups } : {}),
    ...(usageExtractors ? { usageExtractors } : {}),
    ...(nativeChat ? { nativeChat } : {}),
  };
}
