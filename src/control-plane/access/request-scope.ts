import { AsyncLocalStorage } from 'node:async_hooks';
import { finished } from 'node:stream';
import { actorOf, type Principal } from '../../core/access.ts';
import { EVENTS, publish, type ChangeSite, type EventTarget } from '../../core/diagnostics.ts';
import { forbidden, type GatewayError } from '../../core/gateway-errors.ts';

/** Who a control-plane request acts for, and where it comes from. */
export interface RequestScope {
  readonly principal: Principal;
  readonly source: ChangeSite;
}

// The scope travels with the request through the route's awaits, so the stores the routes call see who
// acts without every route passing it on. On Node 20 the storage runs on async hooks: while it is enabled,
// every promise of the process pays for them (the model routes' too: 5-9 % more CPU per JSON request, once
// a single control-plane request had enabled it for good). So it is enabled only while a scope is open.
const storage = new AsyncLocalStorage<RequestScope>();
let open = 0;

function leave(): void {
  open -= 1;
  if (open === 0) storage.disable();
}

/** Runs `work` (and everything it starts) in `scope`, until the promise it gives back settles. */
export async function runInScope<T>(scope: RequestScope, work: () => Promise<T>): Promise<T> {
  open += 1;
  try {
    return await storage.run(scope, work);
  } finally {
    leave();
  }
}

/** Runs the rest of a control-plane request (`next`) in `scope`, which stays open until the response is done. */
export function enterRequestScope(scope: RequestScope, res: NodeJS.WritableStream, next: () => void): void {
  open += 1;
  // Called once however the response ends (sent, failed, or the client gone), also when it already has.
  finished(res, leave);
  storage.run(scope, next);
}

/** How many scopes are open (the storage is enabled only while there are). */
export function openScopes(): number {
  return open;
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
