import type { Finding, TextContext, TextGuardrail } from './guardrail.ts';
import { rawFindings, textView, type TextView } from './text-view.ts';

/**
 * Findings sorted by start and merged where they overlap (or touch nothing twice): one stretch per
 * merged group, with the replacement of its earliest finding.
 */
export function mergeFindings(findings: readonly Finding[]): Finding[] {
  if (findings.length <= 1) return [...findings];
  const sorted = [...findings].sort((a, b) => a.start - b.start || b.end - a.end);
  const merged: Finding[] = [];
  for (const finding of sorted) {
    const last = merged[merged.length - 1];
    if (last && finding.start < last.end) {
      if (finding.end > last.end) merged[merged.length - 1] = { ...last, end: finding.end };
    } else merged.push(finding);
  }
  return merged;
}

/** `text` with each merged finding replaced. */
export function redactText(text: string, merged: readonly Finding[]): string {
  let out = '';
  let at = 0;
  for (const finding of merged) {
    out += text.slice(at, finding.start) + finding.replacement;
    at = finding.end;
  }
  return out + text.slice(at);
}

/** What the text guardrails make of one whole text. */
export type TextVerdict =
  | { readonly kind: 'pass' }
  | { readonly kind: 'block'; readonly guardrail: string }
  /** The text with every finding of the redacting guardrails replaced, and which of them found something. */
  | { readonly kind: 'redact'; readonly text: string; readonly guardrails: readonly string[] };

const PASS: TextVerdict = { kind: 'pass' };

/** A guardrail's findings in a text's view, as stretches of the text itself. */
export function findIn(guardrail: TextGuardrail, view: TextView, context: TextContext, json = false) {
  const found = guardrail.find(view.text, context);
  return found.length === 0 || (!view.starts && !json) ? found : rawFindings(view, found, json);
}

/**
 * Runs each guardrail on a whole text (a request's text, a JSON answer's, a finished part of a stream),
 * matched on its view (see {@link textView}; `json`: the text is JSON text, its escapes undone first):
 * the first blocking guardrail (in configuration order) with a finding blocks; otherwise the findings
 * of the redacting ones, merged, are replaced in one pass over the text as it came.
 */
export function checkText(
  text: string,
  guardrails: readonly TextGuardrail[],
  context: TextContext,
  json = false,
): TextVerdict {
  if (text === '') return PASS;
  const view = textView(text, json);
  let redactions: Finding[] | undefined;
  let redactors: string[] | undefined;
  for (const guardrail of guardrails) {
    const found = findIn(guardrail, view, context, json);
    if (found.length === 0) continue;
    if (guardrail.action === 'block') return { kind: 'block', guardrail: guardrail.name };
    (redactions ??= []).push(...found);
    (redactors ??= []).push(guardrail.name);
  }
  if (!redactions) return PASS;
  return { kind: 'redact', text: redactText(text, mergeFindings(redactions)), guardrails: redactors! };
}

/**
 * Every finding's replacement placed in the segment where the finding starts, and its text cut out of
 * every segment it covers: the segments' new texts. `segments` are consecutive stretches of one text
 * (`[start, end)` in its coordinates, each with its own text), `merged` sorted findings within them.
 */
export function redactAcross(
  segments: readonly { readonly start: number; readonly end: number; readonly text: string }[],
  merged: readonly Finding[],
): string[] {
  const out: string[] = [];
  let next = 0;
  for (const { start, end, text } of segments) {
    let piece = '';
    let at = start;
    while (at < end) {
      while (next < merged.length && merged[next]!.end <= at) next++;
      const finding = merged[next];
      if (!finding || finding.start >= end) {
        piece += text.slice(at - start);
        break;
      }
      if (finding.start > at) {
        piece += text.slice(at - start, finding.start - start);
        at = finding.start;
      }
      if (at === finding.start) piece += finding.replacement;
      at = Math.min(end, finding.end);
    }
    out.push(piece);
  }
  return out;
}
