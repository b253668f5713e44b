import type { GuardrailPlugin } from '../plugins/plugin-contract.ts';
import {
  DEFAULT_REPLACEMENT,
  DEFAULT_WINDOW_CHARS,
  type Finding,
  type Phases,
  type TextGuardrail,
} from './guardrail.ts';
import type { ExternalSettings } from './guardrail-settings.ts';

/**
 * A config entry that uses a guardrail plugin: its `scan` (guarded at load: a throw or a wrong shape is
 * a `PluginFault` naming the guardrail and the hook) with the entry's options, each finding's
 * replacement defaulting to the entry's, else `[REDACTED]`. Its stream window is the entry's
 * `windowChars`, else the plugin's `maxFindingChars`, else 256.
 */
export function pluginGuardrail(plugin: GuardrailPlugin, settings: ExternalSettings, phases: Phases): TextGuardrail {
  const replacement = settings.replacement ?? DEFAULT_REPLACEMENT;
  const { options } = settings;
  return {
    kind: 'text',
    name: settings.name,
    phases,
    action: settings.action,
    window: settings.windowChars ?? plugin.maxFindingChars ?? DEFAULT_WINDOW_CHARS,
    find(text, context) {
      const found = plugin.scan(text, { phase: context.phase, route: context.route, model: context.model, options });
      if (!found || found.length === 0) return [];
      return found.map((finding): Finding => ({
        start: finding.start,
        end: finding.end,
        replacement: finding.replacement ?? replacement,
      }));
    },
  };
}
