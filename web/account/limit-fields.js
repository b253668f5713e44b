// The limit fields of the key and team forms (create and edit), built from one list so every form has the same labels.
import { element } from './dom.js';
import { FIELD_LABELS } from './form-errors.js';

const COUNT = { type: 'number', min: '1', step: '1', inputmode: 'numeric' };
const USD = { type: 'number', min: '0', step: 'any', inputmode: 'decimal' };

/**
 * Each field: the body path it sends, its id suffix, its control, the hint after its label and, when it is not
 * on every form, the kinds (`key`, `team`) and modes (`create`, `edit`) that have it.
 */
const FIELDS = [
  { path: 'name', id: 'name', control: 'text', modes: ['create', 'key-edit'] },
  { path: 'rpm', id: 'rpm', control: 'count', hint: 'optional' },
  { path: 'tpm', id: 'tpm', control: 'count', hint: 'optional' },
  { path: 'quota.daily', id: 'daily', control: 'count', hint: 'optional' },
  { path: 'quota.monthly', id: 'monthly', control: 'count', hint: 'optional' },
  { path: 'budget.daily_usd', id: 'daily-usd', control: 'usd', hint: 'optional' },
  { path: 'budget.monthly_usd', id: 'monthly-usd', control: 'usd', hint: 'optional' },
  { path: 'concurrency', id: 'concurrency', control: 'count', hint: 'optional, requests at once' },
  { path: 'team', id: 'team', control: 'team', kinds: ['key'] },
  { path: 'cache', id: 'cache', control: 'cache' },
  { path: 'expires_at', id: 'expires', control: 'datetime', hint: 'optional, your local time', kinds: ['key'] },
  { path: 'guardrails', id: 'guardrails', control: 'multi', wide: true },
  { path: 'models', id: 'models', control: 'multi', wide: true, kinds: ['key'], hint: 'none selected: every model' },
];

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
    case 'team': {
      const select = element('select', { attrs });
      select.append(element('option', { text: 'No team', attrs: { value: '' } }));
      return select;
    }
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

/**
 * Fills `grid` with the fields of a `kind` (`key`, `team`) form in `mode` (`create`, `edit`; a team's name
 * is not editable), each control with id `<prefix>-<field>`, its label and hint.
 */
export function renderLimitFields(grid, { prefix, kind, mode }) {
  const fields = FIELDS.filter(
    (spec) =>
      (!spec.kinds || spec.kinds.includes(kind)) &&
      (!spec.modes || spec.modes.includes(mode) || spec.modes.includes(`${kind}-${mode}`)),
  );
  grid.replaceChildren(
    ...fields.map((spec) => {
      const control = controlOf(spec, kind);
      control.id = `${prefix}-${spec.id}`;
      control.name = spec.id;
      const label = element('label', { text: FIELD_LABELS[spec.path], attrs: { for: control.id } });
      const hint = spec.path === 'guardrails' ? GUARDRAILS_HINT[kind] : spec.hint;
      if (hint) label.append(' ', element('span', { className: 'optional', text: `(${hint})` }));
      const field = element('div', { className: spec.wide ? 'field wide' : 'field' });
      field.append(label, control);
      return field;
    }),
  );
}

function setOptions(select, values, labelOf = (value) => value) {
  if (!select) return;
  const chosen = new Set([...select.selectedOptions].map((option) => option.value));
  const keep = select.dataset.control === 'team' ? [select.options[0]] : [];
  select.replaceChildren(
    ...keep,
    ...values.map((value) => element('option', { text: labelOf(value), attrs: { value } })),
  );
  for (const option of select.options) option.selected = chosen.has(option.value) && option.value !== '';
  if (select.dataset.control === 'team' && select.selectedIndex < 0) select.selectedIndex = 0;
}

/**
 * Sets the choices of the grid's selects, keeping what is selected: `teams` (names), `models` (IDs) and
 * `guardrails` ({name, on, action}); the guardrails field, label and all, is hidden when none are configured.
 */
export function setChoices(grid, { teams, models, guardrails }) {
  if (teams) setOptions(grid.querySelector('[data-path="team"]'), teams);
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
