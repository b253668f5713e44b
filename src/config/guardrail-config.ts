import { patternProblem } from '../guardrails/regex-guardrail.ts';
import { BUILT_IN_GUARDRAILS, GUARDRAIL_NAME, GUARDRAIL_NAME_RULE, PII_ENTITIES, type GuardrailSettings, type PiiEntity } from '../guardrails/guardrail-settings.ts';
import { fieldName, type FieldPath } from './config-problems.ts';
import { isHttpUrl } from './config-values.ts';

/** What a guardrail plugin's name (an entry's `use`) may be, as a plugin folder's. */
const PLUGIN_NAME = /^[a-z0-9][a-z0-9-]*$/;
/** Largest stream window an entry may set: more would hold a stream's text for very long. */
export const MAX_WINDOW_CHARS = 65_536;
/** Longest a webhook may be given to answer, in ms. */
export const MAX_WEBHOOK_TIMEOUT_MS = 60_000;
/** A webhook's timeout when the entry sets none, in ms. */
export const DEFAULT_WEBHOOK_TIMEOUT_MS = 1000;

const COMMON = ['name', 'use', 'on'];
const TEXT = [...COMMON, 'action', 'replacement', 'windowChars'];
const SETTINGS_OF: Record<'regex' | 'pii' | 'webhook' | 'external', readonly string[]> = {
  regex: [...TEXT, 'patterns', 'ignoreCase'],
  pii: [...TEXT, 'entities'],
  webhook: [...COMMON, 'url', 'timeoutMs', 'failMode', 'headers'],
  external: [...TEXT, 'options'],
};

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * The config file's `guardrails:` list, every entry checked, each problem reported at its field (never
 * quoting a value: a webhook's headers may hold a credential) and the entry left out. A `use` other than
 * regex, pii and webhook is taken as a guardrail plugin's name here; that such a plugin is loaded, and
 * accepts the entry's `options`, is checked against the loaded plugins (`guardrailPluginProblems`).
 */
export function guardrailSettings(raw: unknown, problem: (text: string, at: FieldPath) => void): GuardrailSettings[] {
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) {
    problem('guardrails must be a list of guardrail entries ({ name, use, on, … } each)', ['guardrails']);
    return [];
  }
  const entries: GuardrailSettings[] = [];
  const seen = new Map<string, number>();
  raw.forEach((item: unknown, index) => {
    const at: FieldPath = ['guardrails', index];
    let bad = false;
    const invalid = (field: string | readonly (string | number)[] | undefined, text: string) => {
      bad = true;
      const path = field === undefined ? at : [...at, ...(typeof field === 'string' ? [field] : field)];
      problem(`${fieldName(path)} ${text}`, path);
    };
    if (!isRecord(item)) return invalid(undefined, 'must be a mapping: { name, use, on, … }');
    const { name, use, on } = item;
    if (typeof name !== 'string' || !GUARDRAIL_NAME.test(name)) invalid('name', GUARDRAIL_NAME_RULE);
    else if (seen.has(name)) invalid('name', `is taken by guardrails[${seen.get(name)}]: each guardrail needs its own name`);
    else seen.set(name, index);
    let kind: keyof typeof SETTINGS_OF | undefined;
    if (typeof use !== 'string' || !(BUILT_IN_GUARDRAILS.includes(use as 'regex') || PLUGIN_NAME.test(use))) {
      invalid('use', `must be ${BUILT_IN_GUARDRAILS.join(', ')} or the name of a guardrail plugin`);
    } else kind = BUILT_IN_GUARDRAILS.includes(use as 'regex') ? (use as 'regex' | 'pii' | 'webhook') : 'external';
    if (on !== undefined && on !== 'request' && on !== 'response' && on !== 'both') invalid('on', 'must be request, response or both');
    if (!kind) return;
    const known = SETTINGS_OF[kind];
    const what = kind === 'external' ? 'a guardrail plugin entry' : `a ${kind} guardrail`;
    for (const field of Object.keys(item)) if (!known.includes(field)) invalid(field, `is not a setting of ${what} (settings: ${known.join(', ')})`);

    if (kind !== 'webhook') {
      if (item.action !== 'block' && item.action !== 'redact') invalid('action', item.action === undefined ? 'is missing: block or redact' : 'must be block or redact');
      if (item.replacement !== undefined && typeof item.replacement !== 'string') invalid('replacement', 'must be a string');
      if (item.windowChars !== undefined && !(Number.isInteger(item.windowChars) && (item.windowChars as number) >= 1 && (item.windowChars as number) <= MAX_WINDOW_CHARS)) {
        invalid('windowChars', `must be an integer from 1 to ${MAX_WINDOW_CHARS}`);
      }
    }
    if (kind === 'regex') {
      const { patterns, ignoreCase } = item;
      if (ignoreCase !== undefined && typeof ignoreCase !== 'boolean') invalid('ignoreCase', 'must be true or false');
      if (!Array.isArray(patterns) || patterns.length === 0) invalid('patterns', 'must be a non-empty list of regular expressions');
      else {
        patterns.forEach((pattern: unknown, position) => {
          if (typeof pattern !== 'string') return invalid(['patterns', position], 'must be a string');
          const why = patternProblem(pattern, ignoreCase === true);
          if (why) invalid(['patterns', position], why);
        });
      }
    } else if (kind === 'pii') {
      const { entities } = item;
      if (entities !== undefined && (!Array.isArray(entities) || entities.length === 0)) invalid('entities', `must be a non-empty list of ${PII_ENTITIES.join(', ')}`);
      else if (Array.isArray(entities)) {
        entities.forEach((entity: unknown, position) => {
          if (!PII_ENTITIES.includes(entity as PiiEntity)) invalid(['entities', position], `must be one of ${PII_ENTITIES.join(', ')}`);
        });
      }
    } else if (kind === 'webhook') {
      const { url, timeoutMs, failMode, headers } = item;
      if (typeof url !== 'string') invalid('url', 'is missing: the http:// or https:// URL to POST the texts to');
      else if (!isHttpUrl(url)) invalid('url', 'must be an http:// or https:// URL');
      if (timeoutMs !== undefined && !(Number.isInteger(timeoutMs) && (timeoutMs as number) >= 1 && (timeoutMs as number) <= MAX_WEBHOOK_TIMEOUT_MS)) {
        invalid('timeoutMs', `must be an integer from 1 to ${MAX_WEBHOOK_TIMEOUT_MS} (ms)`);
      }
      if (failMode !== 'open' && failMode !== 'closed') {
        invalid('failMode', failMode === undefined ? 'is missing: open (let the text pass) or closed (refuse it) when the webhook does not answer in time' : 'must be open or closed');
      }
      if (headers !== undefined && (!isRecord(headers) || Object.values(headers).some((value) => typeof value !== 'string'))) invalid('headers', 'must map header names to strings');
    } else if (item.options !== undefined && !isRecord(item.options)) invalid('options', 'must be a mapping');
    if (bad) return;

    const common = { name: name as string, on: (on ?? 'both') as 'request' | 'response' | 'both' };
    const text = {
      action: item.action as 'block' | 'redact',
      ...(item.replacement === undefined ? {} : { replacement: item.replacement as string }),
      ...(item.windowChars === undefined ? {} : { windowChars: item.windowChars as number }),
    };
    if (kind === 'regex') entries.push({ ...common, ...text, use: 'regex', patterns: item.patterns as string[], ignoreCase: item.ignoreCase === true });
    else if (kind === 'pii') entries.push({ ...common, ...text, use: 'pii', entities: (item.entities as PiiEntity[] | undefined) ?? [...PII_ENTITIES] });
    else if (kind === 'webhook') {
      entries.push({
        ...common,
        use: 'webhook',
        url: item.url as string,
        timeoutMs: (item.timeoutMs as number | undefined) ?? DEFAULT_WEBHOOK_TIMEOUT_MS,
        failMode: item.failMode as 'open' | 'closed',
        headers: (item.headers as Record<string, string> | undefined) ?? {},
      });
    } else entries.push({ ...common, ...text, use: use as string, options: (item.options as Record<string, unknown> | undefined) ?? {} });
  });
  return entries;
}

