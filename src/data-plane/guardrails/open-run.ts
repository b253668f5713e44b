import type { ResolvedModel } from '../../core/model-registry.ts';
import { WIRE_FORMATS } from '../../core/formats/index.ts';
import type { RouteId, WireFormat } from '../../plugins/plugin-contract.ts';
import type { RequestContext } from '../request-context.ts';
import type { RouteServices } from '../route-services.ts';
import { GuardrailRun } from './guardrail-run.ts';

/**
 * The guardrails a request runs under, set on its context: those its caller gets (its key's list, else
 * its team's, else every configured one) of the configuration in force. Undefined, at the cost of one
 * call, when none is configured or the caller gets none.
 */
export function openGuardrailRun(services: RouteServices, context: RequestContext, route: RouteId, resolved: ResolvedModel, format: WireFormat): GuardrailRun | undefined {
  const set = services.guardrails?.();
  if (!set) return undefined;
  const caller = context.caller;
  const selection = set.select(caller?.guardrails ?? caller?.team?.guardrails);
  if (!selection) return undefined;
  const run = new GuardrailRun(
    selection,
    WIRE_FORMATS[format],
    { route, model: resolved.canonicalId, requestId: context.requestId, keyId: caller?.id, team: caller?.team?.name },
    services.guardrailActed,
  );
  context.guardrails = run;
  return run;
}
