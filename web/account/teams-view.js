// Teams: list with every limit and the keys naming each, create, edit limits in a dialog, delete after confirmation.
import { api } from './api.js';
import { choiceNames, loadChoices } from './choices.js';
import { announce, byId, cacheText, element, row, stackTable } from './dom.js';
import { openEditDialog } from './edit-dialog.js';
import { can } from './permissions.js';
import { submitForm } from './form-errors.js';
import { renderLimitFields, setChoices } from './limit-fields.js';
import { guardrailsText, limitsList } from './limit-text.js';
import { createBody } from './limit-values.js';

let choices = { teams: [], guardrails: [], models: [] };
let pendingDelete;

const teamPath = (name) => `/teams/${encodeURIComponent(name)}`;
const actionButton = (action, name) => byId('teams-table').querySelector(`[data-${action}="${CSS.escape(name)}"]`);

function button(text, className, action, team) {
  return element('button', {
    text,
    className: `${className} small`,
    attrs: { type: 'button', 'aria-label': `${text} team ${team.name}`, [`data-${action}`]: team.name },
  });
}

/** The keys that are not revoked naming the team (an expired one still names it, and blocks deleting it). */
function membersText(team, keys) {
  const members = keys.filter((key) => key.team === team.name && key.status !== 'revoked');
  return members.map((key) => (key.status === 'expired' ? `${key.name} (expired)` : key.name)).join(', ') || 'none';
}

function teamRow(team, keys) {
  const actions = element('span', { className: 'actions' });
  const edit = button('Edit', 'secondary', 'edit', team);
  edit.addEventListener('click', () =>
    openEditDialog({
      kind: 'team',
      name: team.name,
      view: team,
      path: teamPath(team.name),
      choices,
      onSaved: showTeams,
      focusAfter: () => actionButton('edit', team.name),
    }),
  );
  const remove = button('Delete', 'danger', 'delete', team);
  remove.addEventListener('click', () => confirmDelete(team, remove));
  if (can('teams.write')) actions.append(edit, remove);
  return row(
    [
      team.name,
      limitsList(team, { kind: 'team' }),
      cacheText(team.cache),
      guardrailsText(team.guardrails),
      membersText(team, keys),
      actions,
    ],
    { header: true, wrap: [0, 1, 3, 4] },
  );
}

/** Reads the teams, the keys naming them and the configured guardrails, and redraws the table. */
export async function showTeams() {
  const [{ data: keys }, loaded] = await Promise.all([api('/keys'), loadChoices()]);
  choices = choiceNames(loaded);
  setChoices(byId('create-team-fields'), choices);
  byId('teams-table').tBodies[0].replaceChildren(...loaded.teams.map((team) => teamRow(team, keys)));
  stackTable(byId('teams-table'));
  byId('teams-empty').hidden = loaded.teams.length > 0;
}

function confirmDelete(team, opener) {
  pendingDelete = { team, opener };
  byId('teams-error').textContent = '';
  byId('delete-team-text').textContent =
    `Team “${team.name}” and its limits are removed. A team that keys name cannot be deleted: revoke those keys first.`;
  byId('delete-team-confirm').textContent = `Delete ${team.name}`;
  const dialog = byId('delete-team-dialog');
  dialog.returnValue = '';
  dialog.showModal();
}

async function onDeleteClosed() {
  const pending = pendingDelete;
  pendingDelete = undefined;
  if (!pending) return;
  if (byId('delete-team-dialog').returnValue !== 'delete') {
    pending.opener.focus();
    return;
  }
  try {
    await api(teamPath(pending.team.name), { method: 'DELETE' });
  } catch (error) {
    // Shown in the role=alert by the table, and focus back where it was: nothing changed.
    byId('teams-error').textContent = `Could not delete team ${pending.team.name}: ${error.detail ?? error.message}`;
    pending.opener.focus();
    return;
  }
  announce(`Team ${pending.team.name} deleted.`);
  try {
    await showTeams();
  } catch (error) {
    announce(`Team ${pending.team.name} deleted, but the list could not be read again: ${error.message}`);
  }
  byId('team-list-title').focus();
}

async function onCreate(event) {
  event.preventDefault();
  const form = event.currentTarget;
  await submitForm(form, byId('create-team-error'), createBody(byId('create-team-fields')), async (body) => {
    byId('teams-error').textContent = '';
    const created = await api('/teams', { method: 'POST', body });
    form.reset();
    announce(`Team ${created.name} created.`);
    await showTeams();
  });
}

/** Drops the teams shown, on sign-out. */
export function clearTeams() {
  byId('teams-table').tBodies[0].replaceChildren();
  byId('teams-error').textContent = '';
}

export function initTeams() {
  renderLimitFields(byId('create-team-fields'), { prefix: 'team', kind: 'team', mode: 'create' });
  byId('create-team-form').addEventListener('submit', onCreate);
  byId('delete-team-dialog').addEventListener('close', () => void onDeleteClosed());
  byId('team-list-title').tabIndex = -1;
}
