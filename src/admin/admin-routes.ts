import { Router, type RequestHandler } from 'express';
import * as yup from 'yup';
import { publicView } from '../auth/api-keys.ts';
import type { KeyStore } from '../auth/key-store.ts';
import { sameSecret } from '../auth/api-keys.ts';
import { fieldError, GatewayError, routeNotFound, unauthenticated, validationError } from '../errors/gateway-errors.ts';
import { readJsonObject } from '../http/json-body.ts';
import type { ModelRegistry } from '../plugins/model-registry.ts';

const positiveInteger = (message: string) => yup.number().typeError(message).integer(message).min(1, message);

export const newKeySchema = yup
  .object({
    name: yup.string().typeError('must be a string').defined('is required').min(1, 'must not be empty').max(200, 'must be at most 200 characters'),
    rpm: positiveInteger('must be a positive integer'),
    models: yup.array(yup.string().defined().typeError('must be model IDs')).typeError('must be a list of model IDs'),
    expires_at: yup
      .string()
      .typeError('must be an ISO date-time')
      .test('date', 'must be an ISO date-time in the future', (value) => value === undefined || Date.parse(value) > Date.now()),
    quota: yup
      .object({ daily: positiveInteger('must be a positive integer'), monthly: positiveInteger('must be a positive integer') })
      .noUnknown('has unknown fields (daily, monthly)')
      .default(undefined),
  })
  .noUnknown('has unknown fields');

export type NewKeyBody = yup.InferType<typeof newKeySchema>;

/** Validates a new key's settings; models must be concrete IDs the gateway serves. */
export function checkNewKey(body: unknown, registry: ModelRegistry): NewKeyBody {
  let value: NewKeyBody;
  try {
    value = newKeySchema.validateSync(body, { abortEarly: false, strict: true });
  } catch (error) {
    if (error instanceof yup.ValidationError) {
      throw validationError(error.inner.map((problem) => fieldError(problem.path || 'body', problem.message)));
    }
    throw error;
  }
  const known = new Set(registry.plugins.flatMap((plugin) => plugin.models.map((model) => `${plugin.vendor}/${model.id}`)));
  const unknown = (value.models ?? []).filter((model) => !known.has(model));
  if (unknown.length) throw validationError(unknown.map((model) => fieldError('models', `'${model}' is not a concrete model ID (aliases resolve per request; list concrete IDs)`)));
  return value;
}

/** Guards the admin API with `GATEWAY_ADMIN_TOKEN`, compared in constant time. */
function adminGuard(token: string): RequestHandler {
  return function requireAdmin(req, _res, next) {
    const match = /^Bearer[ \t]+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
    if (!match || !sameSecret(match[1]!, token)) return next(unauthenticated('The admin API needs Authorization: Bearer <GATEWAY_ADMIN_TOKEN>'));
    next();
  };
}

/**
 * `/admin/keys` (create, list, revoke) and whatever else the caller mounts on the router, behind the
 * admin token. Without a token configured the admin API does not exist (404).
 */
export function adminRouter(options: {
  token: string | undefined;
  keys: KeyStore;
  registry: () => ModelRegistry;
  bodyLimitBytes: number;
  usage?: RequestHandler;
}): Router {
  const router = Router();
  if (!options.token) {
    router.use((req, _res, next) => next(routeNotFound(req.method, req.originalUrl.split('?')[0]!)));
    return router;
  }
  router.use(adminGuard(options.token));
  router.post('/keys', async (req, res) => {
    const body = checkNewKey(await readJsonObject(req, options.bodyLimitBytes), options.registry());
    const { key, record } = await options.keys.create({
      name: body.name,
      rpm: body.rpm,
      models: body.models,
      expiresAt: body.expires_at ? new Date(body.expires_at).toISOString() : undefined,
      quota: body.quota,
    });
    res.status(201).json({ ...publicView(record), key });
  });
  router.get('/keys', async (_req, res) => {
    res.json({ object: 'list', data: (await options.keys.list()).map(publicView) });
  });
  router.delete('/keys/:id', async (req, res) => {
    if (!(await options.keys.revoke(req.params.id!))) throw new GatewayError('GW_ERR_KEY_NOT_FOUND', 404, 'not_found', `No key with id '${req.params.id}'`);
    res.json({ id: req.params.id, revoked: true });
  });
  if (options.usage) router.get('/usage', options.usage);
  return router;
}
