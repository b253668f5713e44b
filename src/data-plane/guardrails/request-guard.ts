import { scanObject } from '../http/json-scan.ts';
import { JSON_BODY_LIMITS, type JsonRequestBody } from '../http/json-body.ts';
import { setValueAt, type TextSlot } from '../../core/formats/text-slots.ts';
import type { GatewayError } from '../../core/gateway-errors.ts';
import type { ResolvedModel } from '../../core/model-registry.ts';
import type { RouteId, UpstreamRouteId } from '../../plugins/plugin-contract.ts';
import { isPluginFault } from '../../plugins/plugin-fault.ts';
import type { RequestContext } from '../request-context.ts';
import type { RouteServices } from '../route-services.ts';
import { ExchangeRecorder } from '../routes/exchange-recorder.ts';
import { reportPluginFault } from '../routes/plugin-faults.ts';
import type { GuardrailRun, TextsOutcome } from './guardrail-run.ts';
import { replaceStrings } from './json-splice.ts';
import { openGuardrailRun } from './open-run.ts';

/** What a request is recorded with when its guardrails refuse it before it went anywhere. */
interface Refused {
  readonly services: RouteServices;
  readonly context: RequestContext;
  readonly route: RouteId;
  readonly resolved: ResolvedModel;
  readonly body: Record<string, unknown>;
  readonly startedAt: number;
}

/**
 * Records a request its guardrails refused (nothing went upstream: no tokens) and throws the refusal:
 * a guardrail's block (400, or 503 for a webhook that fails closed), or a guardrail plugin's fault (502).
 */
function refuse(refused: Refused, error: unknown): never {
  const { services, context, route, resolved, body, startedAt } = refused;
  const recorder = new ExchangeRecorder(services, context, { keyId: context.caller?.id, route, stream: body.stream === true, requestId: context.requestId, startedAt, requestBody: () => body, responseText: () => '' }, resolved);
  if (isPluginFault(error)) return recorder.fail(reportPluginFault(services, error, recorder.faultSite(route)), false, undefined, 'plugin_error');
  return recorder.fail(error as GatewayError, false, undefined, 'guardrail_blocked');
}

/** Runs the request phase over some texts, a refusal recorded and thrown. */
function check(run: GuardrailRun, texts: readonly string[], refused: Refused): TextsOutcome | Promise<TextsOutcome> {
  let outcome: TextsOutcome | Promise<TextsOutcome>;
  try {
    outcome = run.checkTexts('request', run.selection.request!, texts, refused.body.stream === true);
  } catch (error) {
    return refuse(refused, error);
  }
  return outcome instanceof Promise ? outcome.catch((error: unknown) => refuse(refused, error)) : outcome;
}

/**
 * Request guardrails on a compatible route, after validation and before the cache, any reservation or
 * upstream call: on the texts the request sends the model (its format's `texts.request`). A block is
 * recorded and thrown; a redaction gives back the body with those strings rewritten in its bytes (every
 * other byte as the client sent it) and in its parsed form. The body as read when the request runs
 * under no guardrail, or nothing was found (synchronously, unless a webhook is asked).
 */
export function guardRequest(services: RouteServices, context: RequestContext, route: UpstreamRouteId, resolved: ResolvedModel, read: JsonRequestBody, startedAt: number): JsonRequestBody | Promise<JsonRequestBody> {
  const run = openGuardrailRun(services, context, route, resolved, services.registry().upstreamRoute(resolved, route).format);
  if (!run?.selection.request) return read;
  const slots = run.rules.texts.request(read.body);
  if (slots.length === 0) return read;
  const refused: Refused = { services, context, route, resolved, body: read.body, startedAt };
  const outcome = check(run, slots.map((slot) => slot.text), refused);
  return outcome instanceof Promise ? outcome.then((done) => rewritten(read, slots, done, refused)) : rewritten(read, slots, outcome, refused);
}

/** The body with the texts the guardrails changed (throws their refusal). */
function rewritten(read: JsonRequestBody, slots: readonly TextSlot[], outcome: TextsOutcome, refused: Refused): JsonRequestBody {
  if (outcome.blocked) return refuse(refused, outcome.blocked);
  const changes = slots.flatMap((slot, index) => (outcome.texts[index] === undefined ? [] : [{ path: slot.path, text: outcome.texts[index]! }]));
  if (changes.length === 0) return read;
  const bytes = replaceStrings(read.bytes, changes);
  for (const change of changes) setValueAt(read.body, change.path, change.text);
  const scan = scanObject(bytes, 0, JSON_BODY_LIMITS);
  // Strings were swapped for strings in a body that scanned whole: it still does.
  if (scan.kind !== 'object') throw new Error('the redacted request body could not be scanned');
  return { bytes, body: read.body, members: scan.members, end: scan.end };
}

/**
 * Request guardrails on `POST /v1/chat`, after validation and before any reservation or upstream call:
 * on its `input`. A block is recorded and thrown; a redaction rewrites `body.input` in place.
 */
export function guardChatInput(services: RouteServices, context: RequestContext, resolved: ResolvedModel, body: Record<string, unknown>, startedAt: number): void | Promise<void> {
  const adapter = resolved.plugin.nativeChat!;
  const run = openGuardrailRun(services, context, 'chat', resolved, resolved.plugin.routes[adapter.route]!.format);
  if (!run?.selection.request || typeof body.input !== 'string' || body.input === '') return;
  const refused: Refused = { services, context, route: 'chat', resolved, body, startedAt };
  const apply = (outcome: TextsOutcome) => {
    if (outcome.blocked) return refuse(refused, outcome.blocked);
    if (outcome.texts[0] !== undefined) body.input = outcome.texts[0];
  };
  const outcome = check(run, [body.input], refused);
  return outcome instanceof Promise ? outcome.then(apply) : apply(outcome);
}
