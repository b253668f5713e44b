import type { ServerResponse } from 'node:http';
import type { CachedAnswer } from '../../core/response-cache.ts';
import type { ResolvedModel } from '../../core/model-registry.ts';
import { endForClient } from '../http/client-write-timeout.ts';
import { hitHeaders } from '../cache/response-caching.ts';
import type { RouteServices } from '../route-services.ts';
import type { CompatibleCall } from './compatible-upstream.ts';
import type { ExchangeRecorder } from './exchange-recorder.ts';

/**
 * Answers from the response cache: the stored bytes exactly as the first client received them (JSON
 * or a whole SSE stream), with `x-gateway-cache: hit` and `Age`. The usage record is one more request
 * with the stored token counts, costing nothing (`savedUsd`: what it would have cost).
 */
export async function replayCachedAnswer(services: RouteServices, res: ServerResponse, call: CompatibleCall, recorder: ExchangeRecorder, hit: CachedAnswer): Promise<void> {
  const served = servedModel(call, hit.model);
  recorder.model = served;
  recorder.cacheHit = { savedUsd: services.usage.charge(hit.usage, served).costUsd };
  if (served !== call.requested) res.setHeader('x-gateway-model', served.canonicalId);
  recorder.firstByteAt = performance.now();
  res.writeHead(hit.status, hitHeaders(hit, Date.now()));
  recorder.recordEnd(await endForClient(res, hit.body, services.clientWriteTimeoutMs), hit.status, hit.usage, false);
}

/** The model a stored answer came from: the one requested, else the fallback that served it (if it still exists). */
function servedModel(call: CompatibleCall, canonicalId: string): ResolvedModel {
  if (canonicalId === call.requested.canonicalId) return call.requested;
  try {
    return { ...call.registry.resolve(call.route, canonicalId), requestedId: call.requested.requestedId };
  } catch {
    return call.requested;
  }
}
