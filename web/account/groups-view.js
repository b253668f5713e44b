// Groups: each budget group with the teams and keys that name it and the use of each of its limits now; create one,
// edit its limits and alerts in a dialog, delete it after confirmation.
import { api } from './api.js';
import { announceAfter, byId, element, row, stackTable } from './dom.js';
import { openEditDialog } from './edit-dialog.js';
import { submitForm } from './form-errors.js';
import { renderLimitFields } from './limit-fields.js';
import { alertsText } from './limit-text.js';
import { createBody } from './limit-values.js';
import { useCell } from './limits-view.js';
import { can } from './permissions.js';

let pendingDelete;

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

function confirmDelete(group, opener) {
  pendingDelete = { group, opener };
  byId('groups-error').textContent = '';
  byId('delete-group-text').textContent =
    `Group “${group.name}” and its limits are removed. A group that teams or keys name cannot be deleted: remove it from them first.`;
  byId('delete-group-confirm').textContent = `Delete ${group.name}`;
  const dialog = byId('delete-group-dialog');
  dialog.returnValue = '';
  dialog.showModal();
}

async function onDeleteClosed() {
  const pending = pendingDelete;
  pendingDelete = undefined;
  if (!pending) return;
  if (byId('delete-group-dialog').returnValue !== 'delete') {
    pending.opener.focus();
    return;
  }
  try {
    await api(groupPath(pending.group.name), { method: 'DELETE' });
  } catch (error) {
    // Shown in the role=alert by the table, and focus back where it was: nothing changed.
    byId('groups-error').textContent = `Could not delete group ${pending.group.name}: ${error.detail ?? error.message}`;
    pending.opener.focus();
    return;
  }
  await announceAfter(`Group ${pending.group.name} deleted.`, showGroups);
  byId('group-list-title').focus();
}

async function onCreate(event) {
  event.preventDefault();
  const form = event.currentTarget;
  await submitForm(form, byId('create-group-error'), createBody(byId('create-group-fields')), async (body) => {
    byId('groups-error').textContent = '';
    const created = await api('/groups', { method: 'POST', body });
    form.reset();
    await announceAfter(`Group ${created.name} created.`, showGroups);
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
  byId('delete-group-dialog').addEventListener('close', () => void onDeleteClosed());
  byId('group-list-title').tabIndex = -1;
}
