import type { NativeChatAdapter, ProviderPlugin, StreamFixupDeclaration, UsageExtractorDeclaration } from './plugin-contract.ts';

/**
 * A plugin's hook threw: the fault is the plugin's, not the upstream's. Carries the plugin and the hook
 * (`streamFixups.<name>`, `streamFixups.<name>.createState`, `usageExtractors[<i>].fromBody`,
 * `usageExtractors[<i>].fromStreamEvent`, `nativeChat.buildRequest`, `nativeChat.readText`), and the
 * thrown value as `cause`.
 */
export class PluginFault extends Error {
  constructor(
    readonly plugin: string,
    readonly hook: string,
    cause: unknown,
  ) {
    super(`plugin '${plugin}', hook '${hook}' threw: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = 'PluginFault';
  }
}

export function isPluginFault(error: unknown): error is PluginFault {
  return error instanceof PluginFault;
}

/** `hook` with every throw turned into a {@link PluginFault} naming the plugin and the hook. */
function guarded<Args extends unknown[], Result>(plugin: string, hook: string, fn: (...args: Args) => Result): (...args: Args) => Result {
  return function guardedHook(...args: Args): Result {
    try {
      return fn(...args);
    } catch (error) {
      throw error instanceof PluginFault ? error : new PluginFault(plugin, hook, error);
    }
  };
}

/**
 * A checked plugin with each of its hooks (stream fixups and their state, usage extractors, the native
 * chat adapter) guarded: a throw comes out as a {@link PluginFault}, which the data plane answers as
 * the plugin's fault (and `plugin test` reports with the plugin and the hook).
 */
export function guardHooks(plugin: ProviderPlugin): ProviderPlugin {
  const vendor = plugin.vendor;
  const streamFixups = plugin.streamFixups?.map((declaration): StreamFixupDeclaration => ({
    ...declaration,
    fixup: guarded(vendor, `streamFixups.${declaration.name}`, declaration.fixup),
    ...(declaration.createState ? { createState: guarded(vendor, `streamFixups.${declaration.name}.createState`, declaration.createState) } : {}),
  }));
  const usageExtractors = plugin.usageExtractors?.map((declaration, index): UsageExtractorDeclaration => ({
    ...declaration,
    extractor: {
      fromBody: guarded(vendor, `usageExtractors[${index}].fromBody`, declaration.extractor.fromBody),
      fromStreamEvent: guarded(vendor, `usageExtractors[${index}].fromStreamEvent`, declaration.extractor.fromStreamEvent),
    },
  }));
  const adapter = plugin.nativeChat;
  const nativeChat: NativeChatAdapter | undefined = adapter && {
    ...adapter,
    buildRequest: guarded(vendor, 'nativeChat.buildRequest', adapter.buildRequest),
    readText: guarded(vendor, 'nativeChat.readText', adapter.readText),
  };
  return {
    ...plugin,
    ...(streamFixups ? { streamFixups } : {}),
    ...(usageExtractors ? { usageExtractors } : {}),
    ...(nativeChat ? { nativeChat } : {}),
  };
}
