import type { GuardrailSettings } from '../../src/guardrails/guardrail-settings.ts';
import type { GuardrailActionEntry } from '../../src/stores/guardrail-actions/guardrail-action-log.ts';

/** The action at second `n` of a day: a block by `no-codes` on an answer, by key `key_<n>`, with `changes` on top. */
export const guardrailAction = (n: number, changes: Partial<GuardrailActionEntry> = {}): GuardrailActionEntry => ({
  at: new Date(Date.UTC(2026, 0, 1, 0, 0, n)).toISOString(),
  guardrail: 'no-codes',
  phase: 'response',
  action: 'block',
  cause: 'finding',
  route: 'chat-completions',
  model: 'alpha/gen-5.5',
  key_id: `key_${n}`,
  team: null,
  request_id: `req-${n}`,
  ...changes,
});

/**
 * A configured guardrail of that name (one that redacts e-mail addresses from requests), for routes that check names
 * against the configuration.
 */
export const piiGuardrail = (name: string): GuardrailSettings => ({
  name,
  use: 'pii',
  on: 'request',
  action: 'redact',
  entities: ['email'],
});
