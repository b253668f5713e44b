import type { Logger } from 'pino';
import type { GuardrailActed } from '../core/diagnostics.ts';
import type { GatewayMetrics } from './metrics.ts';
import type { GuardrailActionLog } from '../stores/guardrail-actions/guardrail-action-log.ts';

/**
 * What the data plane tells of each guardrail action: counted in `gateway_guardrail_actions_total`, and
 * one warning per block (and per webhook that let a text pass unchecked), with the guardrail, phase,
 * route, model, request id, key id and team: never the text or what was found in it. Redactions are
 * logged at debug only (they may come on every request). Each action is also kept in `actions` (the
 * newest, for `GET /admin/guardrails/actions`), without the webhook's detail.
 */
export function guardrailReporter(
  metrics: Pick<GatewayMetrics, 'guardrailAction'>,
  logger: Logger,
  actions?: Pick<GuardrailActionLog, 'record'>,
  now: () => Date = () => new Date(),
): (acted: GuardrailActed) => void {
  return (acted) => {
    metrics.guardrailAction(acted.guardrail, acted.phase, acted.action);
    actions?.record({
      at: now().toISOString(),
      guardrail: acted.guardrail,
      phase: acted.phase,
      action: acted.action,
      cause: acted.cause,
      route: acted.route,
      model: acted.model,
      key_id: acted.keyId ?? null,
      team: acted.team ?? null,
      request_id: acted.requestId ?? null,
    });
    const fields = {
      guardrail: acted.guardrail,
      phase: acted.phase,
      action: acted.action,
      cause: acted.cause,
      route: acted.route,
      model: acted.model,
      request_id: acted.requestId,
      key_id: acted.keyId,
      team: acted.team,
    };
    const what = acted.phase === 'request' ? 'a request' : 'an answer';
    if (acted.action === 'block') {
      const why =
        acted.cause === 'unavailable'
          ? ` it could not check (its webhook ${acted.detail ?? 'did not answer'}; it fails closed)`
          : '';
      logger.warn(fields, `guardrail '${acted.guardrail}' blocked ${what}${why}`);
    } else if (acted.action === 'fail_open') {
      logger.warn(
        fields,
        `guardrail '${acted.guardrail}' let ${what} pass unchecked: its webhook ${acted.detail ?? 'did not answer'} (it fails open)`,
      );
    } else if (logger.isLevelEnabled('debug')) logger.debug(fields, `guardrail '${acted.guardrail}' redacted ${what}`);
  };
}
