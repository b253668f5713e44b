// Audit: the newest records of the audit log, filtered by action and team, older ones page by page.
import { api } from './api.js';
import { badge, byId, element, formatTime, row, stackTable } from './dom.js';

let nextBefore = null;

function actorText(actor) {
  if (!actor) return 'unknown (refused credential)';
  return `${actor.name ?? actor.id} (${actor.kind}${actor.roles.length ? `; ${actor.roles.join(', ')}` : ''})`;
}

/** A record's before and after, as compact JSON (views: ids and settings, never a secret). */
function changeText(record) {
  if (record.outcome === 'refused') return record.reason ?? '';
  const part = (label, value) => (value === null || value === undefined ? '' : `${label}: ${JSON.stringify(value)}`);
  return [part('before', record.before), part('after', record.after)].filter(Boolean).join(' → ');
}

function auditRow(record) {
  return row(
    [
      String(record.seq),
      formatTime(record.time),
      actorText(record.actor),
      `${record.via}${record.address ? ` · ${record.address}` : ''}`,
      record.action,
      badge(record.outcome, record.outcome === 'ok' ? 'good' : 'bad'),
      `${record.target.type}${record.target.id ? ` ${record.target.id}` : ''}`,
      record.target.team ?? '—',
      element('span', { className: 'change', text: changeText(record) }),
    ],
    { header: true, wrap: [2, 6, 8] },
  );
}

async function load(append) {
  const form = byId('audit-filter');
  const query = new URLSearchParams({ limit: '50' });
  for (const name of ['action', 'team'])
    if (form.elements[name].value.trim()) query.set(name, form.elements[name].value.trim());
  if (append && nextBefore !== null) query.set('before', String(nextBefore));
  const { data, next_before: next } = await api(`/audit?${query}`);
  nextBefore = next;
  const body = byId('audit-table').tBodies[0];
  if (append) body.append(...data.map(auditRow));
  else body.replaceChildren(...data.map(auditRow));
  stackTable(byId('audit-table'));
  byId('audit-empty').hidden = body.rows.length > 0;
  byId('audit-older').hidden = next === null;
}

export async function showAudit() {
  byId('audit-error').textContent = '';
  await load(false);
}

export function clearAudit() {
  byId('audit-table').tBodies[0].replaceChildren();
}

export function initAudit() {
  byId('audit-filter').addEventListener('submit', async (event) => {
    event.preventDefault();
    try {
      await load(false);
    } catch (error) {
      byId('audit-error').textContent = error.message;
    }
  });
  byId('audit-older').addEventListener('click', async () => {
    try {
      await load(true);
    } catch (error) {
      byId('audit-error').textContent = error.message;
    }
  });
}
