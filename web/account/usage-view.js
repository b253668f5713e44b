// Usage: charts per day and per model (Chart.js), totals per model, per key and per team, CSV downloads,
// filtered by key and days; and the guardrail actions the gateway keeps.
import { api } from './api.js';
import { byId, element, formatNumber, formatTime, formatUsd, nameWithId, row, stackTable, utcDay } from './dom.js';

const COLORS = { input: '#0a58a8', output: '#c25e00', single: '#156332' };
const METRICS = {
  tokens: {
    label: 'Tokens',
    datasets: (rows) => [
      {
        label: 'Input tokens',
        data: rows.map((r) => r.input_tokens),
        backgroundColor: COLORS.input,
        maxBarThickness: 40,
      },
      {
        label: 'Output tokens',
        data: rows.map((r) => r.output_tokens),
        backgroundColor: COLORS.output,
        maxBarThickness: 40,
      },
    ],
    summary: (r) => `${formatNumber(r.input_tokens)} input and ${formatNumber(r.output_tokens)} output tokens`,
  },
  requests: {
    label: 'Requests',
    datasets: (rows) => [
      { label: 'Requests', data: rows.map((r) => r.requests), backgroundColor: COLORS.single, maxBarThickness: 40 },
    ],
    summary: (r) => `${formatNumber(r.requests)} requests`,
  },
  cost: {
    label: 'Cost (USD)',
    datasets: (rows) => [
      { label: 'Cost (USD)', data: rows.map((r) => r.cost_usd), backgroundColor: COLORS.single, maxBarThickness: 40 },
    ],
    summary: (r) => formatUsd(r.cost_usd),
    tick: formatUsd,
  },
  cache_hits: {
    label: 'Cache hits',
    datasets: (rows) => [
      { label: 'Cache hits', data: rows.map((r) => r.cache_hits), backgroundColor: COLORS.single, maxBarThickness: 40 },
    ],
    summary: (r) => `${formatNumber(r.cache_hits)} cache hits`,
  },
};
/** The counters of a usage row, each summed in a table's footer. */
const COUNTERS = [
  'requests',
  'input_tokens',
  'output_tokens',
  'cached_tokens',
  'total_tokens',
  'charged_tokens',
  'cost_usd',
  'cache_hits',
  'saved_usd',
];
const charts = {};
let last = { byDay: [], byModel: [] };
let keysLoaded = false;
/** The managed keys by id, for the names of the per-key and guardrail rows. */
let keysById = new Map();

const zeros = () => Object.fromEntries(COUNTERS.map((field) => [field, 0]));

/** One row per day of the range, days without usage as zeros, so the chart's time axis is even. */
function everyDay(rows, from, to) {
  const byDay = new Map(rows.map((r) => [r.day, r]));
  const days = [];
  for (
    let day = new Date(`${from}T00:00:00Z`);
    day <= new Date(`${to}T00:00:00Z`) && days.length < 400;
    day = new Date(day.getTime() + 86_400_000)
  ) {
    const name = day.toISOString().slice(0, 10);
    days.push(byDay.get(name) ?? { day: name, ...zeros() });
  }
  return days;
}

/** The filter as a query string: the days always, the key unless `allKeys`. */
function filterQuery(extra = {}, { allKeys = false } = {}) {
  const form = byId('usage-filter');
  const params = new URLSearchParams({ from: form.elements.from.value, to: form.elements.to.value, ...extra });
  if (!allKeys && form.elements.key_id.value) params.set('key_id', form.elements.key_id.value);
  return params;
}

function drawChart(id, rows, labelOf, metricName, horizontal) {
  const metric = METRICS[metricName];
  const data = { labels: rows.map(labelOf), datasets: metric.datasets(rows) };
  const summary = rows.length
    ? rows.map((r) => `${labelOf(r)}: ${metric.summary(r)}`).join('; ')
    : 'No usage in this range.';
  byId(`${id}-summary`).textContent = `${metric.label}. ${summary}`;
  const ChartJs = globalThis.Chart;
  if (!ChartJs) return;
  charts[id]?.destroy();
  const ticks = { color: '#1b1f24' };
  const valueTicks = metric.tick ? { ...ticks, callback: (value) => metric.tick(Number(value)) } : ticks;
  charts[id] = new ChartJs(byId(id), {
    type: 'bar',
    data,
    options: {
      animation: false,
      maintainAspectRatio: false,
      indexAxis: horizontal ? 'y' : 'x',
      scales: {
        x: { stacked: true, ticks: horizontal ? valueTicks : ticks, grid: { color: '#e1e5ea' } },
        y: { stacked: true, beginAtZero: true, ticks: horizontal ? ticks : valueTicks, grid: { color: '#e1e5ea' } },
      },
      plugins: {
        legend: { display: metricName === 'tokens', labels: { color: '#1b1f24' } },
        title: { display: false },
      },
    },
  });
}

function drawCharts() {
  const metric = new FormData(byId('usage-filter')).get('metric') ?? 'tokens';
  drawChart('day-chart', last.byDay, (r) => r.day.slice(5), metric, false);
  drawChart('model-chart', last.byModel, (r) => r.model, metric, true);
}

const percent = new Intl.NumberFormat('en-US', { style: 'percent', maximumFractionDigits: 1 });

/** The share of requests answered from the cache; a dash with no requests. */
const hitRate = (r) => (r.requests > 0 ? percent.format(r.cache_hits / r.requests) : '—');

function drawTotals(rows) {
  const cells = (r) =>
    [r.requests, r.input_tokens, r.output_tokens, r.cached_tokens, r.total_tokens, r.charged_tokens]
      .map(formatNumber)
      .concat(formatUsd(r.cost_usd), formatNumber(r.cache_hits), formatUsd(r.saved_usd));
  const table = byId('totals-table');
  table.tBodies[0].replaceChildren(...rows.map((r) => row([r.model, ...cells(r)], { header: true })));
  const total = rows.reduce((sum, r) => {
    for (const field of COUNTERS) sum[field] += r[field];
    return sum;
  }, zeros());
  table.tFoot.replaceChildren(row(['All models', ...cells(total)], { header: true }));
  stackTable(table);
  byId('usage-empty').hidden = rows.length > 0;
}

/** Requests, tokens, cost, hits, hit rate and savings: the counted columns of the per-key and per-team tables. */
const groupCells = (r) => [
  formatNumber(r.requests),
  formatNumber(r.total_tokens),
  formatUsd(r.cost_usd),
  formatNumber(r.cache_hits),
  hitRate(r),
  formatUsd(r.saved_usd),
];

/** A key by its name and id; an id alone when it is not a managed key (a static key, or none). */
function keyCell(id) {
  const key = keysById.get(id);
  return nameWithId(key ? key.name : id === 'anonymous' ? 'No key' : 'Not a managed key', id);
}

/** A guardrail action's key: its name and id when it is a managed key, its id otherwise. */
function actionKey(id) {
  if (id === null) return '—';
  const key = keysById.get(id);
  return key ? nameWithId(key.name, id) : element('code', { text: id });
}

function drawGroup(tableId, emptyId, rows, firstCell) {
  const table = byId(tableId);
  table.tBodies[0].replaceChildren(...rows.map((r) => row([firstCell(r), ...groupCells(r)], { header: true })));
  stackTable(table);
  byId(emptyId).hidden = rows.length > 0;
}

/** Reads the guardrail actions the gateway keeps and redraws their two tables. */
async function showGuardrailActions() {
  const error = byId('guardrail-actions-error');
  error.textContent = '';
  let view;
  try {
    view = await api('/guardrails/actions');
  } catch (failure) {
    error.textContent = failure.message;
    return;
  }
  const summary = byId('guardrail-summary-table');
  summary.tBodies[0].replaceChildren(
    ...view.by_guardrail.map((g) =>
      row([g.guardrail, g.phase, g.action, formatNumber(g.count), formatTime(g.last_at)], { header: true, wrap: [0] }),
    ),
  );
  const recent = byId('guardrail-recent-table');
  recent.tBodies[0].replaceChildren(
    ...view.data.map((a) =>
      row(
        [
          formatTime(a.at),
          a.guardrail,
          a.phase,
          a.action,
          a.cause,
          a.route,
          a.model,
          actionKey(a.key_id),
          a.team ?? '—',
          a.request_id === null ? '—' : element('code', { text: a.request_id }),
        ],
        { header: true, wrap: [0, 1, 5, 6, 7, 8, 9] },
      ),
    ),
  );
  stackTable(summary);
  stackTable(recent);
  byId('guardrail-actions-tables').hidden = view.data.length === 0 && view.by_guardrail.length === 0;
  byId('guardrail-actions-empty').hidden = view.data.length > 0 || view.by_guardrail.length > 0;
}

async function loadKeys() {
  if (keysLoaded) return;
  const { data } = await api('/keys');
  keysById = new Map(data.map((key) => [key.id, key]));
  const select = byId('usage-key');
  select.replaceChildren(
    element('option', { text: 'All keys', attrs: { value: '' } }),
    ...data.map((key) => element('option', { text: `${key.name} (${key.id})`, attrs: { value: key.id } })),
  );
  keysLoaded = true;
}

/** Reads usage for the filter and redraws charts, tables and CSV links, and the guardrail actions. */
export async function showUsage({ reloadKeys = false } = {}) {
  const form = byId('usage-filter');
  if (!form.elements.from.value) form.elements.from.value = utcDay(-13);
  if (!form.elements.to.value) form.elements.to.value = utcDay(0);
  if (reloadKeys) keysLoaded = false;
  const error = byId('usage-error');
  error.textContent = '';
  const chosenKey = form.elements.key_id.value;
  await loadKeys();
  form.elements.key_id.value = chosenKey;
  // Teams sum many keys' usage: the per-team figures are every key's, whatever key is chosen.
  const queries = {
    day: filterQuery({ group_by: 'day' }),
    model: filterQuery({ group_by: 'model' }),
    key: filterQuery({ group_by: 'key' }),
    team: filterQuery({ group_by: 'team' }, { allKeys: true }),
  };
  for (const [group, query] of Object.entries(queries)) byId(`csv-${group}`).href = `/account/api/usage.csv?${query}`;
  const usage = (async () => {
    try {
      const [byDay, byModel, byKey, byTeam] = await Promise.all(
        Object.values(queries).map((query) => api(`/usage?${query}`)),
      );
      last = { byDay: everyDay(byDay.data, form.elements.from.value, form.elements.to.value), byModel: byModel.data };
      drawCharts();
      drawTotals(byModel.data);
      drawGroup('key-usage-table', 'key-usage-empty', byKey.data, (r) => keyCell(r.key_id));
      drawGroup('team-usage-table', 'team-usage-empty', byTeam.data, (r) => r.team ?? 'No team');
    } catch (failure) {
      error.textContent = failure.message;
    }
  })();
  await Promise.all([usage, showGuardrailActions()]);
}

/** Drops the usage and guardrail actions shown, on sign-out. */
export function clearUsage() {
  for (const id of [
    'totals-table',
    'key-usage-table',
    'team-usage-table',
    'guardrail-summary-table',
    'guardrail-recent-table',
  ])
    byId(id).tBodies[0].replaceChildren();
  byId('totals-table').tFoot.replaceChildren();
  keysById = new Map();
  keysLoaded = false;
  byId('usage-key').replaceChildren(element('option', { text: 'All keys', attrs: { value: '' } }));
}

export function initUsage() {
  const form = byId('usage-filter');
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    void showUsage();
  });
  for (const radio of form.elements.metric) radio.addEventListener('change', drawCharts);
}
