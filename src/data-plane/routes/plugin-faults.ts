import { EVENTS } from '../../core/diagnostics.ts';
import type { ExchangeView } from '../../core/exchange.ts';
import { pluginFault, type GatewayError } from '../../core/gateway-errors.ts';
import type { PluginFault } from '../../plugins/plugin-fault.ts';

/**
 * A plugin hook threw or returned a wrong shape: told as the `plugin-fault` event (one error log line
 * with plugin, hook, route, model, request id and stack; the metric by plugin and hook; the trace's
 * event), and given back as the client's error, which names the plugin fault and is not logged again.
 */
export function faultOf(exchange: ExchangeView, fault: PluginFault, model: string): GatewayError {
  if (EVENTS.pluginFault.activeFor(exchange)) {
    const { plugin, hook, cause } = fault;
    EVENTS.pluginFault.publish({
      exchange,
      plugin,
      hook,
      cause,
      route: exchange.route.id,
      model,
      requestId: exchange.requestId,
    });
  }
  return pluginFault(fault.plugin, fault.hook, fault);
}
