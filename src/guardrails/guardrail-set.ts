import { createHash } from 'node:crypto';
import type { GuardrailPlugin } from '../plugins/plugin-contract.ts';
import type { Guardrail, Phases, TextGuardrail, WebhookGuardrail } from './guardrail.ts';
import {
  readsPhase,
  type ExternalSettings,
  type GuardrailSettings,
  type PiiSettings,
  type RegexSettings,
  type WebhookSettings,
} from './guardrail-settings.ts';
import { piiGuardrail } from './pii-guardrail.ts';
import { pluginGuardrail } from './plugin-guardrail.ts';
import { regexGuardrail } from './regex-guardrail.ts';
import { webhookGuardrail, type WebhookPost } from './webhook-guardrail.ts';

/**
 * The guardrails of one phase, as they run: the text ones (synchronous), then the webhooks, each in configuration
 * order.
 */
export interface PhaseGuardrails {
  readonly text: readonly TextGuardrail[];
  readonly webhooks: readonly WebhookGuardrail[];
}

/** The guardrails one caller gets, by phase. */
export interface GuardrailSelection {
  readonly request: PhaseGuardrails | undefined;
  readonly response: PhaseGuardrails | undefined;
  /**
   * What identifies the response guardrails (their names and settings): part of the response cache's key,
   * so that an answer stored under some guardrails is never served to a caller under others. Undefined
   * without response guardrails.
   */
  readonly responseFingerprint: string | undefined;
}

/**
 * Entries of {@link GuardrailSet.select}'s memo before it is emptied (each distinct list of names keys or teams name is
 * one).
 */
const MAX_SELECTIONS = 1024;

/**
 * The guardrails of a configuration, built once per configuration (start and each reload): every entry
 * of `guardrails:` in order, and what each caller gets.
 */
export class GuardrailSet {
  private readonly selections = new Map<string, GuardrailSelection | undefined>();

  constructor(
    readonly guardrails: readonly Guardrail[],
    private readonly settings: readonly GuardrailSettings[],
  ) {}

  /** The configured names, in order. */
  get names(): readonly string[] {
    return this.guardrails.map((guardrail) => guardrail.name);
  }

  /**
   * The guardrails a caller gets: those its key names, else those its team names, else every one
   * configured (`named` undefined). Names that the configuration does not hold (any more) are skipped.
   * Undefined when the caller gets none.
   */
  select(named: readonly string[] | undefined): GuardrailSelection | undefined {
    const memo = named === undefined ? '' : `\u0000${named.join('\u0000')}`;
    if (this.selections.has(memo)) return this.selections.get(memo);
    const chosen =
      named === undefined
        ? this.guardrails.map((_, index) => index)
        : this.guardrails.flatMap((guardrail, index) => (named.includes(guardrail.name) ? [index] : []));
    const phase = (which: 'request' | 'response'): PhaseGuardrails | undefined => {
      const picked = chosen.map((index) => this.guardrails[index]!).filter((guardrail) => guardrail.phases[which]);
      if (picked.length === 0) return undefined;
      return {
        text: picked.filter((guardrail): guardrail is TextGuardrail => guardrail.kind === 'text'),
        webhooks: picked.filter((guardrail): guardrail is WebhookGuardrail => guardrail.kind === 'webhook'),
      };
    };
    const request = phase('request');
    const response = phase('response');
    const responseSettings = chosen
      .filter((index) => this.guardrails[index]!.phases.response)
      .map((index) => this.settings[index]);
    const selection =
      request || response
        ? {
            request,
            response,
            responseFingerprint: response
              ? createHash('sha256').update(JSON.stringify(responseSettings)).digest('hex').slice(0, 32)
              : undefined,
          }
        : undefined;
    if (this.selections.size >= MAX_SELECTIONS) this.selections.clear();
    this.selections.set(memo, selection);
    return selection;
  }
}

/**
 * The guardrails of the config's `guardrails:` entries (checked already: every `use` other than
 * regex, pii and webhook names one of `plugins`); undefined when there are none, so that a gateway
 * without guardrails does nothing for them per request.
 */
export function buildGuardrailSet(
  settings: readonly GuardrailSettings[],
  plugins: readonly GuardrailPlugin[],
  post?: WebhookPost,
): GuardrailSet | undefined {
  if (settings.length === 0) return undefined;
  const guardrails = settings.map((entry): Guardrail => {
    const phases: Phases = { request: readsPhase(entry.on, 'request'), response: readsPhase(entry.on, 'response') };
    if (entry.use === 'regex') return regexGuardrail(entry as RegexSettings, phases);
    if (entry.use === 'pii') return piiGuardrail(entry as PiiSettings, phases);
    if (entry.use === 'webhook') return webhookGuardrail(entry as WebhookSettings, phases, post);
    const plugin = plugins.find((candidate) => candidate.guardrail === entry.use);
    if (!plugin) throw new Error(`guardrail '${entry.name}' uses '${entry.use}', which no loaded guardrail plugin is`);
    return pluginGuardrail(plugin, entry as ExternalSettings, phases);
  });
  return new GuardrailSet(guardrails, settings);
}

/** A problem of the config's guardrails against the loaded guardrail plugins, at its field (`guardrails[2].use`). */
export interface GuardrailProblem {
  readonly text: string;
  readonly at: readonly (string | number)[];
}

/**
 * What the config's guardrail entries must pass against the loaded guardrail plugins: each `use` that is
 * not built in names one, and the plugin's `checkOptions` accepts the entry's `options`.
 */
export function guardrailPluginProblems(
  settings: readonly GuardrailSettings[],
  plugins: readonly GuardrailPlugin[],
): GuardrailProblem[] {
  const problems: GuardrailProblem[] = [];
  settings.forEach((entry, index) => {
    if (entry.use === 'regex' || entry.use === 'pii' || entry.use === 'webhook') return;
    const plugin = plugins.find((candidate) => candidate.guardrail === entry.use);
    if (!plugin) {
      const loaded = plugins.map((candidate) => candidate.guardrail);
      problems.push({
        text: `guardrails[${index}].use: '${entry.use}' is neither a built-in guardrail (regex, pii, webhook) nor a loaded guardrail plugin (${loaded.length ? `loaded: ${loaded.join(', ')}` : 'none is loaded'})`,
        at: ['guardrails', index, 'use'],
      });
      return;
    }
    let found: readonly string[] | undefined;
    try {
      found = plugin.checkOptions?.((entry as ExternalSettings).options);
    } catch (error) {
      found = [
        `the guardrail plugin '${plugin.guardrail}' failed in its hook 'checkOptions': ${(error as Error).message}`,
      ];
    }
    for (const text of found ?? [])
      problems.push({ text: `guardrails[${index}].options: ${text}`, at: ['guardrails', index, 'options'] });
  });
  return problems;
}
