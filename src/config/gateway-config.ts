import { readFileSync } from 'node:fs';
import { isAbsolute, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { LineCounter, parseDocument } from 'yaml';
import * as yup from 'yup';
import { checkTrustedProxies } from '../core/incoming-request.ts';
import type { AuthStyle } from '../plugins/plugin-contract.ts';
import { authProblems } from '../plugins/validate-auth.ts';
import { envFlag } from './config-values.ts';
import { settingName } from './setting-sources.ts';
import {
  ConfigProblemReporter,
  fieldName,
  schemaProblems,
  withoutFields,
  yamlProblem,
  type ConfigProblem,
  type FieldPath,
} from './config-problems.ts';
import type { GuardrailSettings } from '../guardrails/guardrail-settings.ts';
import { guardrailSettings } from './guardrail-config.ts';
import type { TracingSettings } from '../ops/tracing/tracing-settings.ts';
import { tracingConfig, tracingFileSchema } from './tracing-config.ts';
import { accessSettings, type AccessSettings } from './access-config.ts';
import { alertSettings } from './alert-config.ts';
import type { AlertSettings } from '../ops/alerts/alert-settings.ts';

/** Settings of one upstream provider, keyed by its vendor prefix. */
export interface ProviderSettings {
  /** Base URL including the version prefix, e.g. `http://127.0.0.1:9000/v1`. */
  readonly baseUrl?: string;
  readonly apiKey?: string;
  /** Several upstream endpoints of the provider, instead of `baseUrl`/`apiKey`. */
  readonly endpoints?: readonly EndpointSettings[];
}

/** One upstream endpoint of a provider. */
export interface EndpointSettings {
  readonly baseUrl: string;
  readonly apiKey?: string;
  /** Share of requests relative to the provider's other endpoints (default 1). */
  readonly weight: number;
  /** How logs, usage and the health view name it (default: its 0-based index). */
  readonly name: string;
  /**
   * Where this endpoint takes its key, over the `auth` of every plugin route it serves (a region that
   * takes the key as a query parameter beside a main endpoint that takes a header). Absent: each
   * route's own `auth`.
   */
  readonly auth?: AuthStyle;
}

/** Failover between a provider's endpoints. */
export interface FailoverSettings {
  /** Attempts per request at most; default: the provider's number of endpoints, at most 5. */
  readonly maxAttempts?: number;
  /** Consecutive failures after which an endpoint rests. */
  readonly failureThreshold: number;
  /** How long a tripped endpoint rests before one trial request decides, in ms. */
  readonly cooldownMs: number;
}

/** How requests are spread over a provider's endpoints. */
export interface RoutingSettings {
  /**
   * Prompt-cache-aware routing: the requests of one session (`x-session-id`, `prompt_cache_key`, else
   * the system prompt and first message) go to the same healthy endpoint of a pool, by weighted
   * rendezvous hashing; false spreads every request at random by weight.
   */
  readonly affinity: boolean;
}

export interface RedisSettings {
  readonly url?: string;
  readonly sentinels?: readonly { host: string; port: number }[];
  readonly sentinelName?: string;
  readonly cluster?: readonly { host: string; port: number }[];
}

export interface GatewayConfig {
  readonly port: number;
  readonly host: string;
  /** Largest request body accepted, in bytes. */
  readonly bodyLimitBytes: number;
  /** Longest wait for an upstream's response headers, and between two body chunks, in ms. */
  readonly upstreamTimeoutMs: number;
  /**
   * Longest wait for an upstream's first content (response headers, then a stream's first content
   * event), in ms; past it the attempt fails over to the next endpoint.
   */
  readonly firstByteTimeoutMs: number;
  /** Longest silence of an upstream once its answer started, in ms. */
  readonly idleTimeoutMs: number;
  readonly failover: FailoverSettings;
  readonly routing: RoutingSettings;
  /** Largest single SSE event relayed, in bytes; a larger one ends the stream with an in-band error. */
  readonly maxSseEventBytes: number;
  /** Total time one `/v1/chat` request may take, retries and waits included, in ms. */
  readonly chatDeadlineMs: number;
  /** `providers/manifest.json` beside the running code by default (`dist/providers/` when compiled). */
  readonly manifestPath: string;
  /** Further plugin directories, each with its own `manifest.json` (`GATEWAY_PLUGIN_PATH`, colon-separated). */
  readonly pluginPath: readonly string[];
  /** Per vendor, from the config file; env `<PREFIX>_BASE_URL` / `<PREFIX>_API_KEY` override them. */
  readonly providers: Readonly<Record<string, ProviderSettings>>;
  /** Canonical model → canonical models tried in order when every endpoint of it failed (opt-in). */
  readonly fallbacks: Readonly<Record<string, readonly string[]>>;
  /** Alias → canonical target, overriding the plugins' declared targets. */
  readonly aliases: Readonly<Record<string, string>>;
  readonly redis?: RedisSettings;
  /** Where the embedded store keeps its files. */
  readonly dataDir: string;
  readonly rateLimit: { readonly max: number; readonly windowMs: number };
  readonly adminToken?: string;
  /** Static keys from `GATEWAY_API_KEYS`. */
  readonly apiKeys: readonly string[];
  /**
   * `GATEWAY_KEY_ID_SECRET`: when set, static keys' public ids are an HMAC under it (not computable from
   * a key without it); else they derive from the key alone (see `core/static-key-id.ts`).
   */
  readonly keyIdSecret?: string;
  /**
   * `GATEWAY_LIMITS_ALLOW_UNBOUNDED`: serve keys with token or money limits requests whose upstream work
   * the gateway cannot bound (`previous_response_id`, `conversation`, `background`); refused by default.
   */
  readonly limitsAllowUnbounded: boolean;
  /**
   * `GATEWAY_END_USERS_PER_KEY`: distinct end users given their own end-user counters per key (and per
   * team) per UTC day; past it, the day's further end users share one bucket.
   */
  readonly endUsersPerKey: number;
  /** Limit alerts: the default thresholds (`GATEWAY_LIMIT_ALERTS`) and the signed webhook (see docs/budgets.md). */
  readonly alerts: AlertSettings;
  readonly logLevel: string;
  /** On SIGTERM/SIGINT, how long requests and streams in flight may take to finish before they are ended. */
  readonly drainMs: number;
  /** Longest a client may take to send a request's headers (Node's `server.headersTimeout`). */
  readonly headersTimeoutMs: number;
  /** Longest a client may take to send a whole request, body included (Node's `server.requestTimeout`). */
  readonly requestTimeoutMs: number;
  /** Longest a client may leave an answer unread (its connection's buffers full) before the answer is ended. */
  readonly clientWriteTimeoutMs: number;
  /** Open client connections at most; one more is answered 503 and closed (default from the fd limit). */
  readonly maxConnections: number;
  /**
   * Open connections from one client address at most (IPv6 by /56), so that one address cannot take
   * every slot; one more is answered 429 and closed. A trusted proxy's connections are not capped per
   * address (it carries many clients). Default: a tenth of `maxConnections`, raised to 16 for small caps
   * but never above a quarter of it (at least 1), so that two addresses can never take every slot.
   */
  readonly maxConnectionsPerAddress: number;
  /**
   * Requests still sending their body per client address at most (behind a trusted proxy: per client it
   * names); one more is answered 429. Default: a twentieth of `maxConnections` (half of an address's
   * default connections), raised to 8 for small caps but never above a quarter of it (at least 1).
   */
  readonly maxPendingRequestsPerAddress: number;
  /**
   * Failed credentials per client address and minute before 429: unknown API keys, and wrong admin tokens, a budget
   * each.
   */
  readonly authFailuresPerMinute: number;
  /**
   * While Redis (the key store) cannot be read: `closed` refuses a managed key with 503 once its state
   * was last read `authGraceMs` ago; `open` keeps answering from that state. Static keys always work.
   */
  readonly authFailMode: 'open' | 'closed';
  readonly authGraceMs: number;
  /**
   * Requests of one API key in flight at once on this instance, for keys without their own
   * `concurrency`; no cap when absent (the default).
   */
  readonly keyConcurrency?: number;
  /** Responses WebSockets one API key may hold open at once on this instance; no cap when absent (the default). */
  readonly keyWebSockets?: number;
  /** A Responses WebSocket with no response in flight and no message for this long is closed, in ms. */
  readonly webSocketIdleTimeoutMs: number;
  /**
   * Proxies whose `X-Forwarded-For` is believed (addresses, CIDR ranges, `loopback`, `linklocal`,
   * `uniquelocal`): every per-address rule then counts the client that proxy names. Empty: none.
   */
  readonly trustedProxies: readonly string[];

  /** The exact response cache; off (undefined) unless a TTL is configured. */
  readonly cache?: CacheConfig;
  /** Checks on prompts and answers (`guardrails:`), in order; empty: none (see docs/guardrails.md). */
  readonly guardrails: readonly GuardrailSettings[];

  // Operations (metrics, reload).
  /** `METRICS_PORT`: serve `GET /metrics` on this port of `host` alone instead of on the main port. */
  readonly metricsPort?: number;
  /** OpenTelemetry traces and OTLP metrics (`OTEL_*` over the file's `tracing:`); off without a collector endpoint. */
  readonly tracing: TracingSettings;
  /** Single sign-on, the role mapping and the break-glass admin token (`access:`); see docs/access.md. */
  readonly access: AccessSettings;
  /**
   * Where each audit record also goes as a JSON line: `stdout` or a file (`GATEWAY_AUDIT_EXPORT`); none when absent.
   */
  readonly auditExport?: string;
}

/** The exact response cache's settings (`cache.*` in the file, `GATEWAY_CACHE_*` in the environment). */
export interface CacheConfig {
  /** How long an entry answers after it was stored, in seconds. */
  readonly ttlSeconds: number;
  /** Largest answer stored, in bytes (default 1 MiB). */
  readonly maxEntryBytes: number;
  /**
   * Bytes the embedded store's entries take at most, least recently used dropped first (default 64 MiB; Redis: the
   * operator's `maxmemory`).
   */
  readonly maxBytes: number;
}

/** A configuration the gateway refuses: every problem found, each as an operator reads it. */
export class ConfigError extends Error {
  readonly problems: readonly string[];

  constructor(problems: string | readonly string[]) {
    const list = typeof problems === 'string' ? [problems] : problems;
    super(list.join('; '));
    this.name = 'ConfigError';
    this.problems = list;
  }
}

// While inspectConfig runs, the checks below record their problem here and carry on with a placeholder
// for the bad value, so that one run reports every problem; called outside it, they throw.
let collecting: ConfigProblem[] | undefined;

function record(found: ConfigProblem): void {
  if (!collecting) throw new ConfigError(found.text);
  collecting.push(found);
}

/** The log levels (pino's names), most to least severe; `silent` logs nothing. */
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

function problem(text: string, at?: FieldPath): void {
  record({ text, at });
}

// The providers shipped with this code: `providers/` of the checkout, or `dist/providers/` when compiled.
const BUNDLED_MANIFEST = fileURLToPath(new URL('../../providers/manifest.json', import.meta.url));

const SIZE_UNITS: Record<string, number> = { b: 1, kb: 1024, mb: 1024 ** 2, gb: 1024 ** 3 };

/** `10mb`, `512kb`, `1048576` → bytes. */
export function parseSize(value: string | number): number {
  if (typeof value === 'number' && Number.isInteger(value) && value > 0) return value;
  const match = /^\s*(\d+(?:\.\d+)?)\s*(b|kb|mb|gb)?\s*$/i.exec(String(value));
  if (!match || Number(match[1]) <= 0)
    throw new ConfigError(`'${value}' is not a size (use e.g. 10mb, 512kb or a byte count)`);
  return Math.floor(Number(match[1]) * SIZE_UNITS[(match[2] ?? 'b').toLowerCase()]!);
}

function isSize(value: unknown): boolean {
  if (value === undefined) return true;
  try {
    parseSize(value as string | number);
    return true;
  } catch {
    return false;
  }
}

const hostPort = yup.object({
  host: yup.string().required(),
  port: yup.number().integer().min(1).max(65535).required(),
});

const fileSchema = yup
  .object({
    server: yup
      .object({
        port: yup.number().integer().min(0).max(65535),
        host: yup.string(),
        bodyLimit: yup.mixed<string | number>().test('size', 'server.bodyLimit must be a size such as 10mb', isSize),
        upstreamTimeoutMs: yup.number().integer().positive(),
        maxSseEventBytes: yup
          .mixed<string | number>()
          .test('size', 'server.maxSseEventBytes must be a size such as 16mb', isSize),
        chatDeadlineMs: yup.number().integer().positive(),
        drainMs: yup.number().integer().min(0),
        headersTimeoutMs: yup.number().integer().positive(),
        requestTimeoutMs: yup.number().integer().positive(),
        clientWriteTimeoutMs: yup.number().integer().positive(),
        maxConnections: yup.number().integer().positive(),
        maxConnectionsPerAddress: yup.number().integer().positive(),
        maxPendingRequestsPerAddress: yup.number().integer().positive(),
        authFailuresPerMinute: yup.number().integer().positive(),
        authFailMode: yup.string<'open' | 'closed'>().oneOf(['open', 'closed']),
        authGraceMs: yup.number().integer().min(0),
        keyConcurrency: yup.number().integer().positive(),
        keyWebSockets: yup.number().integer().positive(),
        webSocketIdleTimeoutMs: yup.number().integer().positive(),
        trustedProxies: yup.array(yup.string().required()),
      })
      .noUnknown()
      .default(undefined),
    upstream: yup
      .object({
        firstByteTimeoutMs: yup.number().integer().positive(),
        idleTimeoutMs: yup.number().integer().positive(),
      })
      .noUnknown()
      .default(undefined),
    failover: yup
      .object({
        maxAttempts: yup.number().integer().min(1).max(5),
        failureThreshold: yup.number().integer().positive(),
        cooldownMs: yup.number().integer().positive(),
      })
      .noUnknown()
      .default(undefined),
    routing: yup.object({ affinity: yup.boolean() }).noUnknown().default(undefined),
    manifest: yup.string(),
    providers: yup.object().default(undefined),
    aliases: yup.object().default(undefined),
    fallbacks: yup.object().default(undefined),
    redis: yup
      .object({
        url: yup.string().matches(/^rediss?:\/\//, 'redis.url must start with redis:// or rediss://'),
        sentinels: yup.array(hostPort),
        sentinelName: yup.string(),
        cluster: yup.array(hostPort),
      })
      .noUnknown()
      .default(undefined),
    dataDir: yup.string(),
    rateLimit: yup
      .object({ max: yup.number().integer().positive(), windowMs: yup.number().integer().positive() })
      .noUnknown()
      .default(undefined),
    logLevel: yup.string().oneOf([...LOG_LEVELS]),
    cache: yup
      .object({
        ttlSeconds: yup.number().integer().min(0),
        maxEntryBytes: yup
          .mixed<string | number>()
          .test('size', 'cache.maxEntryBytes must be a size such as 1mb', isSize),
        maxBytes: yup.mixed<string | number>().test('size', 'cache.maxBytes must be a size such as 64mb', isSize),
      })
      .noUnknown()
      .default(undefined),
    // Checked entry by entry (guardrail-config.ts), every problem at its field.
    guardrails: yup.mixed(),

    // Operations (metrics, reload).
    metrics: yup
      .object({ port: yup.number().integer().min(0).max(65535) })
      .noUnknown()
      .default(undefined),
    tracing: tracingFileSchema,
    // Checked field by field (access-config.ts), every problem at its field.
    access: yup.mixed(),
    audit: yup.object({ export: yup.string() }).noUnknown().default(undefined),
  })
  .noUnknown();

/** The config file's settings, as the schema reads them. */
type FileSettings = yup.InferType<typeof fileSchema>;

interface ConfigSource {
  readonly raw: Record<string, unknown>;
  readonly reporter: ConfigProblemReporter;
}

function readConfigFile(path: string, required: boolean, fileName: string): ConfigSource {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (!required && code === 'ENOENT') return { raw: {}, reporter: new ConfigProblemReporter(fileName) };
    problem(`cannot read the config file ${fileName} (${code ?? (error as Error).message})`);
    return { raw: {}, reporter: new ConfigProblemReporter(fileName) };
  }
  const lines = new LineCounter();
  const document = parseDocument(text, { lineCounter: lines, prettyErrors: false });
  const reporter = new ConfigProblemReporter(fileName, document, lines);
  if (document.errors.length) {
    for (const error of document.errors) record(yamlProblem(error));
    return { raw: {}, reporter };
  }
  let parsed: unknown;
  try {
    parsed = document.toJS();
  } catch {
    // Only alias expansion fails here (too many, or one in a loop).
    problem(`${fileName} is not valid YAML: its aliases cannot be expanded`);
    return { raw: {}, reporter };
  }
  if (parsed === null || parsed === undefined) return { raw: {}, reporter };
  if (typeof parsed !== 'object' || Array.isArray(parsed)) {
    problem(`${fileName} must hold a mapping of settings`);
    return { raw: {}, reporter };
  }
  return { raw: parsed as Record<string, unknown>, reporter };
}

/** The file's settings that pass the schema; each one that does not is a problem and is left out. */
function validateFile(raw: Record<string, unknown>): FileSettings {
  let settings = raw;
  // Leaving out a bad field makes the rest valid; the second round only guards against a schema surprise.
  for (let round = 0; round < 2; round += 1) {
    try {
      return fileSchema.validateSync(settings, { abortEarly: false, strict: true });
    } catch (error) {
      if (!(error instanceof yup.ValidationError)) throw error;
      const { problems, invalid } = schemaProblems(error);
      if (round === 0) for (const found of problems) problem(found.text, found.at);
      settings = withoutFields(settings, invalid);
    }
  }
  return fileSchema.validateSync({}, { strict: true });
}

function stringMap(field: string, value: unknown): Record<string, string> {
  const result: Record<string, string> = {};
  for (const [key, entry] of Object.entries((value ?? {}) as Record<string, unknown>)) {
    if (typeof entry === 'string') result[key] = entry;
    else problem(`${field}.${key} must be a string`, [field, key]);
  }
  return result;
}

function fallbackMap(value: unknown): Record<string, string[]> {
  const result: Record<string, string[]> = {};
  for (const [model, targets] of Object.entries((value ?? {}) as Record<string, unknown>)) {
    if (Array.isArray(targets) && targets.every((target) => typeof target === 'string'))
      result[model] = targets as string[];
    else problem(`fallbacks.${model} must be a list of canonical model IDs`, ['fallbacks', model]);
  }
  return result;
}

/** The file's providers; an entry with a problem is reported and left out. */
function providerMap(value: unknown): Record<string, ProviderSettings> {
  const result: Record<string, ProviderSettings> = {};
  for (const [vendor, entry] of Object.entries((value ?? {}) as Record<string, unknown>)) {
    const before = collecting?.length ?? 0;
    const settings = providerEntry(vendor, (entry ?? {}) as Record<string, unknown>);
    if ((collecting?.length ?? 0) === before) result[vendor] = settings;
  }
  return result;
}

/** Reports the setting at `at`, named by its path, as `text` says. */
const invalidSetting = (at: FieldPath, text: string): void => problem(`${fieldName(at)} ${text}`, at);

/** One provider of the file: its `baseUrl` and `apiKey`, or its `endpoints`, each problem reported. */
function providerEntry(vendor: string, settings: Record<string, unknown>): ProviderSettings {
  for (const [field, fieldValue] of Object.entries(settings)) {
    if (field === 'endpoints') continue;
    if (field !== 'baseUrl' && field !== 'apiKey')
      invalidSetting(['providers', vendor, field], 'is not a known setting (baseUrl, apiKey, endpoints)');
    else if (typeof fieldValue !== 'string') invalidSetting(['providers', vendor, field], 'must be a string');
  }
  if (typeof settings.baseUrl === 'string')
    checkUrl(`providers.${vendor}.baseUrl`, settings.baseUrl, ['providers', vendor, 'baseUrl']);
  let endpoints: EndpointSettings[] | undefined;
  if (settings.endpoints !== undefined) {
    if (!Array.isArray(settings.endpoints) || settings.endpoints.length === 0)
      invalidSetting(['providers', vendor, 'endpoints'], 'must be a non-empty list');
    else
      endpoints = settings.endpoints.map((raw: unknown, index) =>
        endpointEntry(['providers', vendor, 'endpoints', index], (raw ?? {}) as Record<string, unknown>, index),
      );
  }
  return {
    ...(settings.baseUrl === undefined ? {} : { baseUrl: settings.baseUrl as string }),
    ...(settings.apiKey === undefined ? {} : { apiKey: settings.apiKey as string }),
    ...(endpoints ? { endpoints } : {}),
  };
}

/** One endpoint of a provider's `endpoints` list, at `at` (its index its name by default), each problem reported. */
function endpointEntry(at: FieldPath, item: Record<string, unknown>, index: number): EndpointSettings {
  for (const field of Object.keys(item)) {
    if (!['baseUrl', 'apiKey', 'weight', 'name', 'auth'].includes(field))
      invalidSetting([...at, field], 'is not a known setting (baseUrl, apiKey, weight, name, auth)');
  }
  if (typeof item.baseUrl !== 'string') invalidSetting([...at, 'baseUrl'], 'must be a string');
  else checkUrl(`${fieldName(at)}.baseUrl`, item.baseUrl, [...at, 'baseUrl']);
  if (item.apiKey !== undefined && typeof item.apiKey !== 'string')
    invalidSetting([...at, 'apiKey'], 'must be a string');
  if (item.name !== undefined && typeof item.name !== 'string') invalidSetting([...at, 'name'], 'must be a string');
  if (item.weight !== undefined && (typeof item.weight !== 'number' || !(item.weight > 0)))
    invalidSetting([...at, 'weight'], 'must be a positive number');
  const auth = item.auth === undefined ? undefined : endpointAuth(item.auth, [...at, 'auth']);
  return {
    baseUrl: String(item.baseUrl).replace(/\/+$/, ''),
    apiKey: item.apiKey as string | undefined,
    weight: (item.weight as number | undefined) ?? 1,
    name: (item.name as string | undefined) ?? String(index),
    ...(auth ? { auth } : {}),
  };
}

/**
 * An endpoint's `auth`, checked as a plugin route's is (the same forms: `bearer`, `x-api-key`,
 * `{ header, prefix? }`, `{ query }`); a header name may be written in any case (HTTP's are not case
 * sensitive) and is sent in lower case. `undefined` when it does not fit, each problem reported at its
 * field, never quoting the value.
 */
function endpointAuth(value: unknown, at: FieldPath): AuthStyle | undefined {
  const auth =
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    typeof (value as { header?: unknown }).header === 'string'
      ? { ...value, header: (value as { header: string }).header.toLowerCase() }
      : value;
  const problems = authProblems(auth);
  for (const [suffix, text] of problems)
    problem(`${fieldName(at)}${suffix}: ${text}`, suffix ? [...at, suffix.slice(1)] : at);
  if (problems.length) return undefined;
  // One spelling per place, whatever the file's order of fields (it is part of the endpoint's identity across a
  // reload).
  const valid = auth as AuthStyle;
  if (typeof valid === 'string' || 'query' in valid) return typeof valid === 'string' ? valid : { query: valid.query };
  return valid.prefix === undefined ? { header: valid.header } : { header: valid.header, prefix: valid.prefix };
}

/** Names the setting, never its value: a URL may carry credentials. */
function checkUrl(name: string, value: string, at?: FieldPath): void {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return problem(`${name} is not a URL`, at);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') problem(`${name} must be an http:// or https:// URL`, at);
}

const atMost = (limit: number, value: number | undefined) => (value === undefined ? undefined : Math.min(limit, value));

function envInteger(env: NodeJS.ProcessEnv, name: string, min: number): number | undefined {
  const value = env[name];
  if (value === undefined || value === '') return undefined;
  if (/^\d+$/.test(value.trim()) && Number(value) >= min) return Number(value);
  problem(`${name} must be an integer >= ${min}, got '${value}'`);
  return undefined;
}

/** `LOG_LEVEL`, one of {@link LOG_LEVELS}; empty is unset (compose passes an unset variable as empty). */
function envLogLevel(env: NodeJS.ProcessEnv): string | undefined {
  const value = env.LOG_LEVEL?.trim();
  if (value === undefined || value === '') return undefined;
  if ((LOG_LEVELS as readonly string[]).includes(value)) return value;
  problem(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, got '${value}'`);
  return undefined;
}

/** Shortest admin token and static key (after `sk-`) accepted: guessing either must stay out of reach. */
export const MIN_SECRET_LENGTH = 32;

/**
 * The static keys of `GATEWAY_API_KEYS` (comma-separated, each `sk-` and 32 to 200 letters, digits,
 * `-` or `_`: a presented key longer than that is refused as malformed). A bad entry is named by its
 * position, never by its value.
 */
export function parseStaticKeys(value: string | undefined): string[] {
  if (!value) return [];
  const keys = value
    .split(',')
    .map((key) => key.trim())
    .filter(Boolean);
  const bad = keys.flatMap((key, index) => (/^sk-[A-Za-z0-9_-]{32,200}$/.test(key) ? [] : [index + 1]));
  const messages = bad.map(
    (entry) =>
      `GATEWAY_API_KEYS entry ${entry} is not a valid key: keys start with 'sk-' followed by ${MIN_SECRET_LENGTH} to 200 letters, digits, '-' or '_'`,
  );
  if (messages.length && !collecting) throw new ConfigError(messages);
  for (const message of messages) problem(message);
  return keys;
}

/**
 * A secret from the environment (`GATEWAY_ADMIN_TOKEN`, `GATEWAY_KEY_ID_SECRET`), refused when shorter
 * than {@link MIN_SECRET_LENGTH}; named, never shown.
 */
function secret(name: string, value: string | undefined): string | undefined {
  if (!value) return undefined;
  if (value.length < MIN_SECRET_LENGTH)
    problem(`${name} must be at least ${MIN_SECRET_LENGTH} characters long (generate one with: openssl rand -hex 32)`);
  return value;
}

/**
 * `GATEWAY_TRUSTED_PROXIES` (comma-separated) over the file's `server.trustedProxies`, checked as proxy-addr reads
 * them.
 */
function trustedProxies(env: NodeJS.ProcessEnv, fromFile: readonly string[] | undefined): string[] {
  const fromEnv = env.GATEWAY_TRUSTED_PROXIES;
  const list =
    fromEnv !== undefined && fromEnv !== ''
      ? fromEnv
          .split(',')
          .map((entry) => entry.trim())
          .filter(Boolean)
      : [...(fromFile ?? [])];
  const refusal = checkTrustedProxies(list);
  if (refusal)
    problem(
      `${fromEnv ? 'GATEWAY_TRUSTED_PROXIES' : 'server.trustedProxies'}: ${refusal}`,
      fromEnv ? undefined : ['server', 'trustedProxies'],
    );
  return list;
}

function authFailMode(value: string | undefined): 'open' | 'closed' | undefined {
  if (value === undefined || value === '') return undefined;
  if (value !== 'open' && value !== 'closed')
    throw new ConfigError(`GATEWAY_AUTH_FAIL_MODE must be open or closed, got '${value}'`);
  return value;
}

function parseEnvSize(name: string, value: string): number {
  try {
    return parseSize(value);
  } catch (error) {
    problem(`${name}: ${(error as Error).message}`);
    return 0;
  }
}

/**
 * The gateway's settings: the YAML config file (`GATEWAY_CONFIG`, default `config/gateway.yaml`) gives
 * the defaults, environment variables override them. Throws {@link ConfigError} listing every problem
 * found, each as an operator can act on it.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): GatewayConfig {
  const { config, problems } = inspectConfig(env, cwd);
  if (problems.length) throw new ConfigError(problems);
  return config;
}

export interface ConfigInspection {
  /** The settings, from the file without its invalid fields (their defaults instead), for further checks. */
  readonly config: GatewayConfig;
  /** Every problem found: fields of the file by line and column, never quoting the file's text. */
  readonly problems: readonly string[];
  /** Describes further problems of this file (alias targets, fallbacks) the same way. */
  describe(problems: readonly ConfigProblem[]): string[];
}

/** Like {@link loadConfig}, but runs every check and gives back all problems instead of throwing. */
export function inspectConfig(env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): ConfigInspection {
  const outer = collecting;
  collecting = [];
  try {
    return inspect(env, cwd, collecting);
  } finally {
    collecting = outer;
  }
}

function inspect(env: NodeJS.ProcessEnv, cwd: string, found: readonly ConfigProblem[]): ConfigInspection {
  const source = readConfigSource(env, cwd);
  const file = validateFile(source.raw);
  const redis = redisSettings(env, file);
  const timeouts = requestTimeouts(env, file);
  const maxConnections =
    envInteger(env, 'GATEWAY_MAX_CONNECTIONS', 1) ?? file.server?.maxConnections ?? defaultMaxConnections();
  // Built in this order, so that problems are listed in it.
  const config: GatewayConfig = {
    ...relaySettings(env, file),
    ...catalogSettings(env, cwd, file),
    redis,
    dataDir: resolve(cwd, env.GATEWAY_DATA_DIR ?? file.dataDir ?? 'data'),
    rateLimit: {
      max: envInteger(env, 'RATE_LIMIT_MAX', 1) ?? file.rateLimit?.max ?? 100,
      windowMs: envInteger(env, 'RATE_LIMIT_WINDOW_MS', 1) ?? file.rateLimit?.windowMs ?? 60_000,
    },
    ...keySettings(env),
    logLevel: envLogLevel(env) ?? file.logLevel ?? 'info',
    drainMs: envInteger(env, 'GATEWAY_DRAIN_MS', 0) ?? file.server?.drainMs ?? 120_000,
    ...timeouts,
    clientWriteTimeoutMs:
      envInteger(env, 'GATEWAY_CLIENT_WRITE_TIMEOUT_MS', 1) ?? file.server?.clientWriteTimeoutMs ?? 60_000,
    ...connectionCaps(env, file, maxConnections),
    ...credentialChecks(env, file),
    keyConcurrency: envInteger(env, 'GATEWAY_KEY_CONCURRENCY', 1) ?? file.server?.keyConcurrency,
    keyWebSockets: envInteger(env, 'GATEWAY_KEY_WEBSOCKETS', 1) ?? file.server?.keyWebSockets,
    webSocketIdleTimeoutMs:
      envInteger(env, 'GATEWAY_WEBSOCKET_IDLE_TIMEOUT_MS', 1) ?? file.server?.webSocketIdleTimeoutMs ?? 300_000,
    trustedProxies: trustedProxies(env, file.server?.trustedProxies),
    cache: cacheConfig(env, file.cache),
    guardrails: guardrailSettings(file.guardrails, problem),

    // Operations (metrics, reload).
    metricsPort: envInteger(env, 'METRICS_PORT', 0) ?? file.metrics?.port,
    tracing: tracingConfig(env, file.tracing, problem),
    access: accessSettings(env, file.access, problem),
    auditExport: env.GATEWAY_AUDIT_EXPORT || file.audit?.export || undefined,
  };
  const describe = (problems: readonly ConfigProblem[]) => problems.map((each) => source.reporter.describe(each));
  return { config, problems: describe(found), describe };
}

/**
 * The config file (`GATEWAY_CONFIG`, default `config/gateway.yaml`, required only when named), its problems named by
 * its path from `cwd` (or its absolute path, when outside `cwd`).
 */
function readConfigSource(env: NodeJS.ProcessEnv, cwd: string): ConfigSource {
  const path = resolve(cwd, env.GATEWAY_CONFIG ?? 'config/gateway.yaml');
  const fromCwd = relative(cwd, path);
  return readConfigFile(
    path,
    env.GATEWAY_CONFIG !== undefined,
    fromCwd.startsWith('..') || isAbsolute(fromCwd) ? path : fromCwd,
  );
}

/** Redis, when a URL (`REDIS_URL` over `redis.url`), sentinels or a cluster are set; else none. */
function redisSettings(env: NodeJS.ProcessEnv, file: FileSettings): RedisSettings | undefined {
  const redisUrl = env.REDIS_URL || file.redis?.url;
  if (redisUrl) checkRedisUrl(env, redisUrl);
  const redis: RedisSettings | undefined =
    redisUrl || file.redis?.sentinels?.length || file.redis?.cluster?.length
      ? {
          url: redisUrl,
          sentinels: file.redis?.sentinels,
          sentinelName: file.redis?.sentinelName,
          cluster: file.redis?.cluster,
        }
      : undefined;
  if (redis?.sentinels?.length && !redis.sentinelName)
    problem('redis.sentinels needs redis.sentinelName', ['redis', 'sentinels']);
  return redis;
}

function checkRedisUrl(env: NodeJS.ProcessEnv, redisUrl: string): void {
  if (!/^rediss?:\/\//.test(redisUrl)) problem('REDIS_URL must start with redis:// or rediss://');
  else if (!URL.canParse(redisUrl)) {
    // The URL's text is never quoted: its password is in it.
    const where = env.REDIS_URL ? { name: settingName(env, 'REDIS_URL') } : { name: 'redis.url', at: ['redis', 'url'] };
    const encoding = '# as %23, / as %2F, ? as %3F, @ as %40, % as %25';
    problem(
      `${where.name} is not a valid URL: write the user name and password percent-encoded (${encoding})`,
      where.at,
    );
  }
}

/** How long a client may take to send a request's headers, and the whole request: the first cannot be the longer. */
function requestTimeouts(
  env: NodeJS.ProcessEnv,
  file: FileSettings,
): Pick<GatewayConfig, 'headersTimeoutMs' | 'requestTimeoutMs'> {
  const headersTimeoutMs = envInteger(env, 'GATEWAY_HEADERS_TIMEOUT_MS', 1) ?? file.server?.headersTimeoutMs ?? 15_000;
  const requestTimeoutMs = envInteger(env, 'GATEWAY_REQUEST_TIMEOUT_MS', 1) ?? file.server?.requestTimeoutMs ?? 60_000;
  if (headersTimeoutMs > requestTimeoutMs) {
    problem(
      `the headers timeout (${headersTimeoutMs} ms) cannot be longer than the request timeout (${requestTimeoutMs} ms)`,
    );
  }
  return { headersTimeoutMs, requestTimeoutMs };
}

/**
 * Where the gateway listens and how it relays a request: the body and event sizes, the upstream timeouts, failover
 * and routing between endpoints, and the chat deadline.
 */
function relaySettings(
  env: NodeJS.ProcessEnv,
  file: FileSettings,
): Pick<
  GatewayConfig,
  | 'port'
  | 'host'
  | 'bodyLimitBytes'
  | 'upstreamTimeoutMs'
  | 'firstByteTimeoutMs'
  | 'idleTimeoutMs'
  | 'failover'
  | 'routing'
  | 'maxSseEventBytes'
  | 'chatDeadlineMs'
> {
  return {
    port: envInteger(env, 'PORT', 0) ?? file.server?.port ?? 8080,
    host: env.HOST || file.server?.host || '0.0.0.0',
    bodyLimitBytes: env.BODY_LIMIT
      ? parseEnvSize('BODY_LIMIT', env.BODY_LIMIT)
      : parseSize(file.server?.bodyLimit ?? '10mb'),
    upstreamTimeoutMs: envInteger(env, 'UPSTREAM_TIMEOUT_MS', 1) ?? file.server?.upstreamTimeoutMs ?? 300_000,
    firstByteTimeoutMs:
      envInteger(env, 'UPSTREAM_FIRST_BYTE_TIMEOUT_MS', 1) ?? file.upstream?.firstByteTimeoutMs ?? 60_000,
    idleTimeoutMs: envInteger(env, 'UPSTREAM_IDLE_TIMEOUT_MS', 1) ?? file.upstream?.idleTimeoutMs ?? 60_000,
    failover: {
      maxAttempts: atMost(5, envInteger(env, 'FAILOVER_MAX_ATTEMPTS', 1) ?? file.failover?.maxAttempts),
      failureThreshold: envInteger(env, 'FAILOVER_FAILURE_THRESHOLD', 1) ?? file.failover?.failureThreshold ?? 5,
      cooldownMs: envInteger(env, 'FAILOVER_COOLDOWN_MS', 1) ?? file.failover?.cooldownMs ?? 30_000,
    },
    routing: { affinity: envFlag(env, 'GATEWAY_ROUTING_AFFINITY', problem) ?? file.routing?.affinity ?? true },
    maxSseEventBytes: env.SSE_MAX_EVENT_BYTES
      ? parseEnvSize('SSE_MAX_EVENT_BYTES', env.SSE_MAX_EVENT_BYTES)
      : parseSize(file.server?.maxSseEventBytes ?? '16mb'),
    chatDeadlineMs: envInteger(env, 'CHAT_DEADLINE_MS', 1) ?? file.server?.chatDeadlineMs ?? 600_000,
  };
}

/** Where the plugins come from, and the file's providers, aliases and fallbacks over what the plugins declare. */
function catalogSettings(
  env: NodeJS.ProcessEnv,
  cwd: string,
  file: FileSettings,
): Pick<GatewayConfig, 'manifestPath' | 'pluginPath' | 'providers' | 'aliases' | 'fallbacks'> {
  return {
    manifestPath:
      env.GATEWAY_MANIFEST || file.manifest ? resolve(cwd, (env.GATEWAY_MANIFEST || file.manifest)!) : BUNDLED_MANIFEST,
    pluginPath: (env.GATEWAY_PLUGIN_PATH ?? '')
      .split(':')
      .filter(Boolean)
      .map((directory) => resolve(cwd, directory)),
    providers: providerMap(file.providers),
    aliases: stringMap('aliases', file.aliases),
    fallbacks: fallbackMap(file.fallbacks),
  };
}

/**
 * The admin token, the static keys and the secret of their IDs, and how keys' limits are kept: work they cannot
 * bound, end users per key, limit alerts.
 */
function keySettings(
  env: NodeJS.ProcessEnv,
): Pick<
  GatewayConfig,
  'adminToken' | 'apiKeys' | 'keyIdSecret' | 'limitsAllowUnbounded' | 'endUsersPerKey' | 'alerts'
> {
  return {
    adminToken: secret('GATEWAY_ADMIN_TOKEN', env.GATEWAY_ADMIN_TOKEN),
    apiKeys: parseStaticKeys(env.GATEWAY_API_KEYS),
    keyIdSecret: secret('GATEWAY_KEY_ID_SECRET', env.GATEWAY_KEY_ID_SECRET),
    limitsAllowUnbounded: envFlag(env, 'GATEWAY_LIMITS_ALLOW_UNBOUNDED', problem) ?? false,
    endUsersPerKey: envInteger(env, 'GATEWAY_END_USERS_PER_KEY', 1) ?? 10_000,
    alerts: alertSettings(env, problem),
  };
}

/** Open client connections at most, in all and per address, and requests still sending their body per address. */
function connectionCaps(
  env: NodeJS.ProcessEnv,
  file: FileSettings,
  maxConnections: number,
): Pick<GatewayConfig, 'maxConnections' | 'maxConnectionsPerAddress' | 'maxPendingRequestsPerAddress'> {
  return {
    maxConnections,
    maxConnectionsPerAddress: perAddressCap(
      env,
      file,
      maxConnections,
      'GATEWAY_MAX_CONNECTIONS_PER_ADDRESS',
      'maxConnectionsPerAddress',
      shareOf(maxConnections, 10, 16),
    ),
    maxPendingRequestsPerAddress: perAddressCap(
      env,
      file,
      maxConnections,
      'GATEWAY_MAX_PENDING_REQUESTS_PER_ADDRESS',
      'maxPendingRequestsPerAddress',
      shareOf(maxConnections, 20, 8),
    ),
  };
}

/**
 * A per-address cap: the environment's over the file's over `fallback` (at least 1); one above `maxConnections` is a
 * problem, and `fallback` stands for it.
 */
function perAddressCap(
  env: NodeJS.ProcessEnv,
  file: FileSettings,
  maxConnections: number,
  envName: string,
  fileName: 'maxConnectionsPerAddress' | 'maxPendingRequestsPerAddress',
  fallback: number,
): number {
  const fromEnv = envInteger(env, envName, 1);
  const value = fromEnv ?? file.server?.[fileName] ?? Math.max(1, fallback);
  if (value <= maxConnections) return value;
  if (fromEnv === undefined)
    problem(`server.${fileName} (${value}) cannot be more than the open connections at most (${maxConnections})`, [
      'server',
      fileName,
    ]);
  else problem(`${envName} (${value}) cannot be more than the open connections at most (${maxConnections})`);
  return Math.max(1, fallback);
}

/**
 * A per-address default: `1/divisor` of the global cap, raised to `least` where that is small, but never above a
 * quarter of the cap, so that however small it is, two addresses leave half of it free.
 */
const shareOf = (maxConnections: number, divisor: number, least: number): number =>
  Math.max(Math.floor(maxConnections / divisor), Math.min(least, Math.floor(maxConnections / 4)));

/**
 * How credentials are checked when they fail: failed ones per address and minute, and what is answered while the
 * key store cannot be read.
 */
function credentialChecks(
  env: NodeJS.ProcessEnv,
  file: FileSettings,
): Pick<GatewayConfig, 'authFailuresPerMinute' | 'authFailMode' | 'authGraceMs'> {
  return {
    authFailuresPerMinute:
      envInteger(env, 'GATEWAY_AUTH_FAILURES_PER_MINUTE', 1) ?? file.server?.authFailuresPerMinute ?? 20,
    authFailMode: authFailMode(env.GATEWAY_AUTH_FAIL_MODE) ?? file.server?.authFailMode ?? 'closed',
    authGraceMs: envInteger(env, 'GATEWAY_AUTH_GRACE_MS', 0) ?? file.server?.authGraceMs ?? 30_000,
  };
}

/**
 * The response cache's settings: on when a TTL above 0 is set (`GATEWAY_CACHE_TTL_S` over
 * `cache.ttlSeconds`), else undefined.
 */
function cacheConfig(
  env: NodeJS.ProcessEnv,
  file: { ttlSeconds?: number; maxEntryBytes?: string | number; maxBytes?: string | number } | undefined,
): CacheConfig | undefined {
  const ttlSeconds = envInteger(env, 'GATEWAY_CACHE_TTL_S', 0) ?? file?.ttlSeconds ?? 0;
  const size = (name: string, fromFile: string | number | undefined, fallback: string) =>
    env[name] ? parseEnvSize(name, env[name]!) : parseSize(fromFile ?? fallback);
  const maxEntryBytes = size('GATEWAY_CACHE_MAX_ENTRY_BYTES', file?.maxEntryBytes, '1mb');
  const maxBytes = size('GATEWAY_CACHE_MAX_BYTES', file?.maxBytes, '64mb');
  if (maxEntryBytes > maxBytes)
    problem(`the cache's largest entry (${maxEntryBytes} bytes) cannot be more than its bytes at most (${maxBytes})`, [
      'cache',
      'maxEntryBytes',
    ]);
  return ttlSeconds > 0 ? { ttlSeconds, maxEntryBytes, maxBytes } : undefined;
}

/**
 * Half the process's open-file limit (each proxied request holds a client and an upstream socket,
 * besides Redis and the journal), so the cap refuses cleanly before `accept` starts failing; 512 where
 * the limit cannot be read.
 */
export function defaultMaxConnections(limitsText?: string): number {
  let text = limitsText;
  if (text === undefined) {
    try {
      text = readFileSync('/proc/self/limits', 'utf8');
    } catch {
      return 512;
    }
  }
  const soft = /^Max open files\s+(\d+|unlimited)/m.exec(text)?.[1];
  if (!soft || soft === 'unlimited') return 512;
  return Math.max(16, Math.floor(Number(soft) / 2));
}

/** A provider's base URL and key: env `<PREFIX>_BASE_URL` / `<PREFIX>_API_KEY` over the config file. */
export function providerSettings(
  config: GatewayConfig,
  vendor: string,
  envPrefix: string,
  env: NodeJS.ProcessEnv = process.env,
): ProviderSettings {
  const fromFile = config.providers[vendor] ?? {};
  const baseUrl = env[`${envPrefix}_BASE_URL`] || fromFile.baseUrl;
  if (baseUrl) checkUrl(`${envPrefix}_BASE_URL`, baseUrl);
  return { baseUrl: baseUrl?.replace(/\/+$/, ''), apiKey: env[`${envPrefix}_API_KEY`] || fromFile.apiKey };
}

/**
 * A provider's upstream endpoints: env `<PREFIX>_BASE_URL` (comma-separated for several) with
 * `<PREFIX>_API_KEY` (one key for all, or a comma-separated list of the same length) over the config
 * file's `endpoints` list or `baseUrl`/`apiKey`. Empty when the provider is not configured.
 */
export function providerEndpointSettings(
  config: GatewayConfig,
  vendor: string,
  envPrefix: string,
  env: NodeJS.ProcessEnv = process.env,
): EndpointSettings[] {
  const envUrls = env[`${envPrefix}_BASE_URL`];
  const envKeys = env[`${envPrefix}_API_KEY`];
  const fromFile = config.providers[vendor] ?? {};
  if (!envUrls && fromFile.endpoints) {
    const keys = keyList(envKeys, fromFile.endpoints.length, `${envPrefix}_API_KEY`);
    return fromFile.endpoints.map((endpoint, index) => (keys ? { ...endpoint, apiKey: keys[index] } : endpoint));
  }
  const urls = (envUrls || fromFile.baseUrl || '')
    .split(',')
    .map((url) => url.trim())
    .filter(Boolean);
  if (urls.length === 0) return [];
  const keys = keyList(
    envKeys || fromFile.apiKey,
    urls.length,
    envKeys ? `${envPrefix}_API_KEY` : `providers.${vendor}.apiKey`,
  );
  return urls.map((url, index) => {
    checkUrl(`${envPrefix}_BASE_URL`, url);
    return { baseUrl: url.replace(/\/+$/, ''), apiKey: keys?.[index], weight: 1, name: String(index) };
  });
}

/** One key for every endpoint, or a comma-separated list of one per endpoint. */
function keyList(text: string | undefined, count: number, name: string): (string | undefined)[] | undefined {
  if (!text) return undefined;
  const keys = text.split(',').map((key) => key.trim() || undefined);
  if (keys.length === 1) return Array.from({ length: count }, () => keys[0]);
  if (keys.length !== count)
    throw new ConfigError(
      `${name} lists ${keys.length} keys for ${count} endpoints: give one key, or one per endpoint`,
    );
  return keys;
}
