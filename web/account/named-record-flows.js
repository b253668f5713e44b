// The create and delete flows a Teams or Groups view shares: the page's elements for each are named after the
// record (`create-team-form`, `delete-group-dialog`, `teams-error`, `group-list-title`…).
import { api } from './api.js';
import { announceAfter, byId } from './dom.js';
import { submitForm } from './form-errors.js';
import { createBody } from './limit-values.js';

const capitalized = (text) => text[0].toUpperCase() + text.slice(1);

/**
 * Wires the create form and the delete dialog of `noun` (`team`, `group`), whose records live at `/<noun>s`;
 * `refresh` reads the list again. Returns `confirmDelete(record, opener)`, for each row's Delete button:
 * `warning(name)` is what the dialog says first. A refused delete (a 409 while others name the record) is shown
 * in the role=alert by the table, focus back on the button: nothing changed.
 */
export function namedRecordFlows({ noun, refresh, warning }) {
  const path = (name) => `/${noun}s/${encodeURIComponent(name)}`;
  const error = byId(`${noun}s-error`);
  const dialog = byId(`delete-${noun}-dialog`);
  let pending;

  byId(`create-${noun}-form`).addEventListener('submit', async (event) => {
    event.preventDefault();
    const form = event.currentTarget;
    await submitForm(form, byId(`create-${noun}-error`), createBody(byId(`create-${noun}-fields`)), async (body) => {
      error.textContent = '';
      const created = await api(`/${noun}s`, { method: 'POST', body });
      form.reset();
      await announceAfter(`${capitalized(noun)} ${created.name} created.`, refresh);
    });
  });

  dialog.addEventListener('close', async () => {
    const taken = pending;
    pending = undefined;
    if (!taken) return;
    if (dialog.returnValue !== 'delete') {
      taken.opener.focus();
      return;
    }
    try {
      await api(path(taken.name), { method: 'DELETE' });
    } catch (failure) {
      error.textContent = `Could not delete ${noun} ${taken.name}: ${failure.detail ?? failure.message}`;
      taken.opener.focus();
      return;
    }
    await announceAfter(`${capitalized(noun)} ${taken.name} deleted.`, refresh);
    byId(`${noun}-list-title`).focus();
  });

  return function confirmDelete(record, opener) {
    pending = { name: record.name, opener };
    error.textContent = '';
    byId(`delete-${noun}-text`).textContent = warning(record.name);
    byId(`delete-${noun}-confirm`).textContent = `Delete ${record.name}`;
    dialog.returnValue = '';
    dialog.showModal();
  };
}
