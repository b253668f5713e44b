import { hostname, userInfo } from 'node:os';
import type { Logger } from 'pino';
import type { GatewayConfig } from '../config/gateway-config.ts';
import { ADMIN_GRANT } from '../core/access.ts';
import { createLogger } from '../core/logger.ts';
import { accessKeyStore, accessTeamStore } from '../control-plane/access/access-stores.ts';
import { runInScope } from '../control-plane/access/request-scope.ts';
import { startAuditTrail } from '../ops/audit/audit-trail.ts';
import { openStores, type OpenStores, type OpenStoresOptions } from '../stores/open-stores.ts';

/** The operating-system user running the CLI: the actor its changes are recorded under. */
function operator(): string {
  try {
    return userInfo().username;
  } catch {
    return String(process.getuid?.() ?? 'unknown');
  }
}

/** The audit records of this run as OTLP logs, as the gateway sends its own (loaded only when configured). */
async function otlpAuditLogs(config: GatewayConfig, source: object, logger: Logger) {
  const [{ startOtlpAuditLogs }, { VERSION }] = await Promise.all([
    import('../ops/audit/otlp-audit-logs.ts'),
    import('../server/parts/observability.ts'),
  ]);
  return startOtlpAuditLogs(config.tracing, source, logger, VERSION);
}

/**
 * Runs a CLI command on the stores the server uses, as the operator: whoever can run the CLI against
 * the store holds every right, and each change the command makes is kept in the audit log (actor
 * `cli`, the operating-system user and host) before the stores close. A file export of the log gets the
 * records too, and so does an OTLP logs endpoint; `stdout` does not (the command's own output goes there).
 */
export async function withOperatorStores<T>(
  config: GatewayConfig,
  options: OpenStoresOptions,
  work: (stores: OpenStores) => Promise<T>,
): Promise<T> {
  const stores = await openStores(config, options);
  const source = {};
  const exportTo = config.auditExport && config.auditExport !== 'stdout' ? { file: config.auditExport } : undefined;
  const logger = options.logger ?? createLogger('silent');
  const trail = startAuditTrail({ source, store: stores.audit, logger, export: exportTo });
  const otlp = config.tracing.logs ? await otlpAuditLogs(config, source, logger) : undefined;
  const user = operator();
  const scope = {
    principal: { actor: { kind: 'cli' as const, id: user, name: `${user}@${hostname()}` }, grants: [ADMIN_GRANT] },
    source: { source, via: 'cli' as const },
  };
  try {
    return await runInScope(scope, () =>
      work({ ...stores, keys: accessKeyStore(stores.keys, stores.teams), teams: accessTeamStore(stores.teams) }),
    );
  } finally {
    await trail.close();
    await otlp?.shutdown();
    await stores.close();
  }
}
