import { fieldError, validationError } from '../../core/gateway-errors.ts';
import type { ResolvedModel } from '../../core/model-registry.ts';

/**
 * Checks the request's output cap fields: each one it sets must be a safe integer and at most the
 * model's `maxOutputTokens` (when its plugin declares one), else the 400 names the field. A cap beyond
 * either is never a request the upstream serves, and would make a reservation meaningless.
 */
export function checkOutputCaps(
  body: Readonly<Record<string, unknown>>,
  fields: readonly string[],
  resolved: ResolvedModel,
): void {
  const problems: string[] = [];
  let first: string | undefined;
  const most = resolved.model.maxOutputTokens;
  for (const field of fields) {
    const value = body[field];
    if (typeof value !== 'number') continue;
    if (!Number.isSafeInteger(value))
      problems.push(fieldError(field, 'must be a safe integer (at most 9007199254740991)'));
    else if (most !== undefined && value > most)
      problems.push(fieldError(field, `must be at most ${most}, the most '${resolved.canonicalId}' writes`));
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
