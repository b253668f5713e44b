import type { Router } from 'express';

/** A route an Express router serves: its method and path below the router's mount point. */
export interface ListedRoute {
  readonly method: string;
  readonly path: string;
}

interface RouterLayer {
  readonly route?: { readonly path: unknown; readonly methods: Record<string, boolean> };
  readonly handle?: { readonly stack?: readonly RouterLayer[] };
  readonly rawPath?: unknown;
}

/**
 * Every route a router serves, found in its own routing table (nested routers included): what the
 * access gate refuses when no permission is declared for it, and what the permission test walks.
 */
export function routesOf(router: Pick<Router, 'stack'>, prefix = ''): ListedRoute[] {
  const found: ListedRoute[] = [];
  for (const layer of router.stack as unknown as readonly RouterLayer[]) {
    if (layer.route && typeof layer.route.path === 'string') {
      for (const [method, on] of Object.entries(layer.route.methods)) {
        if (on && method !== '_all') found.push({ method: method.toUpperCase(), path: `${prefix}${layer.route.path}` });
      }
    } else if (layer.handle?.stack) {
      const mount = typeof layer.rawPath === 'string' && layer.rawPath !== '/' ? layer.rawPath : '';
      found.push(...routesOf(layer.handle as Pick<Router, 'stack'>, `${prefix}${mount}`));
    }
  }
  return found;
}
