import type { AccessSettings } from '../config/access-config.ts';
import { EVENTS, publish } from '../core/diagnostics.ts';
import type { LiveSettings } from './live-config.ts';

/** What the audit log keeps of the access settings: never the client secret. */
export function accessSummary(access: AccessSettings) {
  return {
    admin_token: access.adminToken,
    oidc: access.oidc
      ? { issuer: access.oidc.issuer, client_id: access.oidc.clientId, groups_claim: access.oidc.groupsClaim }
      : null,
    roles: access.roles,
  };
}

/** Publishes an applied reload as a change by the configuration: its version and access settings before and after. */
export function reloadApplied(source: object, settings: LiveSettings, previous: LiveSettings): void {
  publish(EVENTS.controlPlaneChange, () => ({
    source,
    via: 'config' as const,
    at: Date.now(),
    actor: { kind: 'config' as const, id: 'config-file', roles: [] },
    action: 'config.reload',
    target: { type: 'config' as const, id: settings.version },
    before: { version: previous.version, access: accessSummary(previous.config.access) },
    after: { version: settings.version, access: accessSummary(settings.config.access) },
  }));
}
