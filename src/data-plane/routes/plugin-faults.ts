import { pluginFault, type GatewayError } from '../../core/gateway-errors.ts';
import type { PluginFault } from '../../plugins/plugin-fault.ts';
import type { PluginFaultSite, RouteServices } from '../route-services.ts';

/**
 * A plugin hook threw or returned a wrong shape: tells the services (one error log line with plugin,
 * hook, route, model, request id and stack; the metric by plugin and hook) and gives back the client's
 * error, which names the plugin fault and is not logged again.
 */
export function reportPluginFault(services: RouteServices, fault: PluginFault, site: PluginFaultSite): GatewayError {
  services.pluginFaults?.(fault, site);
  site.trace?.pluginFault(fault.plugin, fault.hook);
  return pluginFault(fault.plugin, fault.hook, fault);
}
