import type { CheckedText } from '../../guardrails/guardrail.ts';
import type { TokenUsage } from '../../plugins/plugin-contract.ts';
import { isPluginFault } from '../../plugins/plugin-fault.ts';
import type { Exchange } from '../pipeline/exchange.ts';
import { faultOf } from '../routes/plugin-faults.ts';
import type { GuardrailRun, TextsOutcome } from './guardrail-run.ts';
import { replaceStrings } from './json-splice.ts';
import { answerTexts } from '../../core/formats/format-reading.ts';

/** Texts the guardrails let through (each rewritten or undefined). */
type Passed = Extract<TextsOutcome, { readonly texts: unknown }>;

/**
 * Runs the response phase over an answer's texts. A block is recorded as the upstream billed the answer
 * (the usage read from it: the answer came whole) and thrown; a guardrail plugin's fault likewise, as
 * `plugin_error`.
 */
function check(
  exchange: Exchange,
  run: GuardrailRun,
  texts: CheckedText[],
  usage?: TokenUsage,
): Passed | Promise<Passed> {
  const failed = (error: unknown): never => {
    if (isPluginFault(error))
      throw exchange.fail(faultOf(exchange, error, exchange.model!.canonicalId), true, usage, 'plugin_error');
    throw error;
  };
  const blocked = (outcome: TextsOutcome): Passed => {
    if (outcome.blocked) throw exchange.fail(outcome.blocked, true, usage, 'guardrail_blocked');
    return outcome;
  };
  let outcome: TextsOutcome | Promise<TextsOutcome>;
  try {
    outcome = run.checkTexts('response', run.selection.response!, texts, false);
  } catch (error) {
    return failed(error);
  }
  return outcome instanceof Promise ? outcome.then(blocked, failed) : blocked(outcome);
}

/**
 * Response guardrails on a successful JSON answer of a compatible route, on its texts (its format's
 * `texts.answer`): the bytes to send, as they came when nothing was found (synchronously unless a webhook
 * is asked), else with those strings rewritten and every other byte kept. `body` is the answer parsed
 * (undefined when it is not JSON: nothing to read).
 */
export function guardAnswer(
  exchange: Exchange,
  bytes: Buffer,
  body: unknown,
  usage: TokenUsage | undefined,
): Buffer | Promise<Buffer> {
  const run = exchange.guardrails;
  if (!run?.selection.response || body === undefined) return bytes;
  const slots = answerTexts(run.rules.texts, body);
  if (slots.length === 0) return bytes;
  const apply = (outcome: Passed) => {
    const changes = slots.flatMap((slot, index) => {
      const text = outcome.texts[index];
      return text === undefined ? [] : [{ path: slot.path, key: slot.key, text }];
    });
    return changes.length ? replaceStrings(bytes, changes) : bytes;
  };
  const outcome = check(exchange, run, slots, usage);
  return outcome instanceof Promise ? outcome.then(apply) : apply(outcome);
}

/**
 * Response guardrails on a `/v1/chat` answer (the gateway's own JSON): on its `result.text`. The payload
 * to send, written anew with the text redacted when a guardrail changed it (a block recorded and thrown).
 */
export function guardChatPayload(exchange: Exchange, payload: Buffer, usage: TokenUsage): Buffer | Promise<Buffer> {
  const run = exchange.guardrails;
  if (!run?.selection.response) return payload;
  const answer = JSON.parse(payload.toString('utf8')) as { result: { text: string } };
  if (answer.result.text === '') return payload;
  const apply = (outcome: Passed) => {
    if (outcome.texts[0] === undefined) return payload;
    answer.result.text = outcome.texts[0];
    return Buffer.from(JSON.stringify(answer));
  };
  const outcome = check(exchange, run, [{ text: answer.result.text }], usage);
  return outcome instanceof Promise ? outcome.then(apply) : apply(outcome);
}
