import type { GuardrailPlugin, ProviderPlugin } from './plugin-contract.ts';

/** Where each loaded plugin came from (its folder), for messages that must name it. */
const origins = new WeakMap<ProviderPlugin | GuardrailPlugin, string>();

/** Records the folder a plugin (a provider or a guardrail) was loaded from. */
export function recordOrigin(plugin: ProviderPlugin | GuardrailPlugin, directory: string): void {
  origins.set(plugin, directory);
}

/** The folder a plugin was loaded from, when the loader loaded it (plugins built in code have none). */
export function originOf(plugin: ProviderPlugin | GuardrailPlugin): string | undefined {
  return origins.get(plugin);
}

/** `plugin 'acme' (/path/to/acme)`, or `plugin 'acme'` when its folder is not known. */
export function describePlugin(plugin: ProviderPlugin): string {
  const origin = originOf(plugin);
  return `plugin '${plugin.vendor}'${origin ? ` (${origin})` : ''}`;
}
