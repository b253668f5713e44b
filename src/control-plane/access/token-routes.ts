import { Router, type RequestHandler } from 'express';
import * as yup from 'yup';
import { actorOf, ROLES, type Grant } from '../../core/access.ts';
import { fieldError, tokenNotFound, validationError } from '../../core/gateway-errors.ts';
import { TEAM_NAME, TEAM_NAME_RULE } from '../../core/team-name.ts';
import { readJsonObject } from '../../data-plane/http/json-body.ts';
import { tokenStatus, type ServiceTokenRecord, type TokenStore } from '../../stores/tokens/token-store.ts';
import { grantCovered } from './permissions.ts';
import { changed, currentScope, refused } from './request-scope.ts';

/** How long a token lasts when `expires_at` is not given, and at most. */
const DEFAULT_DAYS = 90;
const MAX_DAYS = 366;
const DAY_MS = 86_400_000;

/** A service token as the API shows it: never the token or its hash (the token only once, on creation). */
export interface TokenView {
  readonly id: string;
  readonly name: string;
  readonly role: Grant['role'];
  /** The teams of the role; null: every team. */
  readonly teams: readonly string[] | null;
  readonly status: 'active' | 'revoked' | 'expired';
  readonly created_at: string;
  readonly expires_at: string;
  readonly created_by: string;
}

export function tokenView(record: ServiceTokenRecord, now = Date.now()): TokenView {
  return {
    id: record.id,
    name: record.name,
    role: record.grant.role,
    teams: record.grant.teams ?? null,
    status: tokenStatus(record, now),
    created_at: record.createdAt,
    expires_at: record.expiresAt,
    created_by: record.createdBy,
  };
}

const schema = yup
  .object({
    name: yup
      .string()
      .strict()
      .typeError('must be a string')
      .required('is required')
      .max(200, 'must be at most 200 characters'),
    role: yup
      .string()
      .strict()
      .required('is required')
      .oneOf([...ROLES], `must be one of ${ROLES.join(', ')}`),
    teams: yup
      .array(
        yup
          .string()
          .strict()
          .typeError('must be a team name')
          .required('must be a team name')
          .matches(TEAM_NAME, TEAM_NAME_RULE),
      )
      .typeError('must be a list of team names')
      .min(1, 'must name at least one team (leave it out for every team)'),
    expires_at: yup
      .string()
      .strict()
      .typeError('must be an ISO 8601 date-time')
      .test(
        'date-time',
        'must be an ISO 8601 date-time such as 2030-01-31T00:00:00Z',
        (value) => value === undefined || !Number.isNaN(Date.parse(value)),
      )
      .test(
        'future',
        'must be in the future',
        (value) => value === undefined || Number.isNaN(Date.parse(value)) || Date.parse(value) > Date.now(),
      )
      .test(
        'bounded',
        `must be at most ${MAX_DAYS} days ahead`,
        (value) => value === undefined || !(Date.parse(value) > Date.now() + MAX_DAYS * DAY_MS),
      ),
  })
  .strict()
  .noUnknown('has unknown fields (name, role, teams, expires_at)');

/** The token a `POST /tokens` body asks for; every problem at once (400). */
export function parseNewToken(body: unknown, now = Date.now()): { name: string; grant: Grant; expiresAt: string } {
  let value: yup.InferType<typeof schema>;
  try {
    value = schema.validateSync(body, { abortEarly: false });
  } catch (error) {
    if (error instanceof yup.ValidationError)
      throw validationError(error.inner.map((problem) => fieldError(problem.path || 'body', problem.message)));
    throw error;
  }
  const role = value.role as Grant['role'];
  if (role === 'admin' && value.teams)
    throw validationError([fieldError('teams', 'must be left out for admin (an admin holds every team)')]);
  if (role === 'team-admin' && !value.teams)
    throw validationError([fieldError('teams', 'is required for team-admin: the teams it manages')]);
  const expiresAt = new Date(
    value.expires_at === undefined ? now + DEFAULT_DAYS * DAY_MS : Date.parse(value.expires_at),
  ).toISOString();
  return { name: value.name, grant: value.teams ? { role, teams: [...new Set(value.teams)] } : { role }, expiresAt };
}

export interface TokenRoutesOptions {
  readonly tokens: TokenStore;
  readonly bodyLimitBytes?: number;
  readonly now?: () => number;
}

/**
 * Service tokens behind whatever guard mounts them: `GET /tokens` (those within the caller's role),
 * `POST /tokens` (201 with the token, shown once; never with more rights than the caller holds: 403),
 * `DELETE /tokens/:id` (revokes it; 403 for a token beyond the caller's role, 404 for none).
 */
export function tokenRoutes(options: TokenRoutesOptions): Router {
  const router = Router();
  const now = options.now ?? Date.now;
  router.get('/tokens', listTokens(options.tokens, now));
  router.post('/tokens', createToken(options, now));
  router.delete('/tokens/:id', revokeToken(options.tokens, now));
  return router;
}

/** `GET /tokens`: the tokens the caller's role covers (every token outside a request). */
function listTokens(tokens: TokenStore, now: () => number): RequestHandler {
  const held = () => currentScope()?.principal.grants ?? [{ role: 'admin' as const }];
  return async (_req, res) => {
    const mine = (await tokens.list()).filter((record) => grantCovered(held(), record.grant));
    res.json({ object: 'list', data: mine.map((record) => tokenView(record, now())) });
  };
}

/** `POST /tokens`: a new token within the caller's role, its maker named; 201 with the token, shown only here. */
function createToken(options: TokenRoutesOptions, now: () => number): RequestHandler {
  return async (req, res) => {
    const input = parseNewToken(await readJsonObject(req, options.bodyLimitBytes ?? 1024 * 1024), now());
    const scope = currentScope();
    if (scope && !grantCovered(scope.principal.grants, input.grant)) {
      throw refused(
        scope,
        'token.create',
        { type: 'token', team: input.grant.teams?.[0] ?? null },
        'A token may not hold more than its maker: your role does not cover the role asked for',
      );
    }
    const actor = scope ? actorOf(scope.principal) : undefined;
    const { token, record } = await options.tokens.create({
      ...input,
      createdBy: actor ? `${actor.kind}:${actor.name ?? actor.id}` : 'unknown',
    });
    const view = tokenView(record, now());
    changed('token.create', { type: 'token', id: record.id, team: record.grant.teams?.[0] ?? null }, null, view);
    res.status(201).json({ ...view, token });
  };
}

/** `DELETE /tokens/:id`: revokes a token the caller's role covers. */
function revokeToken(tokens: TokenStore, now: () => number): RequestHandler {
  return async (req, res) => {
    const id = String(req.params.id);
    const record = (await tokens.list()).find((each) => each.id === id);
    const scope = currentScope();
    if (record && scope && !grantCovered(scope.principal.grants, record.grant)) {
      throw refused(
        scope,
        'token.revoke',
        { type: 'token', id, team: record.grant.teams?.[0] ?? null },
        'Your role does not cover this token: it may not revoke it',
      );
    }
    if (!record || !(await tokens.revoke(id))) throw tokenNotFound(id);
    changed(
      'token.revoke',
      { type: 'token', id, team: record.grant.teams?.[0] ?? null },
      tokenView(record, now()),
      tokenView({ ...record, revoked: true }, now()),
    );
    res.json({ id, revoked: true });
  };
}
