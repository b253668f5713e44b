import type { ServerResponse } from 'node:http';
import { fieldError, validationError } from '../../core/gateway-errors.ts';
import type { ResolvedModel } from '../../core/model-registry.ts';
import { writeRateLimitHeaders } from '../../core/rate-limit-headers.ts';
import type { ModelPricing } from '../../plugins/plugin-contract.ts';
import { DEFAULT_OUTPUT_CAP, estimateRequest, highestPricing } from '../../usage/reservation.ts';
import { promptCharacters } from '../../usage/token-estimate.ts';
import type { Admitted } from '../limits/budget-gate.ts';
import type { RequestContext } from '../request-context.ts';
import type { RouteServices } from '../route-services.ts';
import { ATTR, EVENT } from '../../ops/tracing/span-names.ts';

/**
 * Checks the request's output cap fields: each one it sets must be a safe integer and at most the
 * model's `maxOutputTokens` (when its plugin declares one), else the 400 names the field. A cap beyond
 * either is never a request the upstream serves, and would make a reservation meaningless.
 */
export function checkOutputCaps(body: Readonly<Record<string, unknown>>, fields: readonly string[], resolved: ResolvedModel): void {
  const problems: string[] = [];
  let first: string | undefined;
  const most = resolved.model.maxOutputTokens;
  for (const field of fields) {
    const value = body[field];
    if (typeof value !== 'number') continue;
    if (!Number.isSafeInteger(value)) problems.push(fieldError(field, 'must be a safe integer (at most 9007199254740991)'));
    else if (most !== undefined && value > most) problems.push(fieldError(field, `must be at most ${most}, the most '${resolved.canonicalId}' writes`));
    else continue;
    first ??= field;
  }
  if (problems.length) throw validationError(problems, first);
}

/** The request's own output cap: the first of its route's cap fields it sets to a positive number. */
export function outputCapOf(body: Readonly<Record<string, unknown>>, fields: readonly string[]): number | undefined {
  for (const field of fields) {
    const value = body[field];
    if (typeof value === 'number' && value > 0) return value;
  }
  return undefined;
}

/** How many answers the upstream writes for the request (`n`, `best_of`), each up to the output cap. */
export function choicesOf(body: Readonly<Record<string, unknown>>): number {
  let choices = 1;
  for (const field of ['n', 'best_of']) {
    const value = body[field];
    if (typeof value === 'number' && Number.isFinite(value) && value > choices) choices = Math.floor(value);
  }
  return choices;
}

/**
 * The request field that makes the upstream read context the gateway cannot see (and so cannot bound):
 * a stored response or conversation to continue, or a background run whose work ends after the answer.
 */
export function unboundedField(body: Readonly<Record<string, unknown>>): string | undefined {
  if (typeof body.previous_response_id === 'string' && body.previous_response_id !== '') return 'previous_response_id';
  if (body.conversation !== undefined && body.conversation !== null) return 'conversation';
  if (body.background === true) return 'background';
  return undefined;
}

/** The highest prices the request may be served at: its model's, or a fallback's if higher. */
function pricingOf(services: RouteServices, resolved: ResolvedModel): ModelPricing {
  const fallbacks = services.fallbacks?.get(resolved.canonicalId);
  if (!fallbacks?.length) return resolved.model.pricing;
  const registry = services.registry();
  return highestPricing([resolved.model.pricing, ...fallbacks.flatMap((id) => registry.model(id)?.pricing ?? [])]);
}

/**
 * The admit stage of token and money limits, once the model is known and before any upstream call:
 * checks the output cap fields, then reserves the request's estimate (its prompt's size, images
 * included, and its output cap or the model's, times the answers it asks for, at the highest prices of
 * its fallback chain) on every limit of its key and team, or throws the 429 of the one without room.
 * The reservation goes on the request's context; the route's tokens headers on the answer.
 */
export function reserveBudget(services: RouteServices, context: RequestContext, res: ServerResponse, resolved: ResolvedModel, body: Readonly<Record<string, unknown>>): void | Promise<void> {
  const fields = context.route.outputCapFields;
  if (!fields) return;
  checkOutputCaps(body, fields, resolved);
  if (!services.budgets) return;
  const estimate = () => estimateRequest(promptCharacters(body), outputCapOf(body, fields) ?? resolved.model.maxOutputTokens ?? DEFAULT_OUTPUT_CAP, choicesOf(body));
  const admitted = services.budgets.admit(context.caller, estimate, pricingOf(services, resolved), unboundedField(body));
  if (admitted instanceof Promise) return admitted.then((settled) => hold(context, res, settled));
  hold(context, res, admitted);
}

function hold(context: RequestContext, res: ServerResponse, admitted: Admitted | undefined): void {
  if (!admitted) return;
  context.reservation = admitted.reservation;
  if (context.trace?.recording) context.trace.event(EVENT.reserve, { [ATTR.limitKinds]: admitted.reservation.meters.map((meter) => `${meter.scope}:${meter.kind}:${meter.period}`) });
  const style = context.route.rateLimitHeaders;
  if (style && admitted.tokens) writeRateLimitHeaders(res, style, 'tokens', admitted.tokens, Date.now());
}
