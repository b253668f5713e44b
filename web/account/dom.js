// Small DOM helpers: every value goes in as text, never as markup.

export const byId = (id) => document.getElementById(id);

/** A new element with text content and attributes. */
export function element(tag, { text, className, attrs } = {}) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  for (const [name, value] of Object.entries(attrs ?? {})) node.setAttribute(name, value);
  return node;
}

/** A table row of cells; a cell is a string/number or a ready node. Cells at `wrap` indexes may wrap. */
export function row(cells, { header = false, wrap = [] } = {}) {
  const tr = document.createElement('tr');
  cells.forEach((cell, index) => {
    const td = document.createElement(header && index === 0 ? 'th' : 'td');
    if (header && index === 0) td.scope = 'row';
    if (wrap.includes(index)) td.className = 'wrap';
    if (cell instanceof Node) td.append(cell);
    else td.textContent = cell === null || cell === undefined ? '' : String(cell);
    tr.append(td);
  });
  return tr;
}

/**
 * Readies a table that narrow screens show as one card per row (CSS `table.stack`): explicit ARIA
 * roles, because changing `display` on table parts can drop their table semantics, and each cell's
 * column name in `data-label` for the card's captions. Call again after the rows change.
 */
export function stackTable(table) {
  const headers = [...table.tHead.rows[0].cells].map((cell) => cell.textContent.trim());
  table.setAttribute('role', 'table');
  for (const group of table.querySelectorAll('thead, tbody, tfoot')) group.setAttribute('role', 'rowgroup');
  for (const tr of table.rows) {
    tr.setAttribute('role', 'row');
    [...tr.cells].forEach((cell, index) => {
      const inHead = tr.parentElement.tagName === 'THEAD';
      cell.setAttribute('role', inHead ? 'columnheader' : cell.tagName === 'TH' ? 'rowheader' : 'cell');
      if (!inHead && headers[index]) cell.dataset.label = headers[index];
    });
  }
}

/** A key by its name with its id below it, as every table shows one. */
export function nameWithId(name, id) {
  const cell = element('div', { className: 'owner' });
  cell.append(element('span', { text: name }), element('code', { text: id }));
  return cell;
}

export function badge(text, tone) {
  return element('span', { text, className: `badge ${tone}` });
}

/** Shows a message in the page's polite live region. */
export function announce(message) {
  byId('status').textContent = message;
}

const numberFormat = new Intl.NumberFormat('en-US');
export const formatNumber = (value) => numberFormat.format(value);

const dollars = new Intl.NumberFormat('en-US', {
  style: 'currency',
  currency: 'USD',
  minimumFractionDigits: 2,
  maximumFractionDigits: 2,
});
const cents = new Intl.NumberFormat('en-US', {
  style: 'currency',
  currency: 'USD',
  minimumFractionDigits: 2,
  maximumFractionDigits: 6,
});
/** `$1,234.50` from a dollar up; below, up to six decimals (`$0.0042`), so small spend does not show as $0.00. */
export function formatUsd(value) {
  if (value > 0 && value < 0.000001) return '< $0.000001';
  return (Math.abs(value) >= 1 ? dollars : cents).format(value);
}

/** `2026-11-23 14:05 UTC` */
export function formatTime(iso) {
  if (!iso) return '—';
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : `${date.toISOString().slice(0, 16).replace('T', ' ')} UTC`;
}

/** Today's UTC day, shifted by a number of days. */
export function utcDay(offsetDays = 0) {
  return new Date(Date.now() + offsetDays * 86_400_000).toISOString().slice(0, 10);
}

/** A key's or team's response cache setting: `off` (false), `on` (true, as set) or the gateway's `default` (unset). */
export function cacheText(cache) {
  return cache === false ? 'off' : cache === true ? 'on' : 'default';
}
