// Keys: list with every limit, create (the key shown once, with a copy button), edit limits in a dialog, revoke after
// confirmation.
import { api } from './api.js';
import { choiceNames, loadChoices } from './choices.js';
import { announce, badge, byId, cacheText, element, formatTime, nameWithId, row, stackTable } from './dom.js';
import { openEditDialog } from './edit-dialog.js';
import { submitForm } from './form-errors.js';
import { renderLimitFields, setChoices } from './limit-fields.js';
import { guardrailsText, limitsList } from './limit-text.js';
import { createBody } from './limit-values.js';
import { can } from './permissions.js';

const STATUS_TONES = { active: 'good', revoked: 'bad', expired: 'neutral' };
let choices = { teams: [], guardrails: [], models: [] };
let pendingRevoke;

const editButton = (id) => byId('keys-table').querySelector(`[data-edit="${CSS.escape(id)}"]`);

function editKey(key) {
  openEditDialog({
    kind: 'key',
    name: key.name,
    view: key,
    path: `/keys/${encodeURIComponent(key.id)}`,
    choices,
    onSaved: showKeys,
    focusAfter: () => editButton(key.id),
  });
}

function actionsOf(key) {
  const actions = element('span', { className: 'actions' });
  if (!can('keys.write')) return actions;
  // A revoked key cannot change (the API answers 409); an expired one can, e.g. to give it a later expiry.
  if (key.status !== 'revoked') {
    const edit = element('button', {
      text: 'Edit',
      className: 'secondary small',
      attrs: { type: 'button', 'aria-label': `Edit key ${key.name}`, 'data-edit': key.id },
    });
    edit.addEventListener('click', () => editKey(key));
    actions.append(edit);
  }
  if (key.status === 'active') {
    const revoke = element('button', {
      text: 'Revoke',
      className: 'danger small',
      attrs: { type: 'button', 'aria-label': `Revoke key ${key.name}` },
    });
    revoke.addEventListener('click', () => confirmRevoke(key, revoke));
    actions.append(revoke);
  }
  return actions;
}

/** When the key was created, and when it expires. */
function datesCell(key) {
  const cell = element('div', { className: 'owner' });
  cell.append(
    element('span', { text: formatTime(key.created_at) }),
    element('span', {
      className: 'hint',
      text: key.expires_at ? `expires ${formatTime(key.expires_at)}` : 'never expires',
    }),
  );
  return cell;
}

function keyRow(key) {
  return row(
    [
      nameWithId(key.name, key.id),
      datesCell(key),
      key.models ? key.models.join(', ') : 'every model',
      limitsList(key, { kind: 'key' }),
      key.team ?? '—',
      cacheText(key.cache),
      guardrailsText(key.guardrails),
      badge(key.status, STATUS_TONES[key.status] ?? 'neutral'),
      actionsOf(key),
    ],
    { header: true, wrap: [0, 1, 2, 3, 6] },
  );
}

/** Reads the keys (and the teams and guardrails the form offers) and redraws the table. */
export async function showKeys() {
  const [{ data }, loaded] = await Promise.all([api('/keys'), loadChoices()]);
  choices = choiceNames(loaded);
  setChoices(byId('create-key-fields'), choices);
  const keys = [...data].sort((a, b) => (a.created_at < b.created_at ? 1 : -1));
  byId('keys-table').tBodies[0].replaceChildren(...keys.map(keyRow));
  stackTable(byId('keys-table'));
  byId('keys-empty').hidden = keys.length > 0;
}

function confirmRevoke(key, opener) {
  pendingRevoke = { key, opener };
  byId('revoke-text').textContent = `Key “${key.name}” (${key.id}) stops working at once; this cannot be undone.`;
  byId('revoke-confirm').textContent = `Revoke ${key.name}`;
  const dialog = byId('revoke-dialog');
  dialog.returnValue = '';
  dialog.showModal();
}

async function onRevokeClosed() {
  const dialog = byId('revoke-dialog');
  const pending = pendingRevoke;
  pendingRevoke = undefined;
  if (!pending) return;
  if (dialog.returnValue !== 'revoke') {
    pending.opener.focus();
    return;
  }
  try {
    await api(`/keys/${encodeURIComponent(pending.key.id)}/revoke`, { method: 'POST' });
    announce(`Key ${pending.key.name} revoked.`);
    await showKeys();
    byId('keys-title').focus();
  } catch (error) {
    announce(`Could not revoke ${pending.key.name}: ${error.message}`);
  }
}

async function onCreate(event) {
  event.preventDefault();
  const form = event.currentTarget;
  await submitForm(form, byId('create-key-error'), createBody(byId('create-key-fields')), async (body) => {
    const created = await api('/keys', { method: 'POST', body });
    form.reset();
    byId('new-key-name').textContent = `“${created.name}”`;
    byId('new-key-value').textContent = created.key;
    byId('copy-status').textContent = '';
    const panel = byId('new-key');
    panel.hidden = false;
    panel.focus();
    await showKeys();
  });
}

async function onCopy() {
  const status = byId('copy-status');
  try {
    await navigator.clipboard.writeText(byId('new-key-value').textContent);
    status.textContent = 'Copied to the clipboard.';
  } catch {
    const range = document.createRange();
    range.selectNodeContents(byId('new-key-value'));
    getSelection().removeAllRanges();
    getSelection().addRange(range);
    status.textContent = 'Copying is blocked here: the key is selected, press Ctrl+C (⌘C) to copy it.';
  }
}

function dismissKey() {
  byId('new-key-value').textContent = '';
  byId('new-key').hidden = true;
  byId('key-list-title').focus();
}

/** Forgets a key shown once (on sign-out or when leaving the view). */
export function forgetNewKey() {
  byId('new-key-value').textContent = '';
  byId('new-key').hidden = true;
}

/** Drops everything shown after sign-in, so nothing stays in the page once signed out. */
export function clearSignedInData() {
  forgetNewKey();
  for (const id of ['keys-table', 'totals-table', 'providers-table', 'aliases-table'])
    byId(id).tBodies[0].replaceChildren();
  byId('totals-table').tFoot.replaceChildren();
  byId('readiness').replaceChildren();
}

export function initKeys() {
  renderLimitFields(byId('create-key-fields'), { prefix: 'key', kind: 'key', mode: 'create' });
  byId('create-key-form').addEventListener('submit', onCreate);
  byId('copy-key').addEventListener('click', onCopy);
  byId('dismiss-key').addEventListener('click', dismissKey);
  byId('revoke-dialog').addEventListener('close', onRevokeClosed);
  byId('keys-title').tabIndex = -1;
  byId('key-list-title').tabIndex = -1;
}
