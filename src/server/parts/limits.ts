import type { Logger } from 'pino';
import type { GatewayConfig } from '../../config/gateway-config.ts';
import {
  createAuthenticator,
  type KeyAuthenticator,
  FailedAuthThrottle,
} from '../../data-plane/pipeline/authenticate.ts';
import { BudgetGate } from '../../data-plane/pipeline/reserve.ts';
import { KeyConcurrency, createRateLimiters, type RateLimiters } from '../../data-plane/pipeline/admit.ts';
import type { OpenStores } from '../../stores/open-stores.ts';
import type { LimitLedger } from '../../usage/limit-ledger.ts';
import type { UsageStore } from '../../usage/usage-accounting.ts';
import type { Configuration } from './configuration.ts';

/**
 * Who may call and how much: the key check, request rates, concurrency, token and money budgets, failed-credential
 * throttles.
 */
export interface Limits {
  readonly authenticate: KeyAuthenticator;
  readonly rates: RateLimiters;
  readonly concurrency: KeyConcurrency;
  readonly budgets: BudgetGate;
  /** Failed admin credentials per address (apart from the API keys': neither locks the other out). */
  readonly adminThrottle: FailedAuthThrottle;
}

/**
 * The limits, counted on the one ledger of every limit; the rate in force is read per request (a reload changes it).
 */
export function startLimits(
  config: GatewayConfig,
  logger: Logger,
  configuration: Configuration,
  stores: OpenStores<UsageStore, LimitLedger>,
): Limits {
  const { ledger } = stores;
  const authenticate = createAuthenticator({
    store: stores.keys,
    teams: stores.teams,
    groups: stores.groups,
    staticKeys: config.apiKeys,
    keyIdSecret: config.keyIdSecret,
    logger,
    throttle: new FailedAuthThrottle(config.authFailuresPerMinute, { subject: 'API key attempts' }),
  });
  return {
    authenticate,
    rates: createRateLimiters({ ledger, settings: configuration.inForce((settings) => settings.config.rateLimit) }),
    concurrency: new KeyConcurrency(config.keyConcurrency),
    budgets: new BudgetGate({
      ledger,
      logger,
      allowUnbounded: config.limitsAllowUnbounded,
      endUsersPerKey: config.endUsersPerKey,
    }),
    adminThrottle: new FailedAuthThrottle(config.authFailuresPerMinute, { subject: 'admin token attempts' }),
  };
}
