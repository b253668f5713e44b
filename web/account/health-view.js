// Health: readiness (Redis, degraded modes), upstream endpoints per provider, the alias table in force.
import { api } from './api.js';
import { badge, byId, element, row, stackTable } from './dom.js';

const READINESS_LABELS = {
  status: 'Status',
  redis: 'Redis',
  rate_limits: 'Rate limits',
  usage: 'Usage records',
  config_version: 'Config version',
  config_stale: 'Config file',
  config_error: 'Last reload error',
};
const GOOD = new Set(['ok', 'ready', 'shared', 'stored', 'up']);
const NEUTRAL = new Set(['not configured', 'per-process', 'trial']);

/** A state as a badge: green when healthy, grey when merely off, red otherwise. */
function stateBadge(value) {
  return badge(value, GOOD.has(value) ? 'good' : NEUTRAL.has(value) ? 'neutral' : 'bad');
}

export async function showHealth() {
  const health = await api('/health');
  const facts = Object.entries(health.readiness).flatMap(([name, value]) => [
    element('dt', { text: READINESS_LABELS[name] ?? name }),
    (() => {
      const dd = element('dd');
      // config_stale: a refused reload leaves the previous configuration serving.
      dd.append(
        name === 'config_stale'
          ? badge(value ? 'refused: the previous configuration serves' : 'applied', value ? 'bad' : 'good')
          : stateBadge(value),
      );
      return dd;
    })(),
  ]);
  byId('readiness').replaceChildren(...facts);
  byId('providers-table').tBodies[0].replaceChildren(
    ...health.providers.map((provider) =>
      row(
        [
          provider.vendor,
          element('code', { text: provider.env_prefix }),
          provider.endpoint
            ? element('code', { text: `${provider.name}: ${provider.endpoint}` })
            : `set ${provider.env_prefix}_BASE_URL`,
          stateBadge(provider.status),
          provider.resting_until
            ? `${provider.consecutive_failures} failures in a row; resting until ${provider.resting_until}`
            : String(provider.consecutive_failures),
        ],
        { header: true },
      ),
    ),
  );
  byId('aliases-table').tBodies[0].replaceChildren(
    ...health.aliases.map((alias) =>
      row(
        [
          element('code', { text: alias.alias }),
          alias.vendor,
          element('code', { text: alias.target }),
          alias.routes.join(', '),
        ],
        { header: true },
      ),
    ),
  );
  stackTable(byId('providers-table'));
  stackTable(byId('aliases-table'));
}

export function initHealth() {
  byId('health-refresh').addEventListener(
    'click',
    () => void showHealth().catch((error) => (byId('status').textContent = error.message)),
  );
}
