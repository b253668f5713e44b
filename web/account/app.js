// The account page: sign-in, then the keys, teams, groups, usage, limits, health, audit and tokens views behind the
// hash (#keys, #teams, …).
import { api, ApiError, setCsrfToken } from './api.js';
import { announce, byId } from './dom.js';
import { initEditDialog } from './edit-dialog.js';
import { initHealth, showHealth } from './health-view.js';
import { clearSignedInData, forgetNewKey, initKeys, showKeys } from './keys-view.js';
import { clearLimits, initLimits, showLimits } from './limits-view.js';
import { clearTeams, initTeams, showTeams } from './teams-view.js';
import { clearGroups, initGroups, showGroups } from './groups-view.js';
import { clearUsage, initUsage, showUsage } from './usage-view.js';
import { clearAudit, initAudit, showAudit } from './audit-view.js';
import { can, setPermissions } from './permissions.js';
import { clearTokens, forgetNewToken, initTokens, showTokens } from './tokens-view.js';

const VIEWS = {
  keys: showKeys,
  teams: showTeams,
  groups: showGroups,
  usage: () => showUsage({ reloadKeys: true }),
  limits: showLimits,
  health: showHealth,
  audit: showAudit,
  tokens: showTokens,
};
const ALL_SECTIONS = [
  'disabled-view',
  'sign-in-view',
  'keys-view',
  'teams-view',
  'groups-view',
  'usage-view',
  'limits-view',
  'health-view',
  'audit-view',
  'tokens-view',
];
// Why a single sign-on came back without a session (`/account?sso_error=…`).
const SSO_ERRORS = {
  expired: 'The sign-in took too long or was started elsewhere: try again.',
  denied: 'The identity provider did not sign you in.',
  failed:
    "The identity provider's answer could not be checked: try again, or ask an administrator to look at the gateway's log.",
  unavailable: 'The identity provider cannot be reached right now: try again shortly.',
  no_role:
    'You are signed in at the identity provider, but none of your groups has a role on this gateway: ask an administrator.',
};
let signedIn = false;
let expiryTimer;

function showOnly(sectionId) {
  for (const id of ALL_SECTIONS) byId(id).hidden = id !== sectionId;
}

/** Shows only what the signed-in role may do: views it may read, forms and buttons it may use. */
function applyPermissions(session) {
  setPermissions(session?.permissions);
  document.body.classList.toggle('read-only-keys', !can('keys.write'));
  document.body.classList.toggle('read-only-teams', !can('teams.write'));
  byId('create-key-form').hidden = !can('keys.write');
  byId('create-team-form').hidden = !can('teams.write');
  byId('create-group-form').hidden = !can('groups.write');
  byId('create-token-form').hidden = !can('tokens.write');
  for (const link of byId('nav').querySelectorAll('a')) {
    const needs = {
      keys: 'keys.read',
      teams: 'teams.read',
      groups: 'groups.read',
      usage: 'usage.read',
      limits: 'limits.read',
      health: 'health.read',
      audit: 'audit.read',
      tokens: 'tokens.read',
    }[link.dataset.view];
    link.parentElement.hidden = !can(needs);
    link.hidden = false;
  }
  const who = byId('who');
  who.hidden = !session?.signed_in;
  who.textContent = session?.signed_in
    ? `Signed in as ${session.actor.name ?? session.actor.id} · ${session.roles.join(', ')}`
    : '';
}

function setSignedIn(session) {
  signedIn = Boolean(session?.signed_in);
  setCsrfToken(signedIn ? session.csrf_token : '');
  applyPermissions(signedIn ? session : undefined);
  byId('nav').hidden = !signedIn;
  byId('sign-out').hidden = !signedIn;
  clearTimeout(expiryTimer);
  if (signedIn) {
    // Return to the sign-in form when the session runs out, rather than failing on the next click.
    const left = Date.parse(session.expires_at) - Date.now();
    if (left > 0 && left < 2 ** 31 - 1)
      expiryTimer = setTimeout(() => signedOut('Your session expired: sign in again.'), left);
  }
}

function signedOut(message) {
  setSignedIn(undefined);
  clearSignedInData();
  clearLimits();
  clearTeams();
  clearGroups();
  for (const dialog of document.querySelectorAll('dialog[open]')) dialog.close();
  clearUsage();
  clearAudit();
  clearTokens();
  showOnly('sign-in-view');
  announce(message ?? '');
  if (!byId('sign-in-form').hidden) byId('admin-token').focus();
}

/** The sign-in choices the gateway offers: single sign-on, the admin token (break-glass), or both. */
function showSignInMethods(session) {
  byId('sso').hidden = !session.sso;
  byId('sign-in-form').hidden = session.admin_token === false;
  const failure = new URLSearchParams(location.search).get('sso_error');
  byId('sso-error').textContent = failure ? (SSO_ERRORS[failure] ?? SSO_ERRORS.failed) : '';
  if (failure) history.replaceState(null, '', `/account${location.hash}`);
}

async function route() {
  if (!signedIn) return;
  const readable = Object.keys(VIEWS).filter(
    (view) => !byId('nav').querySelector(`a[data-view="${view}"]`).parentElement.hidden,
  );
  const name = readable.includes(location.hash.slice(1)) ? location.hash.slice(1) : (readable[0] ?? 'keys');
  for (const link of byId('nav').querySelectorAll('a')) {
    if (link.dataset.view === name) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  if (name !== 'keys') forgetNewKey();
  if (name !== 'tokens') forgetNewToken();
  showOnly(`${name}-view`);
  // Busy while its lists are read: assistive technology waits for them (and so do the browser tests).
  const view = byId(`${name}-view`);
  view.setAttribute('aria-busy', 'true');
  try {
    await VIEWS[name]();
    document.title = `${byId(`${name}-title`).textContent} · model gateway account`;
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) signedOut('Your session expired: sign in again.');
    else if (error instanceof ApiError && error.status === 403)
      announce(`Your role may not see this: ${error.message}`);
    else announce(error.message);
  } finally {
    view.removeAttribute('aria-busy');
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
  initGroups();
  initEditDialog();
  initUsage();
  initLimits();
  initHealth();
  initAudit();
  initTokens();
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
  showSignInMethods(session);
  if (!session.signed_in) return signedOut();
  setSignedIn(session);
  await route();
}

void start();
