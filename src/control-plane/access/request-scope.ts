import { AsyncLocalStorage } from 'node:async_hooks';
import { actorOf, type Principal } from '../../core/access.ts';
import { EVENTS, publish, type ChangeSite, type EventTarget } from '../../core/diagnostics.ts';
import { forbidden, type GatewayError } from '../../core/gateway-errors.ts';

/** Who a control-plane request acts for, and where it comes from. */
export interface RequestScope {
  readonly principal: Principal;
  readonly source: ChangeSite;
}

// The scope travels with the request through the route's awaits, so the stores the routes call see who
// acts without every route passing it on.
const storage = new AsyncLocalStorage<RequestScope>();

/** Runs `work` (and everything it starts) in `scope`. */
export function runInScope<T>(scope: RequestScope, work: () => T): T {
  return storage.run(scope, work);
}

/** The scope of the request being served; undefined outside one (the data plane, tests of bare routes). */
export function currentScope(): RequestScope | undefined {
  return storage.getStore();
}

/** Publishes a change made in the current scope (nothing outside one). */
export function changed(action: string, target: EventTarget, before: unknown, after: unknown): void {
  const scope = currentScope();
  if (!scope) return;
  publish(EVENTS.controlPlaneChange, () => ({
    ...scope.source,
    at: Date.now(),
    actor: actorOf(scope.principal),
    action,
    target,
    before: before ?? null,
    after: after ?? null,
  }));
}

/** Publishes a refusal in `scope` and gives back its 403. */
export function refused(scope: RequestScope, action: string, target: EventTarget, reason: string): GatewayError {
  publish(EVENTS.controlPlaneRefusal, () => ({
    ...scope.source,
    at: Date.now(),
    actor: actorOf(scope.principal),
    action,
    target,
    status: 403 as const,
    reason,
  }));
  return forbidden(reason);
}
