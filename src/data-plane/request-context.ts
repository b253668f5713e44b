import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ModelRoute } from '../core/route-table.ts';
import type { Observation } from '../ops/request-observer.ts';
import type { CallerKey } from '../core/exchange.ts';
import type { Reservation } from '../usage/reservation.ts';
import type { GuardrailRun } from './guardrails/guardrail-run.ts';
import type { RequestTrace } from '../ops/tracing/request-trace.ts';

/**
 * What the data plane knows of one model request, handed to its handler (never kept on req or res);
 * also the request's {@link Observation} for the access log and metrics.
 */
export interface RequestContext extends Observation {
  readonly route: ModelRoute;
  /** The id stamped at the way in (the client's `x-request-id` when acceptable, else a fresh one). */
  readonly requestId: string;
  /** `performance.now()` when the request reached the way in. */
  readonly startedAt: number;
  /** The authenticated caller; undefined on open routes (tests only). */
  caller: CallerKey | undefined;
  /** Set by the handler once it handed an exchange to usage accounting (which observes it then). */
  recorded: boolean;
  /** The endpoint of the latest upstream attempt and how many were made (compatible routes). */
  upstreamEndpoint?: string;
  upstreamAttempts?: number;
  /**
   * What the request reserved on its token and money limits: handed to usage accounting with its
   * exchange, else released when the request ends.
   */
  reservation?: Reservation;
  /** The guardrails the request runs under, set once its model is resolved; undefined when it gets none. */
  guardrails?: GuardrailRun;
  /** The request's trace; undefined while tracing is off (nothing traced then costs more than this check). */
  trace?: RequestTrace;
}

/** A model route's handler: node's own request and response, and the request's context. */
export type ModelHandler = (req: IncomingMessage, res: ServerResponse, context: RequestContext) => Promise<void> | void;

/** A fresh context for a request on `route`, before anything is checked (`unmatched` until its method is). */
export function requestContext(route: ModelRoute, requestId: string): RequestContext {
  // Every field a request may get is there from the start, so every context has one shape.
  return { route, requestId, startedAt: performance.now(), caller: undefined, recorded: false, label: 'unmatched', reservation: undefined, refusedBy: undefined, trace: undefined, guardrails: undefined };
}
