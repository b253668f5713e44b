/** A guardrail entry of the config file (`guardrails:`), as validated: what the gateway builds each guardrail from. */

/** What a guardrail's name may be: letters, digits, `.`, `_` and `-`, 1 to 64, starting with a letter or digit. */
export const GUARDRAIL_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
export const GUARDRAIL_NAME_RULE =
  'must be a name of 1 to 64 letters, digits, ., _ or -, starting with a letter or digit';

/** Which side of an exchange a guardrail reads: the request, the answer, or both. */
export type GuardrailOn = 'request' | 'response' | 'both';

/** What a text guardrail (regex, pii, an external one) does with a finding: refuse, or replace it. */
export type GuardrailAction = 'block' | 'redact';

/**
 * What a webhook guardrail does when its service does not answer in time (or answers nonsense): let the text pass, or
 * refuse it.
 */
export type WebhookFailMode = 'open' | 'closed';

/** The personal data and secrets the `pii` guardrail finds. */
export const PII_ENTITIES = ['email', 'phone', 'card', 'iban', 'ip', 'secret'] as const;
export type PiiEntity = (typeof PII_ENTITIES)[number];

/** The kinds built into the gateway; any other `use:` names a guardrail plugin. */
export const BUILT_IN_GUARDRAILS = ['regex', 'pii', 'webhook'] as const;

interface CommonSettings {
  /** Unique among the config's guardrails; what keys and teams name, and what errors, records and metrics show. */
  readonly name: string;
  readonly on: GuardrailOn;
}

/** Settings of the guardrails that find stretches of text: regex, pii and external ones. */
interface TextSettings extends CommonSettings {
  readonly action: GuardrailAction;
  /** What stands in for a finding when redacting; each kind has its default. */
  readonly replacement?: string;
  /** Text a stream holds back per channel, over the kind's own longest finding. */
  readonly windowChars?: number;
}

export interface RegexSettings extends TextSettings {
  readonly use: 'regex';
  /** JavaScript regular expressions (no delimiters), each compiled with the `g` flag (and `i` with `ignoreCase`). */
  readonly patterns: readonly string[];
  readonly ignoreCase: boolean;
}

export interface PiiSettings extends TextSettings {
  readonly use: 'pii';
  readonly entities: readonly PiiEntity[];
}

export interface ExternalSettings extends TextSettings {
  /** The guardrail plugin's name. */
  readonly use: string;
  /** Handed to the plugin's `checkOptions` and, in its context, to every `scan`. */
  readonly options: Readonly<Record<string, unknown>>;
}

export interface WebhookSettings extends CommonSettings {
  readonly use: 'webhook';
  readonly url: string;
  readonly timeoutMs: number;
  readonly failMode: WebhookFailMode;
  /** Sent with every call (an `authorization` for the service, say); never logged. */
  readonly headers: Readonly<Record<string, string>>;
}

export type GuardrailSettings = RegexSettings | PiiSettings | WebhookSettings | ExternalSettings;

/** Whether a guardrail entry reads the given phase. */
export const readsPhase = (on: GuardrailOn, phase: 'request' | 'response'): boolean => on === 'both' || on === phase;
