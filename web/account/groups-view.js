// Groups: each budget group with the teams and keys that name it and the use of each of its limits now; create one,
// edit its limits and alerts in a dialog, delete it after confirmation.
import { api } from './api.js';
import { namedRecordFlows } from './named-record-flows.js';
import { byId, element, row, stackTable } from './dom.js';
import { openEditDialog } from './edit-dialog.js';
import { renderLimitFields } from './limit-fields.js';
import { alertsText } from './limit-text.js';
import { useCell } from './limits-view.js';
import { can } from './permissions.js';

let confirmDelete = () => {};

const groupPath = (name) => `/groups/${encodeURIComponent(name)}`;
const actionButton = (action, name) => byId('groups-table').querySelector(`[data-${action}="${CSS.escape(name)}"]`);

function button(text, className, action, group) {
  return element('button', {
    text,
    className: `${className} small`,
    attrs: { type: 'button', 'aria-label': `${text} group ${group.name}`, [`data-${action}`]: group.name },
  });
}

function actionsOf(group) {
  const actions = element('span', { className: 'actions' });
  if (!can('groups.write')) return actions;
  const edit = button('Edit', 'secondary', 'edit', group);
  edit.addEventListener('click', () =>
    openEditDialog({
      kind: 'group',
      name: group.name,
      view: group,
      path: groupPath(group.name),
      choices: {},
      onSaved: showGroups,
      focusAfter: () => actionButton('edit', group.name),
    }),
  );
  const remove = button('Delete', 'danger', 'delete', group);
  remove.addEventListener('click', () => confirmDelete(group, remove));
  actions.append(edit, remove);
  return actions;
}

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
  return row(
    [
      group.name,
      group.members.teams.join(', ') || 'none',
      keysText(group.members.keys),
      ...use,
      alertsText(group.alerts),
      actionsOf(group),
    ],
    { header: true, wrap: [0, 1, 2] },
  );
}

/** Reads the groups, with their members and use, and redraws the table. */
export async function showGroups() {
  const { data: groups } = await api('/groups');
  byId('groups-table').tBodies[0].replaceChildren(...groups.map(groupRow));
  stackTable(byId('groups-table'));
  byId('groups-empty').hidden = groups.length > 0;
}

/** Drops the groups shown, on sign-out. */
export function clearGroups() {
  byId('groups-table').tBodies[0].replaceChildren();
  byId('groups-error').textContent = '';
}

export function initGroups() {
  renderLimitFields(byId('create-group-fields'), { prefix: 'group', kind: 'group', mode: 'create' });
  confirmDelete = namedRecordFlows({
    noun: 'group',
    refresh: showGroups,
    warning: (name) =>
      `Group “${name}” and its limits are removed. A group that teams or keys name cannot be deleted: remove it from them first.`,
  });
  byId('group-list-title').tabIndex = -1;
}
