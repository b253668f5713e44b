// Usage: charts per day and per model (Chart.js), a totals table, CSV downloads, filtered by key and days.
import { api } from './api.js';
import { byId, element, formatCost, formatNumber, row, stackTable, utcDay } from './dom.js';

const COLORS = { input: '#0a58a8', output: '#c25e00', single: '#156332' };
const METRICS = {
  tokens: {
    label: 'Tokens',
    datasets: (rows) => [
      { label: 'Input tokens', data: rows.map((r) => r.input_tokens), backgroundColor: COLORS.input, maxBarThickness: 40 },
      { label: 'Output tokens', data: rows.map((r) => r.output_tokens), backgroundColor: COLORS.output, maxBarThickness: 40 },
    ],
    summary: (r) => `${formatNumber(r.input_tokens)} input and ${formatNumber(r.output_tokens)} output tokens`,
  },
  requests: {
    label: 'Requests',
    datasets: (rows) => [{ label: 'Requests', data: rows.map((r) => r.requests), backgroundColor: COLORS.single, maxBarThickness: 40 }],
    summary: (r) => `${formatNumber(r.requests)} requests`,
  },
  cost: {
    label: 'Cost (USD)',
    datasets: (rows) => [{ label: 'Cost (USD)', data: rows.map((r) => r.cost_usd), backgroundColor: COLORS.single, maxBarThickness: 40 }],
    summary: (r) => formatCost(r.cost_usd),
  },
};
const charts = {};
let last = { byDay: [], byModel: [] };
let keysLoaded = false;

function zeroRow(day) {
  return { day, requests: 0, input_tokens: 0, output_tokens: 0, cached_tokens: 0, total_tokens: 0, charged_tokens: 0, cost_usd: 0 };
}

/** One row per day of the range, days without usage as zeros, so the chart's time axis is even. */
function everyDay(rows, from, to) {
  const byDay = new Map(rows.map((r) => [r.day, r]));
  const days = [];
  for (let day = new Date(`${from}T00:00:00Z`); day <= new Date(`${to}T00:00:00Z`) && days.length < 400; day = new Date(day.getTime() + 86_400_000)) {
    const name = day.toISOString().slice(0, 10);
    days.push(byDay.get(name) ?? zeroRow(name));
  }
  return days;
}

function filterQuery(extra = {}) {
  const form = byId('usage-filter');
  const params = new URLSearchParams({ from: form.elements.from.value, to: form.elements.to.value, ...extra });
  if (form.elements.key_id.value) params.set('key_id', form.elements.key_id.value);
  return params;
}

function drawChart(id, rows, labelOf, metricName, horizontal) {
  const metric = METRICS[metricName];
  const data = { labels: rows.map(labelOf), datasets: metric.datasets(rows) };
  const summary = rows.length ? rows.map((r) => `${labelOf(r)}: ${metric.summary(r)}`).join('; ') : 'No usage in this range.';
  byId(`${id}-summary`).textContent = `${metric.label}. ${summary}`;
  const ChartJs = globalThis.Chart;
  if (!ChartJs) return;
  charts[id]?.destroy();
  charts[id] = new ChartJs(byId(id), {
    type: 'bar',
    data,
    options: {
      animation: false,
      maintainAspectRatio: false,
      indexAxis: horizontal ? 'y' : 'x',
      scales: {
        x: { stacked: true, ticks: { color: '#1b1f24' }, grid: { color: '#e1e5ea' } },
        y: { stacked: true, beginAtZero: true, ticks: { color: '#1b1f24' }, grid: { color: '#e1e5ea' } },
      },
      plugins: { legend: { display: metricName === 'tokens', labels: { color: '#1b1f24' } }, title: { display: false } },
    },
  });
}

function drawCharts() {
  const metric = new FormData(byId('usage-filter')).get('metric') ?? 'tokens';
  drawChart('day-chart', last.byDay, (r) => r.day.slice(5), metric, false);
  drawChart('model-chart', last.byModel, (r) => r.model, metric, true);
}

function drawTable(rows) {
  const cells = (r) => [r.requests, r.input_tokens, r.output_tokens, r.cached_tokens, r.total_tokens, r.charged_tokens].map(formatNumber).concat(formatCost(r.cost_usd));
  byId('totals-table').tBodies[0].replaceChildren(...rows.map((r) => row([r.model, ...cells(r)], { header: true })));
  const total = rows.reduce((sum, r) => {
    for (const field of Object.keys(sum)) sum[field] += r[field];
    return sum;
  }, { requests: 0, input_tokens: 0, output_tokens: 0, cached_tokens: 0, total_tokens: 0, charged_tokens: 0, cost_usd: 0 });
  byId('totals-table').tFoot.replaceChildren(row(['All models', ...cells(total)], { header: true }));
  stackTable(byId('totals-table'));
  byId('usage-empty').hidden = rows.length > 0;
}

async function loadKeys() {
  if (keysLoaded) return;
  const { data } = await api('/keys');
  const select = byId('usage-key');
  select.replaceChildren(element('option', { text: 'All keys', attrs: { value: '' } }), ...data.map((key) => element('option', { text: `${key.name} (${key.id})`, attrs: { value: key.id } })));
  keysLoaded = true;
}

/** Reads usage for the filter and redraws charts, table and CSV links. */
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
  byId('csv-day').href = `/account/api/usage.csv?${filterQuery({ group_by: 'day' })}`;
  byId('csv-model').href = `/account/api/usage.csv?${filterQuery({ group_by: 'model' })}`;
  try {
    const [byDay, byModel] = await Promise.all([api(`/usage?${filterQuery({ group_by: 'day' })}`), api(`/usage?${filterQuery({ group_by: 'model' })}`)]);
    last = { byDay: everyDay(byDay.data, form.elements.from.value, form.elements.to.value), byModel: byModel.data };
    drawCharts();
    drawTable(byModel.data);
  } catch (failure) {
    error.textContent = failure.message;
  }
}

export function initUsage() {
  const form = byId('usage-filter');
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    void showUsage();
  });
  for (const radio of form.elements.metric) radio.addEventListener('change', drawCharts);
}
