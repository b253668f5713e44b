import { fieldError, validationError } from '../../core/gateway-errors.ts';
import { isPluginFault } from '../../plugins/plugin-fault.ts';
import { AdaptedCall } from '../adapters/adapted-call.ts';
import { faultOf } from '../routes/plugin-faults.ts';
import type { Exchange, Next, Stage } from './exchange.ts';

/** The two ways on from the adapt stage: the route's own stages, and those of an adapted vendor. */
export interface AdaptParts {
  /** The rest of the route's list for a model its vendor serves in the route's format (bytes forwarded). */
  readonly native: Next;
  /** The rest for a model whose plugin adapts the route (the adapted relay in place of the relay). */
  readonly adapted: Next;
}

/**
 * The adapt stage, on a route some loaded plugin adapts (on any other route it is not in the list), after
 * the request guardrails: a model whose vendor speaks the route's format goes on as on any route; one
 * whose plugin adapts the route has its request checked by the adapter (what the vendor cannot do is
 * the route's 400, every problem listed, nothing reserved or sent) and built for its vendor, then goes
 * on the adapted stages. A hook that fails is the plugin's fault (502), recorded.
 */
export function adapt(parts: AdaptParts): Stage {
  const { native, adapted } = parts;
  return async function adapt(exchange) {
    const call = exchange.call;
    if (!(call instanceof AdaptedCall)) return native(exchange);
    call.requestId = exchange.requestId;
    call.created = Math.floor((performance.timeOrigin + exchange.startedAt) / 1000);
    let problems;
    try {
      problems = call.problems();
      if (problems.length === 0) call.build();
    } catch (error) {
      throw faulted(exchange, error);
    }
    if (problems.length > 0) {
      throw validationError(
        problems.map((problem) => fieldError(problem.field, problem.message)),
        problems[0]!.field,
      );
    }
    try {
      await adapted(exchange);
    } catch (error) {
      // A fallback's adapter that fails to build its request, between attempts.
      throw exchange.ending === undefined ? faulted(exchange, error) : error;
    }
  };
}

/**
 * A plugin's fault ending the exchange (recorded, `plugin_error`), against the model being tried (a
 * fallback's, when its adapter failed); anything else as it is.
 */
function faulted(exchange: Exchange, error: unknown): unknown {
  if (!isPluginFault(error)) return error;
  exchange.model = exchange.call!.model;
  const told = faultOf(exchange, error, exchange.model.canonicalId);
  return exchange.fail(told, exchange.upstream.tally.unreported > 0, undefined, 'plugin_error');
}
