import { DEFAULT_ALERT_THRESHOLDS, DEFAULT_WEBHOOK, type AlertSettings } from '../ops/alerts/alert-settings.ts';
import { isHttpUrl, type Problem } from './config-values.ts';

/** Shortest webhook secret accepted (as the admin token's): a signature under a guessable key proves nothing. */
const MIN_WEBHOOK_SECRET = 32;

/**
 * `GATEWAY_LIMIT_ALERTS`: comma-separated whole percents from 1 to 100 (sorted and made unique here), or
 * `none`; unset or empty: 50, 80 and 100.
 */
function thresholds(env: NodeJS.ProcessEnv, problem: Problem): readonly number[] {
  const value = env.GATEWAY_LIMIT_ALERTS?.trim();
  if (value === undefined || value === '') return DEFAULT_ALERT_THRESHOLDS;
  if (value.toLowerCase() === 'none') return [];
  const parts = value.split(',').map((part) => part.trim());
  if (!parts.every((part) => /^\d{1,3}$/.test(part) && Number(part) >= 1 && Number(part) <= 100)) {
    problem(`GATEWAY_LIMIT_ALERTS must be whole percents from 1 to 100, comma-separated (or none), got '${value}'`);
    return DEFAULT_ALERT_THRESHOLDS;
  }
  return [...new Set(parts.map(Number))].sort((a, b) => a - b);
}

function whole(env: NodeJS.ProcessEnv, name: string, min: number, fallback: number, problem: Problem): number {
  const value = env[name]?.trim();
  if (value === undefined || value === '') return fallback;
  if (/^\d+$/.test(value) && Number(value) >= min) return Number(value);
  problem(`${name} must be an integer >= ${min}, got '${value}'`);
  return fallback;
}

/**
 * The limit alerts' settings from the environment: the default thresholds, and the webhook
 * (`GATEWAY_ALERT_WEBHOOK_URL` with `GATEWAY_ALERT_WEBHOOK_SECRET`, either also as `_FILE`; attempts,
 * back-off and timeout). The URL and the secret are named in problems, never shown.
 */
export function alertSettings(env: NodeJS.ProcessEnv, problem: Problem): AlertSettings {
  const url = env.GATEWAY_ALERT_WEBHOOK_URL?.trim();
  const secret = env.GATEWAY_ALERT_WEBHOOK_SECRET;
  const attempts = whole(env, 'GATEWAY_ALERT_WEBHOOK_ATTEMPTS', 1, DEFAULT_WEBHOOK.attempts, problem);
  const backoffMs = whole(env, 'GATEWAY_ALERT_WEBHOOK_BACKOFF_MS', 1, DEFAULT_WEBHOOK.backoffMs, problem);
  const maxBackoffMs = whole(env, 'GATEWAY_ALERT_WEBHOOK_MAX_BACKOFF_MS', 1, DEFAULT_WEBHOOK.maxBackoffMs, problem);
  const timeoutMs = whole(env, 'GATEWAY_ALERT_WEBHOOK_TIMEOUT_MS', 1, DEFAULT_WEBHOOK.timeoutMs, problem);
  const settings = { thresholds: thresholds(env, problem) };
  if (!url) {
    if (secret) problem('GATEWAY_ALERT_WEBHOOK_SECRET is set without GATEWAY_ALERT_WEBHOOK_URL (where alerts go)');
    return settings;
  }
  if (!isHttpUrl(url)) problem('GATEWAY_ALERT_WEBHOOK_URL must be an http:// or https:// URL');
  if (!secret)
    problem('GATEWAY_ALERT_WEBHOOK_URL needs GATEWAY_ALERT_WEBHOOK_SECRET (or _FILE): alerts are signed with it');
  else if (secret.length < MIN_WEBHOOK_SECRET) {
    problem(
      `GATEWAY_ALERT_WEBHOOK_SECRET must be at least ${MIN_WEBHOOK_SECRET} characters long (generate one with: openssl rand -hex 32)`,
    );
  }
  if (maxBackoffMs < backoffMs)
    problem('GATEWAY_ALERT_WEBHOOK_MAX_BACKOFF_MS cannot be less than GATEWAY_ALERT_WEBHOOK_BACKOFF_MS');
  return { ...settings, webhook: { url, secret: secret ?? '', attempts, backoffMs, maxBackoffMs, timeoutMs } };
}
