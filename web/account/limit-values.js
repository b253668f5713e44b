// The values of the limit fields (see limit-fields.js): filled from a key or team view, read into an API body.
import { element } from './dom.js';
import { NO_GUARDRAILS } from './limit-fields.js';

/** What the alerts field takes for an empty list (no alert), as GATEWAY_LIMIT_ALERTS does. */
const NONE = 'none';

const controlsOf = (grid) => [...grid.querySelectorAll('[data-path]')];
/** The top-level body field a control sends (`quota.daily` is part of `quota`). */
const groupOf = (control) => control.dataset.path.split('.')[0];

function viewValue(view, path) {
  return path
    .split('.')
    .reduce((value, part) => (value === null || value === undefined ? undefined : value[part]), view);
}

/** `2030-01-31T09:30` in local time, what a datetime-local input holds. */
function localDateTime(iso) {
  const date = new Date(iso);
  const pad = (value) => String(value).padStart(2, '0');
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T${pad(date.getHours())}:${pad(date.getMinutes())}`;
}

/** Alert thresholds as the field shows them: `50, 80, 100`, `none` for an empty list, empty when unset. */
function percentsText(value) {
  if (!Array.isArray(value)) return '';
  return value.length ? value.join(', ') : NONE;
}

/**
 * The percents typed (`50, 80, 100`; `%` signs allowed) as numbers, `[]` for `none`; a `Field` error when one
 * is no number (the API checks the rest: whole, 1 to 100, ascending).
 */
function percentsValue(control, text, problems) {
  if (text.toLowerCase() === NONE) return [];
  const values = text
    .replace(/%/g, ' ')
    .split(/[\s,;]+/)
    .filter(Boolean)
    .map(Number);
  if (values.some((value) => !Number.isFinite(value)))
    problems.push(`Field '${control.dataset.path}': must be percents such as 50, 80, 100, or none`);
  return values;
}

/** Sets every field of the grid from a key or team view (as GET /keys or /teams shows it). */
export function fillLimitFields(grid, view) {
  for (const control of controlsOf(grid)) {
    const value = viewValue(view, control.dataset.path);
    const kind = control.dataset.control;
    if (kind === 'multi') {
      // An empty guardrails list (none run) is its own choice; unset selects nothing.
      const chosen = new Set(
        Array.isArray(value) && value.length === 0 && control.dataset.path === 'guardrails'
          ? [NO_GUARDRAILS]
          : (value ?? []),
      );
      for (const option of control.options) option.selected = chosen.has(option.value);
    } else if (kind === 'cache') control.value = value === false ? 'false' : '';
    else if (kind === 'datetime') control.value = value ? localDateTime(value) : '';
    else if (kind === 'percents') control.value = percentsText(value);
    else if (kind === 'team' || kind === 'group') {
      // A team or group not offered (gone from the list meanwhile) stays selectable, so saving other fields keeps it.
      if (value && ![...control.options].some((option) => option.value === value))
        control.append(element('option', { text: value, attrs: { value } }));
      control.value = value ?? '';
    } else control.value = value ?? '';
  }
}

/** What a control holds, for comparing before and after: its value, or its selected values. */
function rawValue(control) {
  return control.dataset.control === 'multi'
    ? [...control.selectedOptions].map((option) => option.value).join('\n')
    : control.value;
}

/** The controls' values by body field, to see later which fields were changed. */
export function snapshotFields(grid) {
  const snapshot = {};
  for (const control of controlsOf(grid)) (snapshot[groupOf(control)] ??= []).push(rawValue(control));
  return Object.fromEntries(Object.entries(snapshot).map(([group, values]) => [group, JSON.stringify(values)]));
}

/** One control's value in the body: null when empty; a `Field` error when a number input holds no number. */
function bodyValue(control, problems) {
  const kind = control.dataset.control;
  if (kind === 'multi') {
    const values = [...control.selectedOptions].map((option) => option.value);
    if (values.includes(NO_GUARDRAILS)) {
      if (values.length > 1)
        problems.push(`Field '${control.dataset.path}': choose "None" alone, or the guardrails to run`);
      return [];
    }
    return values.length ? values : null;
  }
  const text = control.value.trim();
  if (kind === 'text') return text;
  if (text === '') {
    if (control.validity.badInput) problems.push(`Field '${control.dataset.path}': must be a number`);
    return null;
  }
  if (kind === 'count' || kind === 'usd') return Number(text);
  if (kind === 'cache') return text === 'false' ? false : null;
  if (kind === 'datetime') return Number.isNaN(Date.parse(text)) ? text : new Date(text).toISOString();
  if (kind === 'percents') return percentsValue(control, text, problems);
  return text;
}

/**
 * Sets a value at a dotted path of `body`: an empty part of an object leaves it out, and the object is null only
 * while none of its parts is given.
 */
function setPath(body, [field, ...rest], value) {
  if (rest.length === 0) body[field] = value;
  else if (value === null) body[field] ??= null;
  else setPath((body[field] ??= {}), rest, value);
}

/**
 * Every field of the grid as the API's body has it, null when empty (`quota`, `budget` and `end_user` as objects
 * of the parts given), and `problems`: field errors found before sending (in the API's form, for showFormErrors).
 */
export function readLimitFields(grid) {
  const body = {};
  const problems = [];
  for (const control of controlsOf(grid)) {
    if (control.closest('.field')?.hidden) continue;
    setPath(body, control.dataset.path.split('.'), bodyValue(control, problems));
  }
  return { body, problems };
}

/** The body of a create form: the fields given. */
export function createBody(grid) {
  const { body, problems } = readLimitFields(grid);
  return { body: Object.fromEntries(Object.entries(body).filter(([, value]) => value !== null)), problems };
}

/** The body of an edit form: only the fields changed since `snapshot`, an emptied one as null (removed). */
export function changesBody(grid, snapshot) {
  const { body, problems } = readLimitFields(grid);
  const now = snapshotFields(grid);
  return {
    body: Object.fromEntries(Object.entries(body).filter(([group]) => now[group] !== snapshot[group])),
    problems,
  };
}
