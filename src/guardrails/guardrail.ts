import type { GuardrailPhase, RouteId } from '../plugins/plugin-contract.ts';
import type { GuardrailAction, WebhookFailMode } from './guardrail-settings.ts';

/** One stretch of text a guardrail found, and what stands in for it when redacted. */
export interface Finding {
  readonly start: number;
  readonly end: number;
  readonly replacement: string;
}

/** Where a text is read: the phase, the client route and the model serving the request. */
export interface TextContext {
  readonly phase: GuardrailPhase;
  readonly route: RouteId;
  readonly model: string;
}

/** A text to check, and whether it is JSON text (tool-call arguments), matched with its escapes undone. */
export interface CheckedText {
  readonly text: string;
  readonly json?: boolean;
}

/** Which phases a guardrail reads. */
export interface Phases {
  readonly request: boolean;
  readonly response: boolean;
}

/**
 * A guardrail that reads text synchronously and finds stretches of it (regex, pii, a guardrail plugin):
 * pure, so it can be run on any window of a stream's text.
 */
export interface TextGuardrail {
  readonly kind: 'text';
  readonly name: string;
  readonly phases: Phases;
  readonly action: GuardrailAction;
  /** The longest text one finding may span: what a stream holds back (minus one character) per channel. */
  readonly window: number;
  /**
   * The findings in `text`, in any order, possibly overlapping. A guardrail plugin's fault throws its `PluginFault`.
   */
  find(text: string, context: TextContext): readonly Finding[];
}

/** What a webhook's service said of some texts. */
export type WebhookVerdict =
  | { readonly kind: 'allow' }
  | { readonly kind: 'block' }
  /** The texts to use instead, one for each text sent, in order. */
  | { readonly kind: 'rewrite'; readonly texts: readonly string[] }
  /** No usable answer in time; `reason` says why (for logs: never the text). */
  | { readonly kind: 'unavailable'; readonly reason: string };

/** Who is asking, for a webhook's context (never the key itself). */
export interface CallerContext {
  readonly keyId?: string;
  readonly team?: string;
  readonly requestId?: string;
}

/** A guardrail that asks a service (a moderation model, Presidio) over HTTP. */
export interface WebhookGuardrail {
  readonly kind: 'webhook';
  readonly name: string;
  readonly phases: Phases;
  readonly failMode: WebhookFailMode;
  /**
   * Asks about `texts`; never rejects (a failure is `unavailable`). `preceding`: text of each channel already
   * delivered, for a stream's batches.
   */
  check(
    texts: readonly string[],
    context: TextContext & CallerContext & { readonly stream: boolean; readonly preceding?: readonly string[] },
  ): Promise<WebhookVerdict>;
}

export type Guardrail = TextGuardrail | WebhookGuardrail;

/** The default stand-in for a finding of a regex or plugin guardrail. */
export const DEFAULT_REPLACEMENT = '[REDACTED]';
/** The stream window of a guardrail whose longest finding is unbounded (and no `windowChars` is set). */
export const DEFAULT_WINDOW_CHARS = 256;
