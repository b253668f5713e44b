// Teams: list with every limit and the keys naming each, create, edit limits in a dialog, delete after confirmation.
import { api } from './api.js';
import { namedRecordFlows } from './named-record-flows.js';
import { choiceNames, loadChoices } from './choices.js';
import { byId, cacheText, element, row, stackTable } from './dom.js';
import { openEditDialog } from './edit-dialog.js';
import { can } from './permissions.js';
import { renderLimitFields, setChoices } from './limit-fields.js';
import { guardrailsText, limitsList } from './limit-text.js';

let choices = { teams: [], guardrails: [], models: [] };
let confirmDelete = () => {};

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

/** Drops the teams shown, on sign-out. */
export function clearTeams() {
  byId('teams-table').tBodies[0].replaceChildren();
  byId('teams-error').textContent = '';
}

export function initTeams() {
  renderLimitFields(byId('create-team-fields'), { prefix: 'team', kind: 'team', mode: 'create' });
  confirmDelete = namedRecordFlows({
    noun: 'team',
    refresh: showTeams,
    warning: (name) =>
      `Team “${name}” and its limits are removed. A team that keys name cannot be deleted: revoke those keys first.`,
  });
  byId('team-list-title').tabIndex = -1;
}
