// Field errors from the API (`Field '<path>': <message>`) shown next to their form fields, under the page's labels.

/**
 * The page's label of each body path a key, team or group form sends (`budget`, `quota`, `end_user`: the whole
 * object). The end users' limits are worded so that no field's label holds another field's.
 */
export const FIELD_LABELS = {
  name: 'Name',
  rpm: 'Requests per minute',
  tpm: 'Tokens per minute',
  quota: 'Token quota',
  'quota.daily': 'Daily token quota',
  'quota.monthly': 'Monthly token quota',
  budget: 'Budget (USD)',
  'budget.daily_usd': 'Daily budget (USD)',
  'budget.monthly_usd': 'Monthly budget (USD)',
  concurrency: 'Concurrency',
  team: 'Team',
  group: 'Group',
  alerts: 'Alerts',
  end_user: 'Limits of each end user',
  'end_user.rpm': 'End-user requests a minute',
  'end_user.tpm': 'End-user tokens a minute',
  'end_user.quota': 'End-user token quota',
  'end_user.quota.daily': 'End-user daily tokens',
  'end_user.quota.monthly': 'End-user monthly tokens',
  'end_user.budget': 'End-user budget',
  'end_user.budget.daily_usd': 'End-user daily USD',
  'end_user.budget.monthly_usd': 'End-user monthly USD',
  cache: 'Response cache',
  guardrails: 'Guardrails',
  expires_at: 'Expires',
  models: 'Allowed models',
  role: 'Role',
  teams: 'Teams',
};

const FIELD_ERROR = /^Field '([^']*)': ([\s\S]*)$/;

/**
 * `{path, message}` of one API field error, the path without list indexes (`guardrails[0]` is `guardrails`); undefined
 * for other text.
 */
export function parseFieldError(text) {
  const match = FIELD_ERROR.exec(text);
  return match ? { path: match[1].replace(/\[\d+\].*$/, ''), message: match[2] } : undefined;
}

/**
 * The shown controls a path's error belongs to: the control sending that path, or every control inside an object path.
 */
function controlsOf(form, path) {
  const shown = [...form.querySelectorAll('[data-path]')].filter((control) => !control.closest('.field')?.hidden);
  const exact = shown.filter((control) => control.dataset.path === path);
  return exact.length ? exact : shown.filter((control) => control.dataset.path.startsWith(`${path}.`));
}

/** Shows one message under the first control of `controls` and marks them all invalid, described by it. */
function attach(controls, text) {
  const [first] = controls;
  const id = `${first.id}-error`;
  let note = document.getElementById(id);
  if (note) note.textContent += `\n${text}`;
  else {
    note = document.createElement('p');
    note.id = id;
    note.className = 'field-error';
    note.textContent = text;
    first.closest('.field').append(note);
  }
  for (const control of controls) {
    control.setAttribute('aria-invalid', 'true');
    if (!control.hasAttribute('data-described-by'))
      control.setAttribute('data-described-by', control.getAttribute('aria-describedby') ?? '');
    const ids = new Set(control.getAttribute('aria-describedby')?.split(/\s+/).filter(Boolean));
    ids.add(id);
    control.setAttribute('aria-describedby', [...ids].join(' '));
  }
}

/** Removes every field error of the form (and the summary's text), restoring each control's description. */
export function clearFormErrors(form, summary) {
  for (const note of form.querySelectorAll('.field-error')) note.remove();
  for (const control of form.querySelectorAll('[aria-invalid]')) control.removeAttribute('aria-invalid');
  for (const control of form.querySelectorAll('[data-described-by]')) {
    const base = control.getAttribute('data-described-by');
    if (base) control.setAttribute('aria-describedby', base);
    else control.removeAttribute('aria-describedby');
    control.removeAttribute('data-described-by');
  }
  if (summary) summary.textContent = '';
}

/**
 * Shows an API error on a form: each field error next to its field as "<Label>: <message>" (aria-invalid, linked
 * by aria-describedby), and in the role=alert `summary` the error's detail and every message. Focuses the first
 * invalid field. `error` is an ApiError, or `{detail, errors}` for problems found before sending.
 */
export function showFormErrors(form, error, summary) {
  clearFormErrors(form, summary);
  const errors = Array.isArray(error.errors) ? error.errors : [];
  const lines = errors.map((text) => {
    const parsed = parseFieldError(text);
    if (!parsed || !FIELD_LABELS[parsed.path]) return text;
    const line = `${FIELD_LABELS[parsed.path]}: ${parsed.message}`;
    const controls = controlsOf(form, parsed.path);
    if (controls.length) attach(controls, line);
    return line;
  });
  summary.textContent = [error.detail ?? error.message, ...lines].join(' · ');
  form.querySelector('[aria-invalid="true"]')?.focus();
}

/**
 * Submits a form's `{body, problems}` (read by limit-values.js) through `send(body)`: problems found before
 * sending are shown and nothing is sent; otherwise the old errors are cleared, the submit button is
 * disabled meanwhile, and a refusal's errors are shown by their fields. Resolves with what `send`
 * resolved with, or undefined when nothing was sent or the send failed.
 */
export async function submitForm(form, summary, { body, problems }, send) {
  if (problems.length) {
    showFormErrors(form, { detail: 'Some fields are not valid.', errors: problems }, summary);
    return undefined;
  }
  clearFormErrors(form, summary);
  const submit = form.querySelector('button[type="submit"]');
  submit.disabled = true;
  try {
    return await send(body);
  } catch (failure) {
    showFormErrors(form, failure, summary);
    return undefined;
  } finally {
    submit.disabled = false;
  }
}
