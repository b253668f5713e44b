/**
 * The attribute and event names the gateway's spans carry. HTTP, server and error attributes are the
 * stable semantic conventions; `gen_ai.*` are the GenAI conventions' (still in development upstream,
 * so the names are written out here rather than imported from the package's incubating entry, which
 * may rename them in any minor release); `gateway.*` are the gateway's own.
 */
export const ATTR = {
  httpMethod: 'http.request.method',
  httpRoute: 'http.route',
  httpStatus: 'http.response.status_code',
  urlPath: 'url.path',
  serverAddress: 'server.address',
  serverPort: 'server.port',
  errorType: 'error.type',

  operation: 'gen_ai.operation.name',
  provider: 'gen_ai.provider.name',
  requestModel: 'gen_ai.request.model',
  requestMaxTokens: 'gen_ai.request.max_tokens',
  requestTemperature: 'gen_ai.request.temperature',
  requestTopP: 'gen_ai.request.top_p',
  requestStream: 'gen_ai.request.stream',
  responseModel: 'gen_ai.response.model',
  responseId: 'gen_ai.response.id',
  finishReasons: 'gen_ai.response.finish_reasons',
  timeToFirstChunk: 'gen_ai.response.time_to_first_chunk',
  inputTokens: 'gen_ai.usage.input_tokens',
  outputTokens: 'gen_ai.usage.output_tokens',
  cacheReadTokens: 'gen_ai.usage.cache_read.input_tokens',
  inputMessages: 'gen_ai.input.messages',
  outputMessages: 'gen_ai.output.messages',
  systemInstructions: 'gen_ai.system_instructions',

  requestId: 'gateway.request_id',
  routeLabel: 'gateway.route',
  model: 'gateway.model',
  keyId: 'gateway.key.id',
  team: 'gateway.team',
  endpoint: 'gateway.endpoint',
  attempt: 'gateway.attempt',
  attempts: 'gateway.attempts',
  attemptOutcome: 'gateway.attempt.outcome',
  outcome: 'gateway.outcome',
  errorCode: 'gateway.error.code',
  failoverReason: 'gateway.failover.reason',
  failoverNext: 'gateway.failover.next_endpoint',
  limitKind: 'gateway.limit.kind',
  limitScope: 'gateway.limit.scope',
  limitKinds: 'gateway.limits.kinds',
  settledTokens: 'gateway.limits.settled_tokens',
  settledChargedTokens: 'gateway.limits.settled_charged_tokens',
  settledCostUsd: 'gateway.limits.settled_cost_usd',
  limitOwner: 'gateway.limit.owner',
  limitPeriod: 'gateway.limit.period',
  alertId: 'gateway.limit.alert.id',
  alertThreshold: 'gateway.limit.alert.threshold',
  alertUsed: 'gateway.limit.alert.used',
  alertLimit: 'gateway.limit.alert.limit',
  alertUnit: 'gateway.limit.alert.unit',
  cacheResult: 'gateway.cache.result',
  costUsd: 'gateway.cost_usd',
  plugin: 'gateway.plugin.name',
  pluginHook: 'gateway.plugin.hook',
} as const;

/** The span of a limit alert's firing (a trace of its own: it fires after the request that reached it). */
export const LIMIT_ALERT_SPAN = 'gateway.limit_alert';

/** The events of the gateway's spans. */
export const EVENT = {
  auth: 'gateway.auth',
  reserve: 'gateway.limits.reserve',
  refused: 'gateway.limits.refused',
  settle: 'gateway.limits.settle',
  cacheLookup: 'gateway.cache.lookup',
  firstToken: 'gateway.first_token',
  failover: 'gateway.failover',
  pluginFault: 'gateway.plugin_fault',
  fixupFault: 'gateway.stream_fixup_fault',
} as const;
