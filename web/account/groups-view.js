// Groups: each budget group with the teams and keys that name it and the use of each of its limits now; create one.
import { api } from './api.js';
import { announce, byId, row, stackTable } from './dom.js';
import { submitForm } from './form-errors.js';
import { renderLimitFields } from './limit-fields.js';
import { createBody } from './limit-values.js';
import { useCell } from './limits-view.js';

/** The limit columns, in table order: the `kind` and `period` of a `use` entry, and its name. */
const COLUMNS = [
  { kind: 'tpm', period: 'minute', label: 'Tokens per minute' },
  { kind: 'quota', period: 'day', label: 'Daily quota' },
  { kind: 'quota', period: 'month', label: 'Monthly quota' },
  { kind: 'budget', period: 'day', label: 'Daily budget' },
  { kind: 'budget', period: 'month', label: 'Monthly budget' },
];

/** The keys naming the group themselves: name and id (and its team, whose group it draws from no longer). */
function keysText(keys) {
  return keys.map((key) => `${key.name} (${key.id}${key.team ? `, team ${key.team}` : ''})`).join(', ') || 'none';
}

function groupRow(group) {
  const owner = `group ${group.name}`;
  const use = COLUMNS.map((column) => {
    const entry = group.use.find((each) => each.kind === column.kind && each.period === column.period);
    return useCell(entry, owner, column.label);
  });
  return row([group.name, group.members.teams.join(', ') || 'none', keysText(group.members.keys), ...use], {
    header: true,
    wrap: [0, 1, 2],
  });
}

/** Reads the groups, with their members and use, and redraws the table. */
export async function showGroups() {
  const { data: groups } = await api('/groups');
  byId('groups-table').tBodies[0].replaceChildren(...groups.map(groupRow));
  stackTable(byId('groups-table'));
  byId('groups-empty').hidden = groups.length > 0;
}

async function onCreate(event) {
  event.preventDefault();
  const form = event.currentTarget;
  await submitForm(form, byId('create-group-error'), createBody(byId('create-group-fields')), async (body) => {
    byId('groups-error').textContent = '';
    const created = await api('/groups', { method: 'POST', body });
    form.reset();
    announce(`Group ${created.name} created.`);
    await showGroups();
  });
}

/** Drops the groups shown, on sign-out. */
export function clearGroups() {
  byId('groups-table').tBodies[0].replaceChildren();
  byId('groups-error').textContent = '';
}

export function initGroups() {
  renderLimitFields(byId('create-group-fields'), { prefix: 'group', kind: 'group', mode: 'create' });
  byId('create-group-form').addEventListener('submit', onCreate);
  byId('group-list-title').tabIndex = -1;
}
