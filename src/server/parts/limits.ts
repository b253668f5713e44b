import type { Logger } from 'pino';
import type { GatewayConfig } from '../../config/gateway-config.ts';
import { createAuthenticator, type KeyAuthenticator } from '../../data-plane/auth/authenticate.ts';
import { FailedAuthThrottle } from '../../data-plane/auth/failed-auth-throttle.ts';
import { BudgetGate } from '../../data-plane/limits/budget-gate.ts';
import { KeyConcurrency } from '../../data-plane/limits/key-concurrency.ts';
import { createRateLimiters, type RateLimiters } from '../../data-plane/limits/rate-limiter.ts';
import type { OpenStores } from '../../stores/open-stores.ts';
import type { LimitLedger } from '../../usage/limit-ledger.ts';
import type { UsageStore } from '../../usage/usage-store.ts';
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
    staticKeys: config.apiKeys,
    keyIdSecret: config.keyIdSecret,
    logger,
    throttle: new FailedAuthThrottle(config.authFailuresPerMinute, { subject: 'API key attempts' }),
  });
  return {
    authenticate,
    rates: createRateLimiters({ ledger, settings: () => configuration.live.current.config.rateLimit }),
    concurrency: new KeyConcurrency(config.keyConcurrency),
    budgets: new BudgetGate({ ledger, logger, allowUnbounded: config.limitsAllowUnbounded }),
    adminThrottle: new FailedAuthThrottle(config.authFailuresPerMinute, { subject: 'admin token attempts' }),
  };
}
