import { createWriteStream, type WriteStream } from 'node:fs';
import type { Logger } from 'pino';
import {
  EVENTS,
  type ControlPlaneChange,
  type ControlPlaneRefusal,
  type EventSource,
  type LimitAlert,
  type SignInEvent,
} from '../../core/diagnostics.ts';
import type { AuditEntry, AuditRecord, AuditStore } from '../../stores/audit/audit-store.ts';

/** Where each stored record also goes as one JSON line: the process's stdout, or a file appended to. */
export type AuditExport = 'stdout' | { readonly file: string };

export interface AuditTrailOptions {
  /** The events of this gateway (or CLI run) only: several may run in one process. */
  readonly source: EventSource;
  readonly store: AuditStore;
  readonly export?: AuditExport;
  readonly logger: Logger;
}

export interface AuditTrail {
  /** Resolves once every event received so far is stored (and exported). */
  flush(): Promise<void>;
  /** Stops listening, stores what it has and closes the export file. */
  close(): Promise<void>;
}

/** When an event happened, as an audit record's time. */
const timeOf = (event: { readonly at: number }) => new Date(event.at).toISOString();

function changeEntry(event: ControlPlaneChange): AuditEntry {
  return {
    time: timeOf(event),
    actor: event.actor,
    via: event.via,
    address: event.address ?? null,
    action: event.action,
    outcome: 'ok',
    target: event.target,
    before: event.before,
    after: event.after,
    reason: null,
  };
}

function refusalEntry(event: ControlPlaneRefusal): AuditEntry {
  return {
    time: timeOf(event),
    actor: event.actor ?? null,
    via: event.via,
    address: event.address ?? null,
    action: event.action,
    outcome: 'refused',
    target: event.target,
    before: null,
    after: null,
    reason: event.reason,
  };
}

function signInEntry(event: SignInEvent): AuditEntry {
  return {
    time: timeOf(event),
    actor: event.actor,
    via: event.via,
    address: event.address ?? null,
    action: event.action,
    outcome: 'ok',
    target: { type: 'session', id: event.method },
    before: null,
    after: null,
    reason: null,
  };
}

/** A limit alert as the gateway's own record: which threshold of whose limit, and the use when it fired. */
function alertEntry(alert: LimitAlert): AuditEntry {
  const { id, scope, owner, team, kind, period, threshold, used, limit, unit } = alert;
  return {
    time: new Date(alert.firedAt).toISOString(),
    actor: { kind: 'gateway', id: 'limits', roles: [] },
    via: 'gateway',
    address: null,
    action: 'limit.alert',
    outcome: 'ok',
    target: { type: 'limit', id: `${scope}:${owner}:${kind}:${period}`, team },
    before: null,
    after: { id, threshold, used, limit, unit, window_end: new Date(alert.windowEnd).toISOString() },
    reason: null,
  };
}

/**
 * Subscribes `keep` to every control-plane change, refusal and sign-in of `source` and every limit alert it
 * fired, each as the audit entry it makes (at the time the event says it happened, so that every
 * subscriber's entry of one event is the same); gives back the call that unsubscribes it.
 */
export function onAuditEntries(source: EventSource, keep: (entry: AuditEntry) => void): () => void {
  const stops = [
    EVENTS.controlPlaneChange.subscribe(source, (event) => keep(changeEntry(event))),
    EVENTS.controlPlaneRefusal.subscribe(source, (event) => keep(refusalEntry(event))),
    EVENTS.signIn.subscribe(source, (event) => keep(signInEntry(event))),
    EVENTS.limitAlert.subscribe(source, (alert) => keep(alertEntry(alert))),
  ];
  return () => {
    for (const stop of stops) stop();
  };
}

/**
 * The audit log as a subscriber: every control-plane change, refusal and sign-in this gateway publishes
 * becomes one record, appended in the order received to the store's hash chain, then written as a JSON
 * line to the export when one is set. A record the store cannot take is logged at `error` (the event,
 * never a secret) and the next ones still go.
 */
export function startAuditTrail(options: AuditTrailOptions): AuditTrail {
  const out: WriteStream | NodeJS.WriteStream | undefined =
    options.export === undefined
      ? undefined
      : options.export === 'stdout'
        ? process.stdout
        : createWriteStream(options.export.file, { flags: 'a', mode: 0o600 });
  let queue: Promise<unknown> = Promise.resolve();
  const keep = (entry: AuditEntry) => {
    queue = queue.then(async () => {
      let record: AuditRecord;
      try {
        record = await options.store.append(entry);
      } catch (error) {
        options.logger.error(
          { action: entry.action, target: entry.target, err: (error as Error).message },
          'audit record could not be stored',
        );
        return;
      }
      out?.write(`${JSON.stringify(record)}\n`);
    });
  };
  const stop = onAuditEntries(options.source, keep);
  return {
    flush: async () => {
      await queue;
    },
    async close() {
      stop();
      await queue;
      if (out && out !== process.stdout) await new Promise((resolve) => (out as WriteStream).end(resolve));
    },
  };
}
