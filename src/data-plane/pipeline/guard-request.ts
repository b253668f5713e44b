import { EVENTS, type GuardrailActed } from '../../core/diagnostics.ts';
import { WIRE_FORMATS, type WireFormatRules } from '../../core/formats/index.ts';
import { setTextAt, type TextSlot } from '../../core/formats/format-reading.ts';
import type { GatewayError } from '../../core/gateway-errors.ts';
import type { GuardrailSet } from '../../guardrails/guardrail-set.ts';
import type { WireFormat } from '../../plugins/plugin-contract.ts';
import { isPluginFault } from '../../plugins/plugin-fault.ts';
import { GuardrailRun, selectionFor, type TextsOutcome } from '../guardrails/guardrail-run.ts';
import { replaceStrings } from '../guardrails/json-splice.ts';
import { JSON_BODY_LIMITS, type JsonRequestBody, scanObject } from '../http/json-body.ts';
import { faultOf } from '../routes/plugin-faults.ts';
import type { Exchange, Next, Stage } from './exchange.ts';

/**
 * What the guard stage uses: the guardrails in force, and where the route's requests keep the texts the model reads.
 */
export interface GuardParts {
  readonly guardrails: GuardrailSet;
  /** The wire format whose rules read the exchange's texts (the answer's too); by default its call's. */
  readonly format?: (exchange: Exchange) => WireFormat;
  /** The texts the model reads in a request body (by default the format's request texts). */
  readonly texts?: (body: Record<string, unknown>, rules: WireFormatRules) => TextSlot[];
}

const formatTexts = (body: Record<string, unknown>, rules: WireFormatRules): TextSlot[] => rules.texts.request(body);

/** A compatible route's texts are read in the format of the call it forwards. */
const callFormat = (exchange: Exchange): WireFormat => exchange.call!.format;

/** The native route's texts are read in the format of its adapter's upstream route. */
export const nativeFormat = (exchange: Exchange): WireFormat => {
  const plugin = exchange.requested!.plugin;
  return plugin.routes[plugin.nativeChat!.route]!.format;
};

/** The native route's one text the model reads: its `input`. */
export const nativeInput = (body: Record<string, unknown>): TextSlot[] =>
  typeof body.input === 'string' && body.input !== '' ? [{ path: ['input'], text: body.input }] : [];

/**
 * The guard stage, before the cache, any reservation or upstream call: opens the guardrails the caller
 * gets (its key's list, else its team's, else every configured one) for both phases, and runs the
 * request phase over the texts the model reads. A block (or a guardrail plugin's fault) ends the
 * exchange, nothing having gone upstream; a redaction rewrites those strings in the body's bytes, every
 * other byte as the client sent it. Not in a route's list while no guardrail is configured.
 */
export function guardRequest(parts: GuardParts): Stage {
  const textsOf = parts.texts ?? formatTexts;
  return function guardRequest(exchange, next) {
    const run = open(parts, exchange);
    // A caller no request guardrail applies to goes on at once, with no frame of this stage left waiting.
    return run?.selection.request ? checked(exchange, next, run, textsOf) : next(exchange);
  };
}

/** Runs the request phase over the texts the model reads, then the rest of the pipeline. */
async function checked(
  exchange: Exchange,
  next: Next,
  run: GuardrailRun,
  textsOf: NonNullable<GuardParts['texts']>,
): Promise<void> {
  const read = exchange.body!;
  const slots = textsOf(read.body, run.rules);
  if (slots.length > 0) {
    let outcome: TextsOutcome | Promise<TextsOutcome>;
    try {
      outcome = run.checkTexts('request', run.selection.request!, slots, read.body.stream === true);
      if (outcome instanceof Promise) outcome = await outcome;
    } catch (error) {
      throw refusal(exchange, error);
    }
    if (outcome.blocked) throw exchange.fail(outcome.blocked, false, undefined, 'guardrail_blocked');
    exchange.body = rewritten(read, slots, outcome.texts);
  }
  return next(exchange);
}

/** The run of the guardrails the caller gets, on the exchange; none when it gets none. */
function open(parts: GuardParts, exchange: Exchange): GuardrailRun | undefined {
  const caller = exchange.caller;
  const selection = selectionFor(parts.guardrails, caller);
  if (!selection) return undefined;
  const model = exchange.requested!.canonicalId;
  const site = {
    route: exchange.route.id,
    model,
    requestId: exchange.requestId,
    keyId: caller?.id,
    team: caller?.team?.name,
  };
  const report = (acted: GuardrailActed) => {
    if (EVENTS.guardrail.activeFor(exchange)) EVENTS.guardrail.publish({ exchange, acted });
  };
  return (exchange.guardrails = new GuardrailRun(
    selection,
    WIRE_FORMATS[(parts.format ?? callFormat)(exchange)],
    site,
    report,
  ));
}

/** A guardrail plugin's fault (502, `plugin_error`), or a webhook that failed closed, ending the exchange. */
function refusal(exchange: Exchange, error: unknown): unknown {
  if (isPluginFault(error))
    return exchange.fail(faultOf(exchange, error, exchange.requested!.canonicalId), false, undefined, 'plugin_error');
  return exchange.fail(error as GatewayError, false, undefined, 'guardrail_blocked');
}

/** The body with the texts the guardrails changed; as read when none changed. */
function rewritten(
  read: JsonRequestBody,
  slots: readonly TextSlot[],
  texts: readonly (string | undefined)[],
): JsonRequestBody {
  const changes = slots.flatMap((slot, index) => {
    const text = texts[index];
    return text === undefined ? [] : [{ path: slot.path, key: slot.key, text }];
  });
  if (changes.length === 0) return read;
  const bytes = replaceStrings(read.bytes, changes);
  // In the slots' order: a member's value before its name.
  for (const change of changes) setTextAt(read.body, change, change.text);
  const scan = scanObject(bytes, 0, JSON_BODY_LIMITS);
  // Strings were swapped for strings in a body that scanned whole: it still does.
  if (scan.kind !== 'object') throw new Error('the redacted request body could not be scanned');
  return { bytes, body: read.body, members: scan.members, end: scan.end };
}
