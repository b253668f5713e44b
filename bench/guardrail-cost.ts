import { checkText, StreamGuard, type StreamItem, type StreamPiece } from '../src/guardrails/text-engine.ts';
import type { TextContext, TextGuardrail } from '../src/guardrails/guardrail.ts';
import { buildGuardrailSet } from '../src/guardrails/guardrail-set.ts';
import { piiGuardrail } from '../src/guardrails/pii-guardrail.ts';
import { regexGuardrail } from '../src/guardrails/regex-guardrail.ts';
import { WIRE_FORMATS } from '../src/core/formats/index.ts';
import { GuardrailRun } from '../src/data-plane/guardrails/guardrail-run.ts';

/**
 * What guardrails cost on the serving thread, in process (the figures end-to-end runs bury in the
 * machine's noise): CPU µs per call, median of rounds, for
 * - each built-in text guardrail on a 2 KB prompt (no finding, and the same with one e-mail address to
 *   redact): `regex` (the issue's `PROJECT-[0-9]{4}`, and two patterns, case-insensitive, whose first
 *   characters are common in the text) and `pii` (every entity); `regex` on the prompt with accented
 *   letters (normalised already: one check) and with its vowels in full-width forms (folded and mapped);
 * - the request stage as a route runs it (texts read from the parsed body, every guardrail, no splice
 *   when nothing is found); with none configured the stage is not in the route's list at all;
 * - a stream: per event of a 2 KB answer in 4-character deltas, held and released through the window.
 */
export async function guardrailCost(rounds = 7, perRound = 20_000): Promise<Record<string, number>> {
  const context: TextContext = { phase: 'request', route: 'chat-completions', model: 'delta/delta-4.7' };
  const both = { request: true, response: true };
  const regex = regexGuardrail(
    { name: 'no-codes', use: 'regex', on: 'both', action: 'block', patterns: ['PROJECT-[0-9]{4}'], ignoreCase: false },
    both,
  );
  // A pattern whose first character is common in the text (so the engine tries it at many positions).
  const ssn = regexGuardrail(
    {
      name: 'no-ssn',
      use: 'regex',
      on: 'both',
      action: 'block',
      patterns: ['\\b\\d{3}-\\d{2}-\\d{4}\\b', '(?:revenue|churn)\\s+forecast'],
      ignoreCase: true,
    },
    both,
  );
  const pii = piiGuardrail(
    {
      name: 'pii',
      use: 'pii',
      on: 'both',
      action: 'redact',
      entities: ['email', 'phone', 'card', 'iban', 'ip', 'secret'],
    },
    both,
  );
  const sentence =
    'The quarterly report covers revenue, churn and the roadmap for 2026; reply with a summary of 3 points. ';
  const prompt = (length: number) => sentence.repeat(Math.ceil(length / sentence.length)).slice(0, length);
  const body = {
    model: 'delta/delta-4.7',
    messages: [
      { role: 'system', content: prompt(400) },
      { role: 'user', content: prompt(1000) },
      { role: 'user', content: prompt(648) },
    ],
  };
  const text = prompt(2048);
  const withEmail = `${text.slice(0, 1000)} ada@example.com ${text.slice(1017)}`;
  const accented = text.replace(/e/g, 'é');
  const fullWidth = text.replace(/[aeiou]/g, (vowel) => String.fromCharCode(vowel.charCodeAt(0) + 0xfee0));

  const measure = (call: () => void) => {
    const start = process.cpuUsage();
    for (let index = 0; index < perRound; index += 1) call();
    const spent = process.cpuUsage(start);
    return (spent.user + spent.system) / perRound;
  };
  const median = (call: () => void) => {
    measure(call);
    const runs = Array.from({ length: rounds }, () => measure(call));
    return runs.sort((a, b) => a - b)[Math.floor(rounds / 2)]!;
  };
  const check = (guardrail: TextGuardrail, input: string) => () => void checkText(input, [guardrail], context);

  const set = buildGuardrailSet(
    [
      {
        name: 'no-codes',
        use: 'regex',
        on: 'both',
        action: 'block',
        patterns: ['PROJECT-[0-9]{4}'],
        ignoreCase: false,
      },
      {
        name: 'pii',
        use: 'pii',
        on: 'both',
        action: 'redact',
        entities: ['email', 'phone', 'card', 'iban', 'ip', 'secret'],
      },
    ],
    [],
  )!;
  const run = new GuardrailRun(set.select(undefined)!, WIRE_FORMATS['chat-completions'], {
    route: 'chat-completions',
    model: 'delta/delta-4.7',
  });
  const requestStage = () => {
    const slots = run.rules.texts.request(body);
    run.checkTexts('request', run.selection.request!, slots, false);
  };

  class Delta implements StreamItem {
    readonly deltas: StreamPiece[];
    readonly wholes: StreamPiece[] = [];
    readonly closes: string[] = [];
    constructor(piece: string) {
      this.deltas = [{ channel: 'choice 0|content', text: piece, set: () => {} }];
    }
  }
  const deltas = Array.from({ length: 512 }, (_, index) => text.slice(index * 4, index * 4 + 4));
  const streamPerEvent = (guardrail: TextGuardrail) => {
    const rounds = 200;
    const start = process.cpuUsage();
    for (let round = 0; round < rounds; round++) {
      const guard = new StreamGuard<Delta>([guardrail], { ...context, phase: 'response' });
      for (const delta of deltas) guard.push(new Delta(delta));
      guard.end();
    }
    const spent = process.cpuUsage(start);
    return (spent.user + spent.system) / (rounds * deltas.length);
  };

  return {
    regexCleanUs: median(check(regex, text)),
    regexTwoPatternsCleanUs: median(check(ssn, text)),
    piiCleanUs: median(check(pii, text)),
    piiRedactUs: median(check(pii, withEmail)),
    regexAccentedUs: median(check(regex, accented)),
    regexFullWidthUs: median(check(regex, fullWidth)),
    requestStageUs: median(requestStage),
    streamRegexPerEventUs: streamPerEvent(regex),
    streamPiiPerEventUs: streamPerEvent(pii),
  };
}

if (import.meta.url === `file://${process.argv[1]}`) process.stdout.write(`${JSON.stringify(await guardrailCost())}\n`);
