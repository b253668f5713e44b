/** How many actions a log keeps: the newest, the older dropped as new ones come. */
export const GUARDRAIL_ACTIONS_KEPT = 1000;

/**
 * One thing a guardrail did to a request or an answer, as kept and shown (`GET /admin/guardrails/actions`):
 * who and where, never the text, what was found in it, nor a webhook's address or answer.
 */
export interface GuardrailActionEntry {
  /** ISO 8601 date-time of the action. */
  readonly at: string;
  readonly guardrail: string;
  readonly phase: 'request' | 'response';
  /** `fail_open`: a webhook that did not answer let the text pass unchecked. */
  readonly action: 'block' | 'redact' | 'fail_open';
  /** A finding of the guardrail's own, a webhook's verdict, or a webhook that did not answer. */
  readonly cause: 'finding' | 'webhook' | 'unavailable';
  /** The client route (`chat-completions`, `messages`, ...). */
  readonly route: string;
  /** The canonical model id that served (or would have served) the request. */
  readonly model: string;
  readonly key_id: string | null;
  readonly team: string | null;
  readonly request_id: string | null;
}

/**
 * The newest guardrail actions, for the admin API and the account page: in process (each process its
 * own), or in Redis (shared by every instance).
 */
export interface GuardrailActionLog {
  /** Keeps an action. Never throws and never waits: a store that cannot take it drops it. */
  record(entry: GuardrailActionEntry): void;
  /**
   * The newest `limit` actions kept (at most {@link GUARDRAIL_ACTIONS_KEPT}), newest first; rejects when the store
   * cannot be read.
   */
  recent(limit: number): Promise<GuardrailActionEntry[]>;
  close(): Promise<void>;
}

/** Only the fields an entry may hold, whatever else the object carries. */
export function actionEntryOf(entry: GuardrailActionEntry): GuardrailActionEntry {
  const { at, guardrail, phase, action, cause, route, model, key_id, team, request_id } = entry;
  return { at, guardrail, phase, action, cause, route, model, key_id, team, request_id };
}
