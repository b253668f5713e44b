import { Counter, type Registry } from 'prom-client';

/** What the code plugged into the request path did: plugin faults and guardrail actions. */
export interface ExtensionMetrics {
  readonly pluginErrors: Counter<'plugin' | 'hook'>;
  readonly guardrailActions: Counter<'guardrail' | 'phase' | 'action'>;
}

export function defineExtensionMetrics(registers: Registry[]): ExtensionMetrics {
  return {
    pluginErrors: new Counter({
      name: 'gateway_plugin_errors_total',
      help: 'Plugin hooks that threw or returned a wrong shape (the answer ended with a plugin fault), by plugin and hook',
      labelNames: ['plugin', 'hook'],
      registers,
    }),
    guardrailActions: new Counter({
      name: 'gateway_guardrail_actions_total',
      help: 'What guardrails did, by guardrail (its configured name), phase (request, response) and action (block, redact, fail_open: a webhook that did not answer let the text pass)',
      labelNames: ['guardrail', 'phase', 'action'],
      registers,
    }),
  };
}
