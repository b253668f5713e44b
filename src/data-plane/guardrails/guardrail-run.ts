import type { GuardrailActed } from '../../core/diagnostics.ts';
import type { CallerKey, GuardrailMark } from '../../core/exchange.ts';
import type { WireFormatRules } from '../../core/formats/index.ts';
import { guardrailRefusal, type GatewayError } from '../../core/gateway-errors.ts';
import { checkText } from '../../guardrails/findings.ts';
import type { CheckedText, TextContext } from '../../guardrails/guardrail.ts';
import type { GuardrailSelection, GuardrailSet, PhaseGuardrails } from '../../guardrails/guardrail-set.ts';
import type { GuardrailPhase, RouteId } from '../../plugins/plugin-contract.ts';

export type { GuardrailActed };

/** The guardrails a caller gets: its key's list, else its team's, else every configured one; none when it gets none. */
export function selectionFor(
  set: GuardrailSet | undefined,
  caller: CallerKey | undefined,
): GuardrailSelection | undefined {
  return set?.select(caller?.guardrails ?? caller?.team?.guardrails);
}

/** Where a request runs: its client route, the model serving it, who asks. */
export interface GuardrailSite {
  readonly route: RouteId;
  readonly model: string;
  readonly requestId?: string;
  readonly keyId?: string;
  readonly team?: string;
}

/** What the guardrails made of a list of texts: refused, or each text to use (undefined where unchanged). */
export type TextsOutcome =
  | { readonly blocked: GatewayError }
  | { readonly blocked?: undefined; readonly texts: readonly (string | undefined)[] };

/**
 * The guardrails one request runs under, once its model is resolved: those its caller gets (by phase),
 * the format whose texts they read, and what they did (the usage record's marks, each reported as it
 * happens).
 */
export class GuardrailRun {
  readonly marks: GuardrailMark[] = [];
  /**
   * A webhook that did not answer let a text pass unchecked (`fail_open`): the answer is not one every guardrail
   * passed.
   */
  unchecked = false;
  private readonly reported = new Set<string>();

  constructor(
    readonly selection: GuardrailSelection,
    /** The rules of the request's wire format (where its texts are). */
    readonly rules: WireFormatRules,
    readonly site: GuardrailSite,
    private readonly report?: (acted: GuardrailActed) => void,
  ) {}

  /** Where texts of a phase are read, for the guardrails. */
  context(phase: GuardrailPhase): TextContext {
    return { phase, route: this.site.route, model: this.site.model };
  }

  /** Notes what a guardrail did: marked for the usage record and reported, once per guardrail, phase and action. */
  acted(
    guardrail: string,
    phase: GuardrailPhase,
    action: GuardrailActed['action'],
    cause: GuardrailActed['cause'],
    detail?: string,
  ): void {
    if (action === 'fail_open') this.unchecked = true;
    const key = `${guardrail}\u0000${phase}\u0000${action}`;
    if (this.reported.has(key)) return;
    this.reported.add(key);
    if (action !== 'fail_open') this.marks.push({ name: guardrail, phase, action });
    this.report?.({
      guardrail,
      phase,
      action,
      cause,
      ...(detail === undefined ? {} : { detail }),
      route: this.site.route,
      model: this.site.model,
      requestId: this.site.requestId,
      keyId: this.site.keyId,
      team: this.site.team,
    });
  }

  /**
   * Runs a phase's guardrails over whole texts (a request's, a JSON answer's): the text guardrails on
   * each (JSON text with its escapes undone), in configuration order, then each webhook on all of them at
   * once, as they are (asynchronous: only then is a promise returned). A guardrail plugin's fault is
   * thrown (its `PluginFault`).
   */
  checkTexts(
    phase: GuardrailPhase,
    guardrails: PhaseGuardrails,
    texts: readonly CheckedText[],
    stream: boolean,
  ): TextsOutcome | Promise<TextsOutcome> {
    const context = this.context(phase);
    const current = texts.map((checked) => checked.text);
    const changed: (string | undefined)[] = texts.map(() => undefined);
    if (guardrails.text.length > 0) {
      for (const [index, { text, json }] of texts.entries()) {
        const verdict = checkText(text, guardrails.text, context, json);
        if (verdict.kind === 'block') {
          this.acted(verdict.guardrail, phase, 'block', 'finding');
          return { blocked: guardrailRefusal(verdict.guardrail, phase) };
        }
        if (verdict.kind === 'redact') {
          current[index] = changed[index] = verdict.text;
          for (const name of verdict.guardrails) this.acted(name, phase, 'redact', 'finding');
        }
      }
    }
    if (guardrails.webhooks.length === 0 || texts.length === 0) return { texts: changed };
    return this.askWebhooks(phase, guardrails, current, changed, stream);
  }

  private async askWebhooks(
    phase: GuardrailPhase,
    guardrails: PhaseGuardrails,
    current: string[],
    changed: (string | undefined)[],
    stream: boolean,
  ): Promise<TextsOutcome> {
    const { keyId, team, requestId } = this.site;
    for (const webhook of guardrails.webhooks) {
      const verdict = await webhook.check(current, { ...this.context(phase), keyId, team, requestId, stream });
      const refused = this.webhookVerdict(webhook.name, webhook.failMode, phase, verdict);
      if (refused) return { blocked: refused };
      if (verdict.kind === 'rewrite') {
        verdict.texts.forEach((text, index) => {
          if (text !== current[index]) current[index] = changed[index] = text;
        });
      }
    }
    return { texts: changed };
  }

  /**
   * Notes a webhook's verdict: the refusal to answer with (a block, or an unavailable webhook that
   * fails closed), else undefined (allowed; a rewrite noted as a redaction; unavailable and open).
   */
  webhookVerdict(
    name: string,
    failMode: 'open' | 'closed',
    phase: GuardrailPhase,
    verdict: Awaited<ReturnType<PhaseGuardrails['webhooks'][number]['check']>>,
  ): GatewayError | undefined {
    if (verdict.kind === 'block') {
      this.acted(name, phase, 'block', 'webhook');
      return guardrailRefusal(name, phase);
    }
    if (verdict.kind === 'rewrite') this.acted(name, phase, 'redact', 'webhook');
    if (verdict.kind === 'unavailable') {
      if (failMode === 'closed') {
        this.acted(name, phase, 'block', 'unavailable', verdict.reason);
        return guardrailRefusal(name, phase, true);
      }
      this.acted(name, phase, 'fail_open', 'unavailable', verdict.reason);
    }
    return undefined;
  }
}
