import type { RequestHandler } from 'express';
import type { GuardrailAction, GuardrailOn, GuardrailSettings } from '../guardrails/guardrail-settings.ts';

/**
 * A configured guardrail as the admin API and the account page list it: never a webhook's url or headers, nor patterns
 * or options.
 */
export interface GuardrailView {
  readonly name: string;
  /** Its kind: `regex`, `pii`, `webhook` or a guardrail plugin's name. */
  readonly use: string;
  readonly on: GuardrailOn;
  /** What it does with a finding; null for a webhook (its service decides). */
  readonly action: GuardrailAction | null;
}

export function guardrailView(settings: GuardrailSettings): GuardrailView {
  return {
    name: settings.name,
    use: settings.use,
    on: settings.on,
    action: 'action' in settings ? settings.action : null,
  };
}

/**
 * `GET /guardrails`: the guardrails the configuration in force holds, in its order, as `{object:'list',
 * data:[GuardrailView]}`.
 */
export function guardrailListRoute(settings: () => readonly GuardrailSettings[]): RequestHandler {
  return function listGuardrails(_req, res) {
    res.json({ object: 'list', data: settings().map(guardrailView) });
  };
}

/**
 * The names of the configured guardrails (read per call), what keys' and teams' `guardrails` are checked against;
 * unchecked (undefined) without settings.
 */
export function guardrailNames(
  settings: (() => readonly GuardrailSettings[]) | undefined,
): (() => readonly string[]) | undefined {
  return settings && (() => settings().map((entry) => entry.name));
}
