import {
  DEFAULT_REPLACEMENT,
  DEFAULT_WINDOW_CHARS,
  type Finding,
  type Phases,
  type TextGuardrail,
} from './guardrail.ts';
import type { RegexSettings } from './guardrail-settings.ts';
import { longestMatch } from './regex-length.ts';

/** The flags a pattern is compiled with. */
export const regexFlags = (ignoreCase: boolean): string => (ignoreCase ? 'gi' : 'g');

/**
 * Why `new RegExp` refuses a pattern, without quoting it (a config problem never quotes the file); undefined when it
 * compiles.
 */
export function patternProblem(pattern: string, ignoreCase = false): string | undefined {
  try {
    new RegExp(pattern, regexFlags(ignoreCase));
  } catch (error) {
    const message = (error as Error).message;
    // `Invalid regular expression: /(/g: Unterminated group`: the reason is after the last colon.
    return `is not a valid regular expression (${message.slice(message.lastIndexOf(':') + 1).trim()})`;
  }
  return new RegExp(pattern).test('') ? 'matches the empty text, so it would find something in every text' : undefined;
}

/** Every non-empty match of a global regular expression in `text`. */
export function matchesOf(regex: RegExp, text: string, replacement: string, into: Finding[]): void {
  regex.lastIndex = 0;
  for (let match = regex.exec(text); match !== null; match = regex.exec(text)) {
    if (match[0].length === 0) {
      regex.lastIndex++;
      continue;
    }
    into.push({ start: match.index, end: match.index + match[0].length, replacement });
  }
}

/**
 * The `regex` guardrail: every match of any of its patterns is a finding, replaced by `replacement`
 * (`[REDACTED]` by default) when it redacts. Its stream window is the longest text any pattern can
 * match, or `windowChars` (for unbounded patterns, 256 by default).
 */
export function regexGuardrail(settings: RegexSettings, phases: Phases): TextGuardrail {
  const regexes = settings.patterns.map((pattern) => new RegExp(pattern, regexFlags(settings.ignoreCase)));
  const replacement = settings.replacement ?? DEFAULT_REPLACEMENT;
  const longest = Math.max(1, ...settings.patterns.map(longestMatch));
  return {
    kind: 'text',
    name: settings.name,
    phases,
    action: settings.action,
    window: settings.windowChars ?? (Number.isFinite(longest) ? longest : DEFAULT_WINDOW_CHARS),
    find(text) {
      const found: Finding[] = [];
      for (const regex of regexes) matchesOf(regex, text, replacement, found);
      return found;
    },
  };
}
