import { expect } from 'chai';
import { Router } from 'express';
import { accessGate } from '../../../src/control-plane/access/access-gate.ts';
import { ADMIN_TOKEN_PRINCIPAL } from '../../../src/control-plane/access/bearer-principal.ts';
import { MANAGEMENT_ROUTES } from '../../../src/control-plane/access/permissions.ts';
import { routesOf } from '../../../src/control-plane/access/route-list.ts';
import { currentScope, openScopes } from '../../../src/control-plane/access/request-scope.ts';
import { send, startGuardedApp } from '../../data-plane/pipeline/guarded-app.ts';

/** `management` behind the access gate at /admin, every request made as the admin token. */
async function startAsAdmin(management: Router) {
  const guarded = Router();
  guarded.use((_req, res, next) => {
    res.locals.principal = ADMIN_TOKEN_PRINCIPAL;
    next();
  });
  guarded.use(
    accessGate({
      rules: MANAGEMENT_ROUTES,
      routes: () => routesOf(management),
      keys: { list: async () => [] },
      via: 'admin',
    }),
  );
  guarded.use(management);
  return startGuardedApp({ routers: { '/admin': guarded } });
}

describe('access gate: deny by default', () => {
  it('refuses a route the router serves without a declared permission to everyone, the admin too, even one added after the first request', async () => {
    const management = Router();
    management.get('/keys', (_req, res) => void res.json({ listed: true }));
    const app = await startAsAdmin(management);
    try {
      expect(await send(app.url, '/admin/keys', { method: 'GET' })).to.deep.include({
        status: 200,
        body: { listed: true },
      });
      management.get('/budget-groups', (_req, res) => void res.json({ leaked: true }));
      management.post('/keys/:id/rotate', (_req, res) => void res.json({ leaked: true }));
      for (const [method, path] of [
        ['GET', '/admin/budget-groups'],
        ['GET', '/admin/BUDGET-GROUPS/'],
        ['POST', '/admin/keys/key_1/rotate'],
      ] as const) {
        const refused = await send(app.url, path, { method });
        expect(refused.status, `${method} ${path}`).to.equal(403);
        expect(refused.body.detail).to.match(
          /^No permission is declared for (GET|POST) \/admin\/.+: it is refused to everyone$/,
        );
      }
      // A path no route serves passes on to the 404 of whatever is behind (here Express's own).
      const unknown = await fetch(`${app.url}/admin/nothing-here`);
      await unknown.arrayBuffer();
      expect(unknown.status).to.equal(404);
    } finally {
      await app.close();
    }
  });
});

describe('access gate: the request scope', () => {
  it('follows each request through its awaits, and is closed again once every response is done', async () => {
    const management = Router();
    const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
    management.get('/keys', async (req, res) => {
      await pause(Number(req.query.wait));
      await Promise.resolve();
      res.json({ actor: currentScope()?.principal.actor.kind, open: openScopes() });
    });
    const app = await startAsAdmin(management);
    try {
      const [slow, fast] = await Promise.all([
        send(app.url, '/admin/keys?wait=60', { method: 'GET' }),
        send(app.url, '/admin/keys?wait=5', { method: 'GET' }),
      ]);
      expect(fast.body).to.deep.equal({ actor: ADMIN_TOKEN_PRINCIPAL.actor.kind, open: 2 });
      expect(slow.body).to.deep.equal({ actor: ADMIN_TOKEN_PRINCIPAL.actor.kind, open: 1 });
      await pause(10);
      expect(openScopes()).to.equal(0);
      expect(currentScope()).to.equal(undefined);
      const again = await send(app.url, '/admin/keys?wait=0', { method: 'GET' });
      expect(again.body).to.deep.equal({ actor: ADMIN_TOKEN_PRINCIPAL.actor.kind, open: 1 });
    } finally {
      await app.close();
    }
  });
});
