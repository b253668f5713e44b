// The limit fields of the key and team forms (create and edit), built from one list so every form has the same labels.
import { element } from './dom.js';
import { FIELD_LABELS } from './form-errors.js';

const COUNT = { type: 'number', min: '1', step: '1', inputmode: 'numeric' };
const USD = { type: 'number', min: '0', step: 'any', inputmode: 'decimal' };

/**
 * Each field: the body path it sends, its id suffix, its control, the hint after its label and, when it is not
 * on every form, the kinds (`key`, `team`, `group`) and modes (`create`, `edit`) that have it.
 */
const FIELDS = [
  { path: 'name', id: 'name', control: 'text', modes: ['create', 'key-edit'] },
  { path: 'rpm', id: 'rpm', control: 'count', hint: 'optional', kinds: ['key', 'team'] },
  { path: 'tpm', id: 'tpm', control: 'count', hint: 'optional' },
  { path: 'quota.daily', id: 'daily', control: 'count', hint: 'optional' },
  { path: 'quota.monthly', id: 'monthly', control: 'count', hint: 'optional' },
  { path: 'budget.daily_usd', id: 'daily-usd', control: 'usd', hint: 'optional' },
  { path: 'budget.monthly_usd', id: 'monthly-usd', control: 'usd', hint: 'optional' },
  {
    path: 'concurrency',
    id: 'concurrency',
    control: 'count',
    hint: 'optional, requests at once',
    kinds: ['key', 'team'],
  },
  {
    path: 'alerts',
    id: 'alerts',
    control: 'percents',
    hint: 'optional, percents such as 50, 80, 100, or none',
  },
  { path: 'team', id: 'team', control: 'team', kinds: ['key'] },
  { path: 'group', id: 'group', control: 'group', kinds: ['key', 'team'] },
  { path: 'cache', id: 'cache', control: 'cache', kinds: ['key', 'team'] },
  { path: 'expires_at', id: 'expires', control: 'datetime', hint: 'optional, your local time', kinds: ['key'] },
  { path: 'end_user.rpm', id: 'end-user-rpm', control: 'count', section: 'end_user', kinds: ['key', 'team'] },
  { path: 'end_user.tpm', id: 'end-user-tpm', control: 'count', section: 'end_user', kinds: ['key', 'team'] },
  { path: 'end_user.quota.daily', id: 'end-user-daily', control: 'count', section: 'end_user', kinds: ['key', 'team'] },
  {
    path: 'end_user.quota.monthly',
    id: 'end-user-monthly',
    control: 'count',
    section: 'end_user',
    kinds: ['key', 'team'],
  },
  {
    path: 'end_user.budget.daily_usd',
    id: 'end-user-daily-usd',
    control: 'usd',
    section: 'end_user',
    kinds: ['key', 'team'],
  },
  {
    path: 'end_user.budget.monthly_usd',
    id: 'end-user-monthly-usd',
    control: 'usd',
    section: 'end_user',
    kinds: ['key', 'team'],
  },
  { path: 'guardrails', id: 'guardrails', control: 'multi', wide: true, kinds: ['key', 'team'] },
  { path: 'models', id: 'models', control: 'multi', wide: true, kinds: ['key'], hint: 'none selected: every model' },
];

/** The legend of each section of fields, with its hint (`kind`: the form's). */
const SECTIONS = {
  end_user: (kind) => ({
    legend: 'Limits of each end user',
    hint: kind === 'team' ? "optional, each end user across the team's keys" : 'optional, each end user of the key',
  }),
};

/** The guardrails option that sends `[]` (no guardrail runs); `:` is in no guardrail's name. */
export const NO_GUARDRAILS = ':none';

const GUARDRAILS_HINT = {
  key: "none selected: the team's guardrails, else every configured one",
  team: 'none selected: every configured guardrail',
};

function controlOf(spec, kind) {
  const attrs = { 'data-path': spec.path, 'data-control': spec.control };
  switch (spec.control) {
    case 'text':
      return element('input', {
        attrs: { ...attrs, required: '', autocomplete: 'off', ...(kind === 'key' && { maxlength: '200' }) },
      });
    case 'count':
      return element('input', { attrs: { ...attrs, ...COUNT } });
    case 'usd':
      return element('input', { attrs: { ...attrs, ...USD } });
    case 'datetime':
      return element('input', { attrs: { ...attrs, type: 'datetime-local' } });
    case 'team':
    case 'group': {
      const select = element('select', { attrs });
      select.append(element('option', { text: `No ${spec.control}`, attrs: { value: '' } }));
      return select;
    }
    case 'percents':
      return element('input', { attrs: { ...attrs, type: 'text', inputmode: 'text', autocomplete: 'off' } });
    case 'cache': {
      // `cache: true` is stored as given but means the gateway's setting, so it shows (and stays) as that.
      const select = element('select', { attrs });
      select.append(
        element('option', { text: "The gateway's setting", attrs: { value: '' } }),
        element('option', { text: `Off for this ${kind}`, attrs: { value: 'false' } }),
      );
      return select;
    }
    default:
      return element('select', { attrs: { ...attrs, multiple: '', size: '6' } });
  }
}

function fieldOf(spec, { prefix, kind }) {
  const control = controlOf(spec, kind);
  control.id = `${prefix}-${spec.id}`;
  control.name = spec.id;
  const label = element('label', { text: FIELD_LABELS[spec.path], attrs: { for: control.id } });
  const hint = spec.path === 'guardrails' ? GUARDRAILS_HINT[kind] : spec.hint;
  if (hint) label.append(' ', element('span', { className: 'optional', text: `(${hint})` }));
  const field = element('div', { className: spec.wide ? 'field wide' : 'field' });
  // Only a role that may manage groups chooses one (setChoices shows it when given the groups).
  field.hidden = spec.control === 'group';
  field.append(label, control);
  return field;
}

/**
 * Fills `grid` with the fields of a `kind` (`key`, `team`, `group`) form in `mode` (`create`, `edit`; a team's and
 * a group's name is not editable), each control with id `<prefix>-<field>`, its label and hint; a section's fields
 * (the end users' limits) in a fieldset of their own.
 */
export function renderLimitFields(grid, { prefix, kind, mode }) {
  const fields = FIELDS.filter(
    (spec) =>
      (!spec.kinds || spec.kinds.includes(kind)) &&
      (!spec.modes || spec.modes.includes(mode) || spec.modes.includes(`${kind}-${mode}`)),
  );
  const nodes = [];
  const sections = new Map();
  for (const spec of fields) {
    const field = fieldOf(spec, { prefix, kind });
    if (!spec.section) {
      nodes.push(field);
      continue;
    }
    if (!sections.has(spec.section)) {
      const { legend, hint } = SECTIONS[spec.section](kind);
      const set = element('fieldset', { className: 'section wide' });
      const title = element('legend', { text: legend });
      title.append(' ', element('span', { className: 'optional', text: `(${hint})` }));
      const inner = element('div', { className: 'form-grid' });
      set.append(title, inner);
      sections.set(spec.section, inner);
      nodes.push(set);
    }
    sections.get(spec.section).append(field);
  }
  grid.replaceChildren(...nodes);
}

function setOptions(select, values, labelOf = (value) => value) {
  if (!select) return;
  const chosen = new Set([...select.selectedOptions].map((option) => option.value));
  const single = select.dataset.control === 'team' || select.dataset.control === 'group';
  const keep = single ? [select.options[0]] : [];
  select.replaceChildren(
    ...keep,
    ...values.map((value) => element('option', { text: labelOf(value), attrs: { value } })),
  );
  for (const option of select.options) option.selected = chosen.has(option.value) && option.value !== '';
  if (single && select.selectedIndex < 0) select.selectedIndex = 0;
}

/**
 * Sets the choices of the grid's selects, keeping what is selected: `teams` (names), `groups` (names; the group
 * field is shown only with them, given to a role that may set a group), `models` (IDs) and `guardrails` ({name, on,
 * action}); the guardrails field, label and all, is hidden when none are configured.
 */
export function setChoices(grid, { teams, groups, models, guardrails }) {
  if (teams) setOptions(grid.querySelector('[data-path="team"]'), teams);
  const group = grid.querySelector('[data-path="group"]');
  if (group) {
    if (groups) setOptions(group, groups);
    group.closest('.field').hidden = !groups;
  }
  if (models) setOptions(grid.querySelector('[data-path="models"]'), models);
  const select = grid.querySelector('[data-path="guardrails"]');
  if (guardrails && select) {
    const byName = new Map(guardrails.map((entry) => [entry.name, entry]));
    setOptions(select, [NO_GUARDRAILS, ...byName.keys()], (name) => {
      if (name === NO_GUARDRAILS) return 'None: no guardrail at all';
      const { on, action } = byName.get(name);
      return `${name} (${[on === 'both' ? 'request and response' : on, action].filter(Boolean).join(', ')})`;
    });
    select.size = Math.min(guardrails.length + 1, 6);
    select.closest('.field').hidden = guardrails.length === 0;
  }
}
