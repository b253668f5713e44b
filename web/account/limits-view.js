// Limits: each key's and team's request, token and money limits, with what is used of them in the window open now.
import { api } from './api.js';
import {
  badge,
  byId,
  cacheText,
  element,
  formatNumber,
  formatTime,
  formatUsd,
  nameWithId,
  row,
  stackTable,
} from './dom.js';

/** The limit columns, in table order: the `kind` and `period` of a `use` entry, and its name. */
const COLUMNS = [
  { kind: 'rpm', period: 'minute', label: 'Requests per minute' },
  { kind: 'tpm', period: 'minute', label: 'Tokens per minute' },
  { kind: 'quota', period: 'day', label: 'Daily quota' },
  { kind: 'quota', period: 'month', label: 'Monthly quota' },
  { kind: 'budget', period: 'day', label: 'Daily budget' },
  { kind: 'budget', period: 'month', label: 'Monthly budget' },
];
// Where the bar turns amber, then red (share of the limit used).
const LOW = 0.8;
const HIGH = 0.95;

const resetDay = new Intl.DateTimeFormat('en-US', {
  timeZone: 'UTC',
  month: 'short',
  day: 'numeric',
  hour: '2-digit',
  minute: '2-digit',
  hourCycle: 'h23',
});

/** When a window ends, as a `<time>`: `12:01 UTC` for a minute, `Dec 1, 00:00 UTC` for a day or a month. */
function resetTime(entry) {
  const date = new Date(entry.resets_at);
  const text = entry.period === 'minute' ? formatTime(entry.resets_at).slice(11) : `${resetDay.format(date)} UTC`;
  return element('time', { text, attrs: { datetime: entry.resets_at } });
}

/**
 * One limit's cell: used / limit, a bar, the share used and when it resets; the limit alone when use is not counted.
 */
export function useCell(entry, owner, label) {
  if (!entry) return '—';
  const format = entry.unit === 'usd' ? formatUsd : formatNumber;
  const cell = element('div', { className: 'use' });
  if (entry.used === null) {
    cell.append(
      element('span', { text: `limit ${format(entry.limit)}` }),
      element('span', { className: 'hint', text: `per ${entry.period}` }),
    );
    return cell;
  }
  const percent = Math.round((entry.used / entry.limit) * 100);
  const hint = element('span', { className: 'hint', text: `${percent}% · resets ` });
  hint.append(resetTime(entry));
  cell.append(
    element('span', { text: `${format(entry.used)} / ${format(entry.limit)}` }),
    element('meter', {
      attrs: {
        min: '0',
        max: String(entry.limit),
        low: String(entry.limit * LOW),
        high: String(entry.limit * HIGH),
        optimum: '0',
        value: String(Math.min(entry.used, entry.limit)),
        'aria-label': `${label} of ${owner}: ${percent}% used, ${format(entry.remaining)} left`,
      },
    }),
    hint,
  );
  return cell;
}

function useCells(owner, use) {
  return COLUMNS.map((column) =>
    useCell(
      use.find((entry) => entry.kind === column.kind && entry.period === column.period),
      owner,
      column.label,
    ),
  );
}

function keyCell(key) {
  const cell = nameWithId(key.name, key.id);
  if (key.status !== 'active') cell.append(badge(key.status, 'neutral'));
  return cell;
}

function keyRow(key, teamNames) {
  const team = key.team === null ? '—' : teamNames.has(key.team) ? key.team : `${key.team} (no such team)`;
  const [rpm, ...rest] = useCells(`key ${key.name}`, key.use);
  // A key without an rpm of its own has the gateway's default request limit.
  if (key.rpm === null && rpm instanceof Node)
    rpm.append(element('span', { className: 'hint', text: 'gateway default' }));
  return row([keyCell(key), team, rpm, ...rest], { header: true, wrap: [1] });
}

const LIMIT_NAMES = {
  'quota day': 'Daily quota',
  'quota month': 'Monthly quota',
  'budget day': 'Daily budget',
  'budget month': 'Monthly budget',
};

/** One alert's last firing: whose limit, which, the threshold, the use then and when. */
function alertRow(firing, keyNames) {
  const owner =
    firing.scope === 'key' && keyNames.has(firing.owner)
      ? nameWithId(keyNames.get(firing.owner), firing.owner)
      : `${firing.scope} ${firing.owner}`;
  const format = firing.unit === 'usd' ? formatUsd : formatNumber;
  const fired = element('time', { text: formatTime(firing.fired_at), attrs: { datetime: firing.fired_at } });
  const limit = LIMIT_NAMES[`${firing.kind} ${firing.period}`] ?? `${firing.kind} (${firing.period})`;
  return row([owner, limit, `${firing.threshold}%`, `${format(firing.used)} / ${format(firing.limit)}`, fired], {
    header: true,
    wrap: [0],
  });
}

/** The alerts table: a store that cannot be read says so there, without hiding the limits. */
async function showAlerts(keyNames) {
  let firings;
  try {
    firings = (await api('/alerts')).data;
  } catch (error) {
    byId('limit-alerts-error').textContent = error.message;
    return;
  }
  byId('limit-alerts-table').tBodies[0].replaceChildren(...firings.map((firing) => alertRow(firing, keyNames)));
  stackTable(byId('limit-alerts-table'));
  byId('limit-alerts-empty').hidden = firings.length > 0;
  byId('limit-alerts-error').textContent = '';
}

function teamRow(team, keyNames) {
  const members = team.key_ids.map((id) => keyNames.get(id) ?? id);
  const [rpm, ...rest] = useCells(`team ${team.name}`, team.use);
  return row([team.name, members.length ? members.join(', ') : 'none', rpm, cacheText(team.cache), ...rest], {
    header: true,
    wrap: [0, 1],
  });
}

/** Reads the limits and their use and redraws both tables. */
export async function showLimits() {
  const view = await api('/limits');
  const teamNames = new Set(view.teams.map((team) => team.name));
  const keyNames = new Map(view.keys.map((key) => [key.id, key.name]));
  byId('limit-keys-table').tBodies[0].replaceChildren(...view.keys.map((key) => keyRow(key, teamNames)));
  byId('limit-teams-table').tBodies[0].replaceChildren(...view.teams.map((team) => teamRow(team, keyNames)));
  stackTable(byId('limit-keys-table'));
  stackTable(byId('limit-teams-table'));
  byId('limit-keys-empty').hidden = view.keys.length > 0;
  byId('limit-teams-empty').hidden = view.teams.length > 0;
  byId('limits-unmetered').hidden = view.metered;
  byId('limits-counted').textContent = `As of ${formatTime(view.generated_at)}.`;
  byId('limits-error').textContent = '';
  await showAlerts(keyNames);
}

/** Drops the limits shown, on sign-out. */
export function clearLimits() {
  for (const id of ['limit-keys-table', 'limit-teams-table', 'limit-alerts-table'])
    byId(id).tBodies[0].replaceChildren();
  byId('limits-counted').textContent = '';
}

export function initLimits() {
  byId('limits-refresh').addEventListener(
    'click',
    () => void showLimits().catch((error) => (byId('limits-error').textContent = error.message)),
  );
}
