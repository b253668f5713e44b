// The account page: sign-in, then the keys, teams, usage, limits and health views behind the hash (#keys, #teams, #usage, #limits, #health).
import { api, ApiError, setCsrfToken } from './api.js';
import { announce, byId } from './dom.js';
import { initEditDialog } from './edit-dialog.js';
import { initHealth, showHealth } from './health-view.js';
import { clearSignedInData, forgetNewKey, initKeys, showKeys } from './keys-view.js';
import { clearLimits, initLimits, showLimits } from './limits-view.js';
import { clearTeams, initTeams, showTeams } from './teams-view.js';
import { clearUsage, initUsage, showUsage } from './usage-view.js';

const VIEWS = { keys: showKeys, teams: showTeams, usage: () => showUsage({ reloadKeys: true }), limits: showLimits, health: showHealth };
const ALL_SECTIONS = ['disabled-view', 'sign-in-view', 'keys-view', 'teams-view', 'usage-view', 'limits-view', 'health-view'];
let signedIn = false;
let expiryTimer;

function showOnly(sectionId) {
  for (const id of ALL_SECTIONS) byId(id).hidden = id !== sectionId;
}

function setSignedIn(session) {
  signedIn = Boolean(session?.signed_in);
  setCsrfToken(signedIn ? session.csrf_token : '');
  byId('nav').hidden = !signedIn;
  byId('sign-out').hidden = !signedIn;
  clearTimeout(expiryTimer);
  if (signedIn) {
    // Return to the sign-in form when the session runs out, rather than failing on the next click.
    const left = Date.parse(session.expires_at) - Date.now();
    if (left > 0 && left < 2 ** 31 - 1) expiryTimer = setTimeout(() => signedOut('Your session expired: sign in again.'), left);
  }
}

function signedOut(message) {
  setSignedIn(undefined);
  clearSignedInData();
  clearLimits();
  clearTeams();
  for (const dialog of document.querySelectorAll('dialog[open]')) dialog.close();
  clearUsage();
  showOnly('sign-in-view');
  announce(message ?? '');
  byId('admin-token').focus();
}

async function route() {
  if (!signedIn) return;
  const name = location.hash.slice(1) in VIEWS ? location.hash.slice(1) : 'keys';
  for (const link of byId('nav').querySelectorAll('a')) {
    if (link.dataset.view === name) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  if (name !== 'keys') forgetNewKey();
  showOnly(`${name}-view`);
  try {
    await VIEWS[name]();
    document.title = `${byId(`${name}-title`).textContent} · model gateway account`;
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) signedOut('Your session expired: sign in again.');
    else announce(error.message);
  }
}

async function onSignIn(event) {
  event.preventDefault();
  const input = byId('admin-token');
  const error = byId('sign-in-error');
  const submit = event.currentTarget.querySelector('button[type="submit"]');
  error.textContent = '';
  submit.disabled = true;
  try {
    const session = await api('/session', { method: 'POST', body: { token: input.value } });
    input.value = '';
    setSignedIn(session);
    announce('Signed in.');
    await route();
    byId('main').focus();
  } catch (failure) {
    input.value = '';
    error.textContent = failure.message;
    input.focus();
  } finally {
    submit.disabled = false;
  }
}

async function onSignOut() {
  try {
    await api('/session', { method: 'DELETE' });
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 401)) {
      announce(`Sign-out failed: ${error.message}`);
      return;
    }
  }
  signedOut('Signed out.');
}

async function start() {
  initKeys();
  initTeams();
  initEditDialog();
  initUsage();
  initLimits();
  initHealth();
  byId('sign-in-form').addEventListener('submit', onSignIn);
  byId('sign-out').addEventListener('click', onSignOut);
  addEventListener('hashchange', () => {
    announce('');
    void route();
  });
  let session;
  try {
    session = await api('/session');
  } catch (error) {
    announce(`The gateway did not answer: ${error.message}`);
    return;
  }
  if (!session.enabled) {
    byId('disabled-text').textContent = session.detail;
    showOnly('disabled-view');
    return;
  }
  if (!session.signed_in) return signedOut();
  setSignedIn(session);
  await route();
}

void start();
