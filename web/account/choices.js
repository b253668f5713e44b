// What the key and team forms offer to choose from: teams, budget groups, configured guardrails, models.
import { api, ApiError } from './api.js';
import { can } from './permissions.js';

let modelIds;

/** The `data` of a list endpoint; empty when the gateway does not serve it (404). */
export async function listOf(path) {
  try {
    return (await api(path)).data;
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) return [];
    throw error;
  }
}

/**
 * `{teams, groups, guardrails, models}`: every team (as GET /teams shows it), every budget group (as GET /groups
 * shows it; undefined for a role that may not set a group), the configured guardrails, the gateway's model IDs
 * (read once).
 */
export async function loadChoices() {
  const [teams, groups, guardrails, models] = await Promise.all([
    listOf('/teams'),
    can('groups.write') ? listOf('/groups') : undefined,
    listOf('/guardrails'),
    modelIds ?? api('/models').then(({ data }) => data),
  ]);
  modelIds = models;
  return { teams, groups, guardrails, models };
}

/** The choices as setChoices takes them (team and group names). */
export const choiceNames = ({ teams, groups, guardrails, models }) => ({
  teams: teams.map((team) => team.name),
  groups: groups?.map((group) => group.name),
  guardrails,
  models,
});
