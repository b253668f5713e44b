// What the key and team forms offer to choose from: teams, configured guardrails, models.
import { api, ApiError } from './api.js';

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
 * `{teams, guardrails, models}`: every team (as GET /teams shows it), the configured guardrails, the gateway's model
 * IDs (read once).
 */
export async function loadChoices() {
  const [teams, guardrails, models] = await Promise.all([
    listOf('/teams'),
    listOf('/guardrails'),
    modelIds ?? api('/models').then(({ data }) => data),
  ]);
  modelIds = models;
  return { teams, guardrails, models };
}

/** The choices as setChoices takes them (team names). */
export const choiceNames = ({ teams, guardrails, models }) => ({
  teams: teams.map((team) => team.name),
  guardrails,
  models,
});
