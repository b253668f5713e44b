import type { ServerResponse } from 'node:http';
import type { ResolvedModel } from '../../core/model-registry.ts';
import { writeRateLimitHeaders } from '../../core/rate-limit-headers.ts';
import { DEFAULT_OUTPUT_CAP, estimateRequest } from '../../usage/reservation.ts';
import { promptCharacters } from '../../usage/token-estimate.ts';
import type { Admitted } from '../limits/budget-gate.ts';
import type { RequestContext } from '../request-context.ts';
import type { RouteServices } from '../route-services.ts';

/** The request's own output cap: the first of its route's cap fields it sets to a positive number. */
export function outputCapOf(body: Readonly<Record<string, unknown>>, fields: readonly string[]): number | undefined {
  for (const field of fields) {
    const value = body[field];
    if (typeof value === 'number' && value > 0) return value;
  }
  return undefined;
}

/**
 * The admit stage of token and money limits, once the model is known and before any upstream call:
 * reserves the request's estimate (its prompt's size, and its output cap or the model's) on every limit
 * of its key and team, or throws the 429 of the one without room. The reservation goes on the
 * request's context; the route's tokens headers on the answer.
 */
export function reserveBudget(services: RouteServices, context: RequestContext, res: ServerResponse, resolved: ResolvedModel, body: Readonly<Record<string, unknown>>): void | Promise<void> {
  const fields = context.route.outputCapFields;
  if (!services.budgets || !fields) return;
  const estimate = () => estimateRequest(promptCharacters(body), outputCapOf(body, fields) ?? resolved.model.maxOutputTokens ?? DEFAULT_OUTPUT_CAP);
  const admitted = services.budgets.admit(context.caller, estimate, resolved.model.pricing);
  if (admitted instanceof Promise) return admitted.then((settled) => hold(context, res, settled));
  hold(context, res, admitted);
}

function hold(context: RequestContext, res: ServerResponse, admitted: Admitted | undefined): void {
  if (!admitted) return;
  context.reservation = admitted.reservation;
  const style = context.route.rateLimitHeaders;
  if (style && admitted.tokens) writeRateLimitHeaders(res, style, 'tokens', admitted.tokens, Date.now());
}
