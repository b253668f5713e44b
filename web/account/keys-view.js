// Keys: list, create (the key shown once, with a copy button), revoke after confirmation.
import { api } from './api.js';
import { announce, badge, byId, cacheText, element, formatNumber, formatTime, row, stackTable } from './dom.js';

const STATUS_TONES = { active: 'good', revoked: 'bad', expired: 'neutral' };
let modelsLoaded = false;
let pendingRevoke;

function quotaText(quota) {
  if (!quota) return '—';
  const parts = [];
  if (quota.daily) parts.push(`${formatNumber(quota.daily)} / day`);
  if (quota.monthly) parts.push(`${formatNumber(quota.monthly)} / month`);
  return parts.join(', ') || '—';
}

function keyRow(key) {
  const actions = document.createElement('span');
  if (key.status === 'active') {
    const revoke = element('button', { text: 'Revoke', className: 'danger small', attrs: { type: 'button', 'aria-label': `Revoke key ${key.name}` } });
    revoke.addEventListener('click', () => confirmRevoke(key, revoke));
    actions.append(revoke);
  }
  return row(
    [
      key.name,
      element('code', { text: key.id }),
      formatTime(key.created_at),
      formatTime(key.expires_at),
      key.models ? key.models.join(', ') : 'every model',
      key.rpm === null ? 'default' : formatNumber(key.rpm),
      quotaText(key.quota),
      cacheText(key.cache),
      badge(key.status, STATUS_TONES[key.status] ?? 'neutral'),
      actions,
    ],
    { header: true, wrap: [0, 2, 3, 4, 6] },
  );
}

async function loadModels() {
  if (modelsLoaded) return;
  const { data } = await api('/models');
  byId('key-models').replaceChildren(...data.map((id) => element('option', { text: id, attrs: { value: id } })));
  modelsLoaded = true;
}

/** Reads the keys and redraws the table. */
export async function showKeys() {
  const [{ data }] = await Promise.all([api('/keys'), loadModels()]);
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

function optionalInteger(form, name) {
  const value = form.elements[name].value.trim();
  return value === '' ? undefined : Number(value);
}

/** The admin API's body from the form; empty fields are left out. */
function newKeyBody(form) {
  const body = { name: form.elements.name.value.trim() };
  const rpm = optionalInteger(form, 'rpm');
  if (rpm !== undefined) body.rpm = rpm;
  const models = [...form.elements.models.selectedOptions].map((option) => option.value);
  if (models.length) body.models = models;
  const expires = form.elements.expires.value;
  if (expires) body.expires_at = new Date(expires).toISOString();
  const daily = optionalInteger(form, 'daily');
  const monthly = optionalInteger(form, 'monthly');
  if (daily !== undefined || monthly !== undefined) body.quota = { ...(daily !== undefined && { daily }), ...(monthly !== undefined && { monthly }) };
  if (form.elements.cache.value === 'false') body.cache = false;
  return body;
}

async function onCreate(event) {
  event.preventDefault();
  const form = event.currentTarget;
  const error = byId('create-key-error');
  const submit = form.querySelector('button[type="submit"]');
  error.textContent = '';
  submit.disabled = true;
  try {
    const created = await api('/keys', { method: 'POST', body: newKeyBody(form) });
    form.reset();
    byId('new-key-name').textContent = `“${created.name}”`;
    byId('new-key-value').textContent = created.key;
    byId('copy-status').textContent = '';
    const panel = byId('new-key');
    panel.hidden = false;
    panel.focus();
    await showKeys();
  } catch (failure) {
    error.textContent = failure.message;
  } finally {
    submit.disabled = false;
  }
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
  for (const id of ['keys-table', 'totals-table', 'providers-table', 'aliases-table']) byId(id).tBodies[0].replaceChildren();
  byId('totals-table').tFoot.replaceChildren();
  byId('readiness').replaceChildren();
}

export function initKeys() {
  byId('create-key-form').addEventListener('submit', onCreate);
  byId('copy-key').addEventListener('click', onCopy);
  byId('dismiss-key').addEventListener('click', dismissKey);
  byId('revoke-dialog').addEventListener('close', onRevokeClosed);
  byId('keys-title').tabIndex = -1;
  byId('key-list-title').tabIndex = -1;
}
