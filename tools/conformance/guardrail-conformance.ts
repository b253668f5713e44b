import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  checkText,
  findIn,
  mergeFindings,
  StreamGuard,
  type StreamItem,
  type StreamPiece,
  textView,
} from '../../src/guardrails/text-engine.ts';
import type { TextContext, TextGuardrail } from '../../src/guardrails/guardrail.ts';
import { pluginGuardrail } from '../../src/guardrails/plugin-guardrail.ts';
import type { GuardrailPlugin } from '../../src/plugins/plugin-contract.ts';
import { isPluginFault } from '../../src/plugins/plugin-fault.ts';

/** One example text of a guardrail, and the stretches its `scan` must find in it, in order. */
export interface GuardrailExample {
  readonly text: string;
  readonly finds: readonly string[];
}

/** `__fixtures__/<name>.guardrail.json`: examples, under the options a config entry would give. */
export interface GuardrailFixture {
  readonly name: string;
  readonly options: Readonly<Record<string, unknown>>;
  readonly examples: readonly GuardrailExample[];
}

/** What the checks report into: a plugin's conformance report (run-conformance.ts's `PluginConformance`). */
interface Report {
  readonly directory: string;
  checks: number;
  readonly failures: { readonly plugin: string; readonly rule: string; readonly message: string }[];
}

const SUFFIX = '.guardrail.json';
const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** The guardrail's example fixtures; each malformed one is named in `malformed` and left out. */
export function readGuardrailFixtures(directory: string, malformed: string[]): GuardrailFixture[] {
  const folder = join(directory, '__fixtures__');
  if (!existsSync(folder)) return [];
  const fixtures: GuardrailFixture[] = [];
  for (const file of readdirSync(folder)
    .filter((entry) => entry.endsWith(SUFFIX))
    .sort()) {
    const name = file.slice(0, -SUFFIX.length);
    let parsed: unknown;
    try {
      parsed = JSON.parse(readFileSync(join(folder, file), 'utf8'));
    } catch (error) {
      malformed.push(`fixture '${name}': ${file} is not JSON (${(error as Error).message})`);
      continue;
    }
    const { options, examples } = (isRecord(parsed) ? parsed : {}) as { options?: unknown; examples?: unknown };
    const fits = (example: unknown) =>
      isRecord(example) &&
      typeof example.text === 'string' &&
      Array.isArray(example.finds) &&
      example.finds.every((found) => typeof found === 'string');
    if (
      !isRecord(parsed) ||
      (options !== undefined && !isRecord(options)) ||
      !Array.isArray(examples) ||
      examples.length === 0 ||
      !examples.every(fits)
    ) {
      malformed.push(
        `fixture '${name}': ${file} must be {"options"?: {...}, "examples": [{"text": "...", "finds": ["...", ...]}, ...]} with at least one example`,
      );
      continue;
    }
    fixtures.push({
      name,
      options: (options as Record<string, unknown> | undefined) ?? {},
      examples: examples as GuardrailExample[],
    });
  }
  return fixtures;
}

/** One event of a test stream: one delta of one channel. */
class Delta implements StreamItem {
  text: string;
  readonly deltas: StreamPiece[];
  readonly wholes: StreamPiece[] = [];
  readonly closes: string[] = [];

  constructor(text: string) {
    this.text = text;
    this.deltas = [{ channel: 'choice 0|content', text, set: (value) => (this.text = value) }];
  }
}

/** What a stream of `pieces` brings the client under `guardrail`: its text, or the block. */
function streamed(
  guardrail: TextGuardrail,
  context: TextContext,
  pieces: readonly string[],
): { text: string; blocked: boolean } {
  const guard = new StreamGuard<Delta>([guardrail], context);
  let text = '';
  for (const piece of pieces) {
    const step = guard.push(new Delta(piece));
    if (step.blocked) return { text, blocked: true };
    for (const event of step.released) text += event.text;
  }
  const last = guard.end();
  for (const event of last.released) text += event.text;
  return { text, blocked: last.blocked !== undefined };
}

/**
 * The cuts a stream test tries: every character an event of its own (the hardest case for the window),
 * after every character (two events), and in three events around each finding.
 */
function cuts(text: string, finds: readonly string[]): number[][] {
  const all: number[][] = [Array.from({ length: Math.max(0, text.length - 1) }, (_, index) => index + 1)];
  for (let at = 1; at < text.length; at++) all.push([at]);
  let from = 0;
  for (const found of finds) {
    const start = text.indexOf(found, from);
    if (start < 0) continue;
    for (let at = start + 1; at < start + found.length - 1; at++) all.push([start, at, start + found.length]);
    from = start + found.length;
  }
  return all;
}

const pieces = (text: string, at: readonly number[]) =>
  [0, ...at, text.length]
    .slice(1)
    .map((end, index, ends) => text.slice(index === 0 ? 0 : ends[index - 1], end))
    .filter(Boolean);

/**
 * The checks of `plugin test` for a guardrail plugin (it loaded and validated already): its example
 * fixtures are well formed and there is at least one (rule `fixture`), the fixtures' options pass
 * `checkOptions` (rule `options`), `scan` finds exactly what each example says, in requests and answers
 * (rule `finds`), and a stream finds it too however the text is cut into events, blocking it before
 * any of it goes out and redacting it as the whole text would be (rule `stream`: `maxFindingChars`
 * covers what `scan` finds). A hook's fault is rule `plugin-fault`, naming the hook.
 */
export function checkGuardrail(guardrail: GuardrailPlugin, report: Report): void {
  const fail = (rule: string, message: string) => report.failures.push({ plugin: guardrail.guardrail, rule, message });
  const malformed: string[] = [];
  const fixtures = readGuardrailFixtures(report.directory, malformed);
  report.checks += 1;
  for (const message of malformed) fail('fixture', message);
  if (fixtures.length === 0 && malformed.length === 0)
    fail('fixture', `no examples: add __fixtures__/<name>${SUFFIX} with texts and what scan must find in them`);
  try {
    for (const fixture of fixtures) {
      report.checks += 1;
      const problems = guardrail.checkOptions?.(fixture.options) ?? [];
      if (problems.length) {
        fail('options', `fixture '${fixture.name}': checkOptions refuses its options: ${problems.join('; ')}`);
        continue;
      }
      const entry = (action: 'block' | 'redact') =>
        pluginGuardrail(
          guardrail,
          {
            name: guardrail.guardrail,
            use: guardrail.guardrail,
            on: 'both',
            action,
            options: fixture.options,
            replacement: '[FOUND]',
          },
          { request: true, response: true },
        );
      const blocking = entry('block');
      const redacting = entry('redact');
      const longest = Math.max(
        0,
        ...fixtures.flatMap((each) => each.examples.flatMap((example) => example.finds.map((text) => text.length))),
      );
      fixture.examples.forEach((example, index) => {
        const what = `fixture '${fixture.name}', example ${index + 1}`;
        for (const phase of ['request', 'response'] as const) {
          report.checks += 1;
          const context: TextContext = { phase, route: 'chat-completions', model: 'conformance/model' };
          // As the gateway scans: on the text's view (NFKC-normalised, invisible characters left out), mapped back.
          const view = textView(example.text);
          const merged = mergeFindings(findIn(redacting, view, context));
          const found = merged.map((finding) => example.text.slice(finding.start, finding.end));
          if (JSON.stringify(found) !== JSON.stringify(example.finds)) {
            fail(
              'finds',
              `${what} (${phase}): scan found ${JSON.stringify(found)}, the example says ${JSON.stringify(example.finds)}`,
            );
            continue;
          }
          if (phase === 'request') continue;
          report.checks += 1;
          const whole = checkText(example.text, [redacting], context);
          const expected = whole.kind === 'redact' ? whole.text : example.text;
          for (const at of cuts(example.text, example.finds)) {
            const cut = pieces(example.text, at);
            const blocked = streamed(blocking, context, cut);
            const found = example.finds.length > 0;
            const wrong =
              !blocked.blocked && found
                ? 'let the finding through'
                : blocked.blocked && !found
                  ? 'blocked a text with no finding'
                  : blocked.blocked && blocked.text.length > example.text.indexOf(example.finds[0]!)
                    ? 'let part of a finding out before blocking it'
                    : undefined;
            if (wrong) {
              fail(
                'stream',
                `${what}: cut into ${JSON.stringify(cut)}, a stream ${wrong}; maxFindingChars (${guardrail.maxFindingChars ?? 256}) must be at least the longest finding (${longest} characters) and cover what scan looks at around it`,
              );
              return;
            }
            const redacted = streamed(redacting, context, cut);
            if (redacted.text !== expected) {
              fail(
                'stream',
                `${what}: cut into ${JSON.stringify(cut)}, a redacting stream gave ${JSON.stringify(redacted.text)}, the whole text ${JSON.stringify(expected)}; maxFindingChars (${guardrail.maxFindingChars ?? 256}) must be at least the longest finding (${longest} characters) and cover what scan looks at around it`,
              );
              return;
            }
          }
        }
      });
    }
  } catch (error) {
    if (!isPluginFault(error)) throw error;
    fail('plugin-fault', `guardrail '${error.plugin}' failed in its hook '${error.hook}': ${error.message}`);
  }
}
