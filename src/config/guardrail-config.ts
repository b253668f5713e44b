import { patternProblem } from '../guardrails/regex-guardrail.ts';
import {
  BUILT_IN_GUARDRAILS,
  GUARDRAIL_NAME,
  GUARDRAIL_NAME_RULE,
  PII_ENTITIES,
  type GuardrailSettings,
  type PiiEntity,
} from '../guardrails/guardrail-settings.ts';
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

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

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
    const invalid: Invalid = (field, text) => {
      bad = true;
      const path = field === undefined ? at : [...at, ...(typeof field === 'string' ? [field] : field)];
      problem(`${fieldName(path)} ${text}`, path);
    };
    if (!isRecord(item)) return invalid(undefined, 'must be a mapping: { name, use, on, … }');
    const kind = entryKind(item, index, seen, invalid);
    if (!kind) return;
    if (kind !== 'webhook') checkTextSettings(item, invalid);
    KIND_CHECKS[kind](item, invalid);
    if (!bad) entries.push(settingsOf(kind, item));
  });
  return entries;
}

/** Tells one problem of an entry: at a field of it (a path within it), or at the entry itself. */
type Invalid = (field: string | readonly (string | number)[] | undefined, text: string) => void;

type GuardrailKind = keyof typeof SETTINGS_OF;

/**
 * The entry's name (unique), `use` and `on` checked, and no setting its kind does not take; its kind, once `use` is
 * readable.
 */
function entryKind(
  item: Record<string, unknown>,
  index: number,
  seen: Map<string, number>,
  invalid: Invalid,
): GuardrailKind | undefined {
  const { name, use, on } = item;
  if (typeof name !== 'string' || !GUARDRAIL_NAME.test(name)) invalid('name', GUARDRAIL_NAME_RULE);
  else if (seen.has(name))
    invalid('name', `is taken by guardrails[${seen.get(name)}]: each guardrail needs its own name`);
  else seen.set(name, index);
  let kind: GuardrailKind | undefined;
  if (typeof use !== 'string' || !(BUILT_IN_GUARDRAILS.includes(use as 'regex') || PLUGIN_NAME.test(use))) {
    invalid('use', `must be ${BUILT_IN_GUARDRAILS.join(', ')} or the name of a guardrail plugin`);
  } else kind = BUILT_IN_GUARDRAILS.includes(use as 'regex') ? (use as 'regex' | 'pii' | 'webhook') : 'external';
  if (on !== undefined && on !== 'request' && on !== 'response' && on !== 'both')
    invalid('on', 'must be request, response or both');
  if (!kind) return undefined;
  const known = SETTINGS_OF[kind];
  const what = kind === 'external' ? 'a guardrail plugin entry' : `a ${kind} guardrail`;
  for (const field of Object.keys(item))
    if (!known.includes(field)) invalid(field, `is not a setting of ${what} (settings: ${known.join(', ')})`);
  return kind;
}

/** The settings of a guardrail that finds text itself (regex, pii, plugins): its action, replacement and window. */
function checkTextSettings(item: Record<string, unknown>, invalid: Invalid): void {
  const { action, replacement, windowChars } = item;
  if (action !== 'block' && action !== 'redact')
    invalid('action', action === undefined ? 'is missing: block or redact' : 'must be block or redact');
  if (replacement !== undefined && typeof replacement !== 'string') invalid('replacement', 'must be a string');
  if (
    windowChars !== undefined &&
    !(Number.isInteger(windowChars) && (windowChars as number) >= 1 && (windowChars as number) <= MAX_WINDOW_CHARS)
  ) {
    invalid('windowChars', `must be an integer from 1 to ${MAX_WINDOW_CHARS}`);
  }
}

/** Each kind's own settings, checked. */
const KIND_CHECKS: Readonly<Record<GuardrailKind, (item: Record<string, unknown>, invalid: Invalid) => void>> = {
  regex({ patterns, ignoreCase }, invalid) {
    if (ignoreCase !== undefined && typeof ignoreCase !== 'boolean') invalid('ignoreCase', 'must be true or false');
    if (!Array.isArray(patterns) || patterns.length === 0)
      return invalid('patterns', 'must be a non-empty list of regular expressions');
    patterns.forEach((pattern: unknown, position) => {
      if (typeof pattern !== 'string') return invalid(['patterns', position], 'must be a string');
      const why = patternProblem(pattern, ignoreCase === true);
      if (why) invalid(['patterns', position], why);
    });
  },
  pii({ entities }, invalid) {
    if (entities === undefined) return;
    if (!Array.isArray(entities) || entities.length === 0)
      return invalid('entities', `must be a non-empty list of ${PII_ENTITIES.join(', ')}`);
    entities.forEach((entity: unknown, position) => {
      if (!PII_ENTITIES.includes(entity as PiiEntity))
        invalid(['entities', position], `must be one of ${PII_ENTITIES.join(', ')}`);
    });
  },
  webhook({ url, timeoutMs, failMode, headers }, invalid) {
    if (typeof url !== 'string') invalid('url', 'is missing: the http:// or https:// URL to POST the texts to');
    else if (!isHttpUrl(url)) invalid('url', 'must be an http:// or https:// URL');
    if (
      timeoutMs !== undefined &&
      !(Number.isInteger(timeoutMs) && (timeoutMs as number) >= 1 && (timeoutMs as number) <= MAX_WEBHOOK_TIMEOUT_MS)
    ) {
      invalid('timeoutMs', `must be an integer from 1 to ${MAX_WEBHOOK_TIMEOUT_MS} (ms)`);
    }
    if (failMode !== 'open' && failMode !== 'closed') {
      const missing =
        'is missing: open (let the text pass) or closed (refuse it) when the webhook does not answer in time';
      invalid('failMode', failMode === undefined ? missing : 'must be open or closed');
    }
    if (
      headers !== undefined &&
      (!isRecord(headers) || Object.values(headers).some((value) => typeof value !== 'string'))
    )
      invalid('headers', 'must map header names to strings');
  },
  external({ options }, invalid) {
    if (options !== undefined && !isRecord(options)) invalid('options', 'must be a mapping');
  },
};

/** The settings of an entry that passed every check. */
function settingsOf(kind: GuardrailKind, item: Record<string, unknown>): GuardrailSettings {
  const common = { name: item.name as string, on: (item.on ?? 'both') as 'request' | 'response' | 'both' };
  if (kind === 'webhook') {
    return {
      ...common,
      use: 'webhook',
      url: item.url as string,
      timeoutMs: (item.timeoutMs as number | undefined) ?? DEFAULT_WEBHOOK_TIMEOUT_MS,
      failMode: item.failMode as 'open' | 'closed',
      headers: (item.headers as Record<string, string> | undefined) ?? {},
    };
  }
  const text = {
    action: item.action as 'block' | 'redact',
    ...(item.replacement === undefined ? {} : { replacement: item.replacement as string }),
    ...(item.windowChars === undefined ? {} : { windowChars: item.windowChars as number }),
  };
  if (kind === 'regex')
    return {
      ...common,
      ...text,
      use: 'regex',
      patterns: item.patterns as string[],
      ignoreCase: item.ignoreCase === true,
    };
  if (kind === 'pii')
    return {
      ...common,
      ...text,
      use: 'pii',
      entities: (item.entities as PiiEntity[] | undefined) ?? [...PII_ENTITIES],
    };
  return {
    ...common,
    ...text,
    use: item.use as string,
    options: (item.options as Record<string, unknown> | undefined) ?? {},
  };
}
