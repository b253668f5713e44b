// The dialog that edits a key's, team's or group's limits: prefilled, saves only the fields changed (emptied as null).
import { api } from './api.js';
import { announce, announceAfter, byId } from './dom.js';
import { clearFormErrors, submitForm } from './form-errors.js';
import { renderLimitFields, setChoices } from './limit-fields.js';
import { changesBody, fillLimitFields, snapshotFields } from './limit-values.js';

let current;

/**
 * Opens the edit dialog for one key, team or group. `path` is what PATCH goes to, `choices` what setChoices takes,
 * `onSaved` redraws after a save, and `focusAfter()` finds the control focus returns to (the Edit button, redrawn).
 */
export function openEditDialog({ kind, name, view, path, choices, onSaved, focusAfter }) {
  const grid = byId('edit-fields');
  renderLimitFields(grid, { prefix: 'edit', kind, mode: 'edit' });
  setChoices(grid, choices);
  fillLimitFields(grid, view);
  clearFormErrors(byId('edit-form'), byId('edit-error'));
  current = { kind, name, path, onSaved, focusAfter, snapshot: snapshotFields(grid) };
  byId('edit-title').textContent = `Edit ${kind} ${name}`;
  byId('edit-dialog').showModal();
}

async function onSave(event) {
  event.preventDefault();
  const { kind, name, path, onSaved } = current;
  const changes = changesBody(byId('edit-fields'), current.snapshot);
  const { body } = changes;
  if (changes.problems.length === 0 && Object.keys(body).length === 0) {
    byId('edit-dialog').close();
    announce(`Nothing changed on ${kind} ${name}.`);
    return;
  }
  const saved = await submitForm(byId('edit-form'), byId('edit-error'), changes, async (changed) => {
    await api(path, { method: 'PATCH', body: changed });
    return true;
  });
  if (!saved) return;
  await announceAfter(`Saved ${kind} ${body.name ?? name}.`, onSaved);
  byId('edit-dialog').close();
}

function onClosed() {
  byId('edit-fields').replaceChildren();
  const target = current?.focusAfter();
  current = undefined;
  target?.focus();
}

export function initEditDialog() {
  byId('edit-form').addEventListener('submit', (event) => void onSave(event));
  byId('edit-cancel').addEventListener('click', () => byId('edit-dialog').close());
  byId('edit-dialog').addEventListener('close', onClosed);
}
