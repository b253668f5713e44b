// Service tokens: the list (those within the signed-in role), create (the token shown once, with a copy
// button), revoke after confirmation.
import { api } from './api.js';
import { listOf } from './choices.js';
import { announce, announceAfter, badge, byId, element, formatTime, nameWithId, row, stackTable } from './dom.js';
import { submitForm } from './form-errors.js';
import { can, scopeOf } from './permissions.js';

const STATUS_TONES = { active: 'good', revoked: 'bad', expired: 'neutral' };
const ROLE_TEXT = {
  admin: 'admin: everything',
  'team-admin': "team-admin: the chosen teams' keys, budgets, cache and tokens",
  viewer: 'viewer: read only',
};
let pendingRevoke;

/** Where the signed-in role may make tokens: `all` (an admin), the team names of a team admin, or nowhere. */
const makerScope = () => scopeOf('tokens.write');

/** The roles a token may be given: never more than the maker holds (only an admin makes admins). */
function rolesOffered() {
  return makerScope() === 'all' ? ['admin', 'team-admin', 'viewer'] : ['team-admin', 'viewer'];
}

/** What the teams field says, and whether it shows, for the role chosen. */
function teamsHint(role) {
  if (role === 'team-admin') return '(required: the teams it manages)';
  return makerScope() === 'all' ? '(optional; none chosen: every team)' : '(required: your teams it may read)';
}

function onRoleChange() {
  const role = byId('token-role').value;
  byId('token-teams').closest('.field').hidden = role === 'admin';
  byId('token-teams-hint').textContent = teamsHint(role);
}

/** The body the create form sends: teams only when chosen (an admin holds every team), the expiry as ISO. */
function createBody() {
  const role = byId('token-role').value;
  const teams = [...byId('token-teams').selectedOptions].map((option) => option.value);
  const expires = byId('token-expires').value;
  const body = { name: byId('token-name').value.trim(), role };
  if (role !== 'admin' && teams.length) body.teams = teams;
  if (expires) body.expires_at = Number.isNaN(Date.parse(expires)) ? expires : new Date(expires).toISOString();
  return { body, problems: [] };
}

function teamsText(token) {
  if (token.role === 'admin' || token.teams === null) return 'every team';
  return token.teams.join(', ');
}

function createdCell(token) {
  const cell = element('div', { className: 'owner' });
  const by = element('span', { className: 'hint', text: `by ${token.created_by}` });
  cell.append(element('span', { text: formatTime(token.created_at) }), by);
  return cell;
}

function actionsOf(token) {
  const actions = element('span', { className: 'actions' });
  // The list holds only tokens within the role: whoever may make tokens may revoke each of them.
  if (!can('tokens.write') || token.status !== 'active') return actions;
  const attrs = { type: 'button', 'aria-label': `Revoke token ${token.name}` };
  const revoke = element('button', { text: 'Revoke', className: 'danger small', attrs });
  revoke.addEventListener('click', () => confirmRevoke(token, revoke));
  actions.append(revoke);
  return actions;
}

function tokenRow(token) {
  return row(
    [
      nameWithId(token.name, token.id),
      token.role,
      teamsText(token),
      createdCell(token),
      formatTime(token.expires_at),
      badge(token.status, STATUS_TONES[token.status] ?? 'neutral'),
      actionsOf(token),
    ],
    { header: true, wrap: [0, 2, 3] },
  );
}

/** The create form's choices: the roles the signed-in role may give, and the teams it may give them over. */
async function fillForm() {
  const form = byId('create-token-form');
  form.hidden = !can('tokens.write');
  if (form.hidden) return;
  const role = byId('token-role');
  const chosen = role.value;
  // The least power is the default, and what the form returns to after each token.
  const option = (name) => {
    const attrs = name === 'viewer' ? { value: name, selected: '' } : { value: name };
    return element('option', { text: ROLE_TEXT[name], attrs });
  };
  role.replaceChildren(...rolesOffered().map(option));
  role.value = rolesOffered().includes(chosen) ? chosen : 'viewer';
  const scope = makerScope();
  const teams = await listOf('/teams');
  const names = teams.map((team) => team.name).filter((name) => scope === 'all' || scope.includes(name));
  const select = byId('token-teams');
  const selected = new Set([...select.selectedOptions].map((option) => option.value));
  select.replaceChildren(...names.map((name) => element('option', { text: name, attrs: { value: name } })));
  for (const option of select.options) option.selected = selected.has(option.value);
  select.size = Math.max(2, Math.min(names.length, 6));
  onRoleChange();
}

/** Reads the tokens (and the form's choices) and redraws the table. */
export async function showTokens() {
  const [data] = await Promise.all([listOf('/tokens'), fillForm()]);
  const tokens = [...data].sort((a, b) => (a.created_at < b.created_at ? 1 : -1));
  byId('tokens-table').tBodies[0].replaceChildren(...tokens.map(tokenRow));
  stackTable(byId('tokens-table'));
  byId('tokens-empty').hidden = tokens.length > 0;
}

function confirmRevoke(token, opener) {
  pendingRevoke = { token, opener };
  const text = `Token “${token.name}” (${token.id}) is refused at once on every instance; this cannot be undone.`;
  byId('revoke-token-text').textContent = text;
  byId('revoke-token-confirm').textContent = `Revoke ${token.name}`;
  const dialog = byId('revoke-token-dialog');
  dialog.returnValue = '';
  dialog.showModal();
}

async function onRevokeClosed() {
  const pending = pendingRevoke;
  pendingRevoke = undefined;
  if (!pending) return;
  if (byId('revoke-token-dialog').returnValue !== 'revoke') {
    pending.opener.focus();
    return;
  }
  try {
    await api(`/tokens/${encodeURIComponent(pending.token.id)}`, { method: 'DELETE' });
  } catch (error) {
    announce(`Could not revoke ${pending.token.name}: ${error.message}`);
    return;
  }
  await announceAfter(`Token ${pending.token.name} revoked.`, showTokens);
  byId('token-list-title').focus();
}

async function onCreate(event) {
  event.preventDefault();
  const form = event.currentTarget;
  await submitForm(form, byId('create-token-error'), createBody(), async (body) => {
    const created = await api('/tokens', { method: 'POST', body });
    form.reset();
    byId('new-token-name').textContent = `“${created.name}”`;
    byId('new-token-value').textContent = created.token;
    byId('copy-token-status').textContent = '';
    const panel = byId('new-token');
    panel.hidden = false;
    panel.focus();
    await showTokens();
  });
}

async function onCopy() {
  const status = byId('copy-token-status');
  try {
    await navigator.clipboard.writeText(byId('new-token-value').textContent);
    status.textContent = 'Copied to the clipboard.';
  } catch {
    const range = document.createRange();
    range.selectNodeContents(byId('new-token-value'));
    getSelection().removeAllRanges();
    getSelection().addRange(range);
    status.textContent = 'Copying is blocked here: the token is selected, press Ctrl+C (⌘C) to copy it.';
  }
}

/** Forgets a token shown once (on sign-out, when leaving the view, or when done). */
export function forgetNewToken() {
  byId('new-token-value').textContent = '';
  byId('new-token').hidden = true;
}

/** Drops the tokens shown, so nothing stays in the page once signed out. */
export function clearTokens() {
  forgetNewToken();
  byId('tokens-table').tBodies[0].replaceChildren();
}

export function initTokens() {
  byId('create-token-form').addEventListener('submit', onCreate);
  byId('create-token-form').addEventListener('reset', () => setTimeout(onRoleChange));
  byId('token-role').addEventListener('change', onRoleChange);
  byId('copy-token').addEventListener('click', onCopy);
  byId('dismiss-token').addEventListener('click', () => {
    forgetNewToken();
    byId('token-list-title').focus();
  });
  byId('revoke-token-dialog').addEventListener('close', onRevokeClosed);
  byId('tokens-title').tabIndex = -1;
  byId('token-list-title').tabIndex = -1;
}
