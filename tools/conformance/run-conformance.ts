import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { isDeepStrictEqual } from 'node:util';
import {
  startMockUpstream,
  type MockUpstream,
  type RecordedRequest,
} from '../../mock-upstream/mock-upstream-server.ts';
import { loadConfig } from '../../src/config/gateway-config.ts';
import { WIRE_FORMATS } from '../../src/core/formats/index.ts';
import { startGateway, type Gateway } from '../../src/server/gateway.ts';
import { createLogger } from '../../src/core/logger.ts';
import { envPrefixOf } from '../../src/data-plane/upstream/endpoint-pool.ts';
import { loadFolder, pluginFolders, type PluginFolder } from '../../src/plugins/load-plugins.ts';
import { checkGuardrail } from './guardrail-conformance.ts';
import { ModelRegistry } from '../../src/core/model-registry.ts';
import type {
  AdaptedRequest,
  AdapterRequest,
  AuthStyle,
  GuardrailPlugin,
  ModelDeclaration,
  ProviderPlugin,
  RouteAdapter,
  RouteId,
  TokenUsage,
  UpstreamRouteId,
  WireFormat,
} from '../../src/plugins/plugin-contract.ts';
import { EVENTS } from '../../src/core/diagnostics.ts';
import { SseSplitter } from '../../src/data-plane/sse/sse-relay.ts';
import { ANSWER_SHAPE } from './live-vendor-check.ts';
import { Writable } from 'node:stream';
import {
  applyFixups,
  decodeSse,
  encodeSse,
  eventDiff,
  fixtureEvents,
  readFixtures,
  sameEvents,
  withoutInstanceFields,
  type RecordedFixture,
  type RecordedStream,
} from './recorded-fixtures.ts';

/** A multi-line detail under a failure line. */
const indent = (text: string) =>
  text
    .split('\n')
    .map((line) => `      ${line}`)
    .join('\n');
import { clientRequest, CONFORMANCE_INPUT, STANDARD_PATHS, STREAMING_ROUTES } from './route-requests.ts';
import { routePath } from '../../src/core/route-table.ts';

/** One broken rule: which plugin, which model (when the rule is about one), which rule, and what went wrong. */
export interface ConformanceFailure {
  readonly plugin: string;
  readonly model?: string;
  readonly rule: string;
  readonly message: string;
}

export interface PluginConformance {
  readonly vendor: string;
  readonly directory: string;
  /** How many checks ran. */
  checks: number;
  readonly failures: ConformanceFailure[];
  /**
   * What was checked otherwise than against the mock upstream's standard answers, one line each, e.g.
   * `model 'acme/acme-1', chat-completions (stream): usage: from recorded fixture 'billed-stream' (…)`.
   */
  readonly notes: string[];
}

export interface ConformanceReport {
  readonly plugins: PluginConformance[];
  /** Failures that belong to no single plugin under test (a plugin that does not load, the catalog). */
  readonly failures: ConformanceFailure[];
  readonly ok: boolean;
}

export interface ConformanceOptions {
  /** The repository manifest (built-in plugins), loaded as the gateway loads it. */
  readonly manifestPath: string;
  /** Further plugin directories, as in `GATEWAY_PLUGIN_PATH`. */
  readonly pluginPath?: readonly string[];
  /** The vendors to check; every loaded plugin when absent. */
  readonly vendors?: readonly string[];
  /** Told every line the gateway under test logs, as it logs it (`plugin test --verbose`). */
  readonly log?: (line: string) => void;
}

/** `plugin 'acme', model 'acme/acme-1', rule 'upstream-path': …` */
export function formatFailure(failure: ConformanceFailure): string {
  return `plugin '${failure.plugin}'${failure.model ? `, model '${failure.model}'` : ''}, rule '${failure.rule}': ${failure.message}`;
}

const CLIENT_KEY = 'sk-conformance-client-0001-0123456789abcdef';
/**
 * The gateway's own code, source or compiled (`src/` beside `tools/`), whose stack frames a fault's line leaves out.
 */
const GATEWAY_SOURCE = fileURLToPath(new URL('../../src/', import.meta.url));
/** What GW_ERR_PLUGIN_FAULT's detail says, in a JSON answer or an in-band stream error. */
const PLUGIN_FAULT = /Gateway plugin '([^']+)' failed in its hook '([^']+)'/;
const UPSTREAM_KEY = 'conformance-upstream-key';
/** Prompt tokens the mock reports as cached, so extractors are checked on the cached figure too. */
const CACHED_TOKENS = 4;

interface Subject {
  readonly plugin: ProviderPlugin;
  readonly report: PluginConformance;
}

/** One request to drive and what the gateway must do with it. */
interface Exchange {
  readonly subject: Subject;
  /** Canonical ID of the concrete model the request must reach. */
  readonly canonicalId: string;
  readonly model: ModelDeclaration;
  readonly route: RouteId;
  readonly requestedId: string;
  readonly stream: boolean;
  readonly alias?: string;
  /**
   * The recorded answer (with its usage) the mock upstream gives in place of its standard one: where the
   * plugin reads usage with its own extractor, whose vendor shape only a recording shows.
   */
  readonly recording?: RecordedFixture & { readonly usage: TokenUsage };
}

/**
 * Drives every declared route of every declared model and alias of the plugins under test through a
 * real gateway in this process, in front of the mock upstream, and checks what reached the upstream,
 * what came back, the catalog, the stream fixups (on the plugins' recorded fixtures) and the usage
 * recorded: against what the mock reported, or, where the plugin reads a route with its own usage
 * extractor and ships a recorded fixture with a `usage` for it, against that fixture, the mock then
 * answering with the recorded bytes (see `recordingFor`). Never throws for a plugin's fault: every
 * broken rule is a failure in the report.
 */
export async function runConformance(options: ConformanceOptions): Promise<ConformanceReport> {
  const failures: ConformanceFailure[] = [];
  const done = (plugins: PluginConformance[]): ConformanceReport => ({
    plugins,
    failures,
    ok: failures.length === 0 && plugins.every((plugin) => plugin.failures.length === 0),
  });

  let folders: PluginFolder[];
  try {
    folders = pluginFolders(options.manifestPath, options.pluginPath);
  } catch (error) {
    failures.push({
      plugin: (error as { plugin?: string }).plugin ?? 'manifest',
      rule: 'load',
      message: (error as Error).message,
    });
    return done([]);
  }
  const tested = options.vendors ?? folders.map((folder) => folder.name);
  const reports = new Map<string, PluginConformance>();
  for (const vendor of tested) {
    const folder = folders.find((candidate) => candidate.name === vendor);
    if (!folder) failures.push({ plugin: vendor, rule: 'load', message: 'no manifest lists it' });
    else reports.set(vendor, { vendor, directory: folder.directory, checks: 0, failures: [], notes: [] });
  }

  const plugins: ProviderPlugin[] = [];
  const guardrails: GuardrailPlugin[] = [];
  for (const folder of folders) {
    try {
      const loaded = await loadFolder(folder);
      if (loaded.kind === 'provider') plugins.push(loaded.plugin);
      else guardrails.push(loaded.guardrail);
    } catch (error) {
      const failure = { plugin: folder.name, rule: 'load', message: (error as Error).message };
      (reports.get(folder.name)?.failures ?? failures).push(failure);
    }
  }
  // Built only to check the plugins together (duplicate models, aliases); the gateway builds its own.
  try {
    new ModelRegistry(plugins);
  } catch (error) {
    const plugin = (error as { plugin?: string }).plugin ?? 'registry';
    (reports.get(plugin)?.failures ?? failures).push({ plugin, rule: 'load', message: (error as Error).message });
    return done([...reports.values()]);
  }
  if (failures.length || [...reports.values()].some((report) => report.failures.length))
    return done([...reports.values()]);
  // Guardrail plugins are checked on their examples, in this process; providers through a gateway.
  for (const guardrail of guardrails) {
    const report = reports.get(guardrail.guardrail);
    if (report) checkGuardrail(guardrail, report);
  }
  if (!plugins.some((plugin) => reports.has(plugin.vendor))) return done([...reports.values()]);

  const keyPlaces = plugins.flatMap((plugin) =>
    Object.values(plugin.routes).flatMap((route) => (route && typeof route.auth === 'object' ? [route.auth] : [])),
  );
  const mock = await startMockUpstream({ apiKey: UPSTREAM_KEY, cachedTokens: CACHED_TOKENS, keyPlaces });
  const dataDir = await mkdtemp(join(tmpdir(), 'gateway-conformance-'));
  let gateway: Gateway | undefined;
  let driver: Driver | undefined;
  try {
    const env: NodeJS.ProcessEnv = {
      PORT: '0',
      HOST: '127.0.0.1',
      GATEWAY_MANIFEST: resolve(options.manifestPath),
      GATEWAY_PLUGIN_PATH: (options.pluginPath ?? []).map((directory) => resolve(directory)).join(':'),
      GATEWAY_DATA_DIR: dataDir,
      GATEWAY_API_KEYS: CLIENT_KEY,
      RATE_LIMIT_MAX: '1000000',
      ...Object.fromEntries(
        plugins.flatMap((plugin) => [
          [`${envPrefixOf(plugin)}_BASE_URL`, mock.url],
          [`${envPrefixOf(plugin)}_API_KEY`, UPSTREAM_KEY],
        ]),
      ),
    };
    // The gateway's log, kept so that a plugin fault's line is shown with the failure it explains.
    const logLines: string[] = [];
    const logStream = new Writable({
      write(chunk: Buffer, _encoding, done) {
        for (const line of chunk.toString('utf8').split('\n')) {
          if (line === '') continue;
          logLines.push(line);
          options.log?.(line);
        }
        done();
      },
    });
    // Run from an empty directory so no operator config file (alias overrides) colours the result.
    gateway = await startGateway(loadConfig(env, dataDir), env, createLogger('info', logStream));
    driver = new Driver(gateway, mock, logLines);
    await driver.checkCatalog(plugins, reports, failures);
    for (const plugin of plugins) {
      const report = reports.get(plugin.vendor);
      if (!report) continue;
      const subject = { plugin, report };
      let fixtures: RecordedFixture[] = [];
      const malformed: string[] = [];
      try {
        fixtures = readFixtures(report.directory, malformed);
      } catch (error) {
        malformed.push((error as Error).message);
      }
      for (const message of malformed) report.failures.push({ plugin: plugin.vendor, rule: 'fixture', message });
      const usable: RecordedFixture[] = [];
      for (const fixture of fixtures) {
        const problem = fixtureProblem(plugin, fixture);
        if (problem)
          report.failures.push({
            plugin: plugin.vendor,
            model: fixture.model,
            rule: 'fixture',
            message: `fixture '${fixture.name}' on ${fixture.route}: ${problem}`,
          });
        else usable.push(fixture);
      }
      for (const exchange of declaredExchanges(subject))
        await driver.drive({ ...exchange, recording: recordingFor(plugin, exchange, usable) });
      for (const fixture of usable) if (fixture.stream) await driver.replay(subject, fixture);
    }
  } catch (error) {
    failures.push({ plugin: 'gateway', rule: 'start', message: (error as Error).message });
  } finally {
    driver?.close();
    await gateway?.close();
    await mock.close();
    await rm(dataDir, { recursive: true, force: true });
  }
  return done([...reports.values()]);
}

/** Every model ID spelling a route accepts for a model, from the declaration alone. */
function spellings(plugin: ProviderPlugin, model: ModelDeclaration, route: RouteId): string[] {
  const forms = route === 'chat' ? ['prefixed'] : (plugin.routes[route]?.modelIds ?? ['prefixed']);
  const names = [model.id, ...(model.alternateIds ?? [])];
  return forms.flatMap((form) => (form === 'prefixed' ? names.map((name) => `${plugin.vendor}/${name}`) : names));
}

const canonicalOf = (plugin: ProviderPlugin, declared: string): ModelDeclaration | undefined =>
  plugin.models.find((model) =>
    [model.id, ...(model.alternateIds ?? [])].some((name) => `${plugin.vendor}/${name}` === declared),
  );

/**
 * The index of the plugin's usage extractor that reads a model's answers on an upstream route; -1 for the standard one.
 */
function readerIndex(plugin: ProviderPlugin, model: ModelDeclaration, route: UpstreamRouteId): number {
  return (plugin.usageExtractors ?? []).findIndex(
    (declaration) =>
      declaration.route === route &&
      (!declaration.models || declaration.models.some((declared) => canonicalOf(plugin, declared) === model)),
  );
}

/** Why a fixture cannot be replayed against the plugin, or undefined when it can. */
function fixtureProblem(plugin: ProviderPlugin, fixture: RecordedFixture): string | undefined {
  const route = plugin.routes[fixture.route];
  const model = canonicalOf(plugin, fixture.model);
  if (fixture.stream) {
    if (!route || !STREAMING_ROUTES.includes(fixture.route))
      return `'${fixture.route}' is not a streaming route of the plugin`;
    if (route.adapter && !route.adapter.stream)
      return `routes.${fixture.route}.adapter has no stream mapping: the vendor's streams are never served`;
    if (!model?.routes.includes(fixture.route))
      return `'${fixture.model}' is not a model of the plugin on ${fixture.route}`;
    return undefined;
  }
  if (!route) return `'${fixture.route}' is not a route of the plugin`;
  if (!WIRE_FORMATS[route.format].consumesTokens)
    return `answers on ${fixture.route} (${route.format}) carry no usage to check`;
  const viaChat = model?.routes.includes('chat') && plugin.nativeChat?.route === fixture.route;
  if (!model?.routes.includes(fixture.route) && !viaChat)
    return `'${fixture.model}' is not a model of the plugin on ${fixture.route}`;
  return undefined;
}

/**
 * The recorded answer that stands in for the mock upstream's standard one in an exchange: a fixture with
 * usage, recorded on the exchange's upstream route in its mode (JSON or stream; native chat is JSON),
 * from a model that the same plugin-declared usage extractor reads (the exchange's own model first), or
 * on an adapted route from any model of it (the adapter reads them all). None where the standard
 * extractor reads a forwarded route: the mock speaks the standard shapes.
 */
function recordingFor(
  plugin: ProviderPlugin,
  exchange: Exchange,
  fixtures: readonly RecordedFixture[],
): Exchange['recording'] {
  const route: UpstreamRouteId = exchange.route === 'chat' ? plugin.nativeChat!.route : exchange.route;
  const stream = exchange.route === 'chat' ? false : exchange.stream;
  const reader = readerIndex(plugin, exchange.model, route);
  if (plugin.routes[route]?.adapter && reader < 0) {
    const recorded = fixtures.filter(
      (fixture): fixture is RecordedFixture & { usage: TokenUsage } =>
        fixture.usage !== undefined && fixture.route === route && fixture.stream === stream,
    );
    return recorded.find((fixture) => canonicalOf(plugin, fixture.model) === exchange.model) ?? recorded[0];
  }
  if (reader < 0) return undefined;
  const candidates = fixtures.filter((fixture): fixture is RecordedFixture & { usage: TokenUsage } => {
    const recordedFrom = canonicalOf(plugin, fixture.model);
    return (
      fixture.usage !== undefined &&
      fixture.route === route &&
      fixture.stream === stream &&
      recordedFrom !== undefined &&
      readerIndex(plugin, recordedFrom, route) === reader
    );
  });
  return candidates.find((fixture) => canonicalOf(plugin, fixture.model) === exchange.model) ?? candidates[0];
}

type MockAnswer = { kind: 'status'; status: number; body: string; headers: Record<string, string> };

/** What the mock upstream sends for a recorded stream, given its bytes. */
const streamAnswer = (bytes: string): MockAnswer => ({
  kind: 'status',
  status: 200,
  body: bytes,
  headers: { 'content-type': 'text/event-stream' },
});

/** What the mock upstream sends for a recorded answer (a `.sse` recording's bytes as they were). */
function recordedAnswer(fixture: RecordedFixture, format: WireFormat): MockAnswer {
  if (!fixture.stream)
    return { kind: 'status', status: 200, body: fixture.body, headers: { 'content-type': 'application/json' } };
  return streamAnswer(fixture.sse ?? encodeSse(fixtureEvents(fixture.chunks, format)));
}

/** Each model on each of its routes in each spelling, JSON and (where the route streams) stream; then each alias. */
function declaredExchanges(subject: Subject): Exchange[] {
  const { plugin } = subject;
  const modes = (route: RouteId) => (STREAMING_ROUTES.includes(route as UpstreamRouteId) ? [false, true] : [false]);
  const exchanges: Exchange[] = [];
  for (const model of plugin.models) {
    const canonicalId = `${plugin.vendor}/${model.id}`;
    for (const route of model.routes) {
      for (const requestedId of spellings(plugin, model, route)) {
        for (const stream of modes(route)) exchanges.push({ subject, canonicalId, model, route, requestedId, stream });
      }
    }
  }
  for (const alias of plugin.aliases ?? []) {
    const model = canonicalOf(plugin, alias.target);
    if (!model) continue;
    for (const route of alias.routes) {
      for (const stream of modes(route)) {
        exchanges.push({
          subject,
          canonicalId: `${plugin.vendor}/${model.id}`,
          model,
          route,
          requestedId: alias.id,
          stream,
          alias: alias.id,
        });
      }
    }
  }
  return exchanges;
}

interface Answer {
  readonly status: number;
  readonly contentType: string;
  readonly body: Buffer;
}

type Totals = { requests: number; inputTokens: number; outputTokens: number; cachedTokens: number };

class Driver {
  private readonly reported = new Set<string>();
  /** How each exchange the gateway recorded ended, by request id. */
  private readonly outcomes = new Map<string, string>();
  private readonly unsubscribe: () => void;
  private sequence = 0;

  constructor(
    private readonly gateway: Gateway,
    private readonly mock: MockUpstream,
    /** Every line the gateway logged so far. */
    private readonly logLines: readonly string[],
  ) {
    this.unsubscribe = EVENTS.exchangeRecorded.subscribe(
      gateway.source,
      ({ exchange, record }) => void this.outcomes.set(exchange.requestId, record.outcome),
    );
  }

  close(): void {
    this.unsubscribe();
  }

  /** A request id of the suite's own, so that the gateway's log lines and records of the request can be found. */
  private nextRequestId(): string {
    this.sequence += 1;
    return `conformance-${this.sequence}`;
  }

  private async send(method: 'GET' | 'POST', path: string, body?: unknown, requestId?: string): Promise<Answer> {
    const response = await fetch(`${this.gateway.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${CLIENT_KEY}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...(requestId === undefined ? {} : { 'x-request-id': requestId }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return {
      status: response.status,
      contentType: response.headers.get('content-type') ?? '',
      body: Buffer.from(await response.arrayBuffer()),
    };
  }

  /** The error line the gateway logged for a request's plugin fault, with the start of its stack, to show inline. */
  private faultLog(requestId: string): string {
    const line = this.logLines
      .map((text) => {
        try {
          return JSON.parse(text) as {
            level?: number;
            request_id?: string;
            msg?: string;
            err?: { type?: string; message?: string; stack?: string };
          };
        } catch {
          return undefined;
        }
      })
      .find((entry) => entry?.level === 50 && entry.request_id === requestId);
    if (!line) return ' (the gateway logged no error line for it)';
    // The plugin's own frames (the gateway's, which called the hook, say nothing to its author).
    const frames = (line.err?.stack ?? '')
      .split('\n')
      .filter(
        (frame) =>
          frame.trim().startsWith('at ') &&
          ![GATEWAY_SOURCE, '(node:', '<anonymous>', '/node_modules/'].some((part) => frame.includes(part)),
      )
      .slice(0, 3);
    return `; the gateway logged: ${line.msg}: ${line.err?.type ?? 'Error'}: ${line.err?.message ?? ''}${frames.map((frame) => `\n${frame.trim().replace(/^/, '        ')}`).join('')}`;
  }

  private async totals(canonicalId: string): Promise<Totals> {
    await this.gateway.flushUsage();
    const row = (await this.gateway.usage.query({ groupBy: 'model' })).find(
      (candidate) => candidate.model === canonicalId,
    );
    return {
      requests: row?.requests ?? 0,
      inputTokens: row?.input_tokens ?? 0,
      outputTokens: row?.output_tokens ?? 0,
      cachedTokens: row?.cached_tokens ?? 0,
    };
  }

  /** The usage recorded for one more request against the model, once it is stored. */
  private async recordedUsage(canonicalId: string, before: Totals): Promise<TokenUsage | undefined> {
    for (let attempt = 0; attempt < 200; attempt += 1) {
      const after = await this.totals(canonicalId);
      if (after.requests > before.requests) {
        return {
          inputTokens: after.inputTokens - before.inputTokens,
          outputTokens: after.outputTokens - before.outputTokens,
          cachedTokens: after.cachedTokens - before.cachedTokens,
        };
      }
      await sleep(50);
    }
    return undefined;
  }

  /** The outcome the gateway recorded for a request, once it did. */
  private async outcomeOf(requestId: string): Promise<string | undefined> {
    for (let attempt = 0; attempt < 200 && !this.outcomes.has(requestId); attempt += 1) await sleep(10);
    return this.outcomes.get(requestId);
  }

  /** The catalog must hold, per plugin in manifest order, its listed aliases then its listed models. */
  async checkCatalog(
    plugins: readonly ProviderPlugin[],
    reports: ReadonlyMap<string, PluginConformance>,
    failures: ConformanceFailure[],
  ): Promise<void> {
    const answer = await this.send('GET', '/v1/models');
    let ids: string[] = [];
    try {
      ids = (JSON.parse(answer.body.toString('utf8')) as { data: { id: string }[] }).data.map((entry) => entry.id);
    } catch {
      failures.push({
        plugin: 'gateway',
        rule: 'catalog',
        message: `GET /v1/models answered ${answer.status} without a model list`,
      });
      return;
    }
    let position = 0;
    for (const plugin of plugins) {
      const expected = [
        ...(plugin.aliases ?? []).filter((alias) => alias.listed !== false).map((alias) => alias.id),
        ...plugin.models.filter((model) => model.listed).map((model) => `${plugin.vendor}/${model.id}`),
      ];
      const actual = ids.slice(position, position + expected.length);
      const report = reports.get(plugin.vendor);
      if (report) {
        report.checks += 1;
        if (!isDeepStrictEqual(actual, expected)) {
          report.failures.push({
            plugin: plugin.vendor,
            rule: 'catalog',
            message: `GET /v1/models must list ${JSON.stringify(expected)} at positions ${position + 1}-${position + expected.length} (manifest order: listed aliases, then listed models), got ${JSON.stringify(actual)}`,
          });
        }
        const hidden = plugin.models
          .filter((model) => !model.listed)
          .map((model) => `${plugin.vendor}/${model.id}`)
          .filter((id) => ids.includes(id));
        if (hidden.length)
          report.failures.push({
            plugin: plugin.vendor,
            rule: 'catalog',
            message: `hidden model(s) ${hidden.join(', ')} must not be listed`,
          });
      }
      position += expected.length;
    }
  }

  /**
   * Sends one declared request and checks it end to end. Every rule is checked and reported on its
   * own; a rule that needs another's result is skipped when that one failed (the answer's rules need
   * the request to have reached the declared path, since the mock answers nowhere else).
   */
  async drive(exchange: Exchange): Promise<void> {
    const { subject, canonicalId, model, route, requestedId, stream, alias, recording } = exchange;
    const { plugin, report } = subject;
    report.checks += 1;
    const what = `${route === 'chat' ? 'native chat' : route}${stream ? ' (stream)' : ''} with '${requestedId}'`;
    const fail = (rule: string, message: string) => {
      // One failure per model, route and rule is enough to act on (not one per spelling and mode); a
      // missing recording is one per mode (each mode needs its own).
      const key = `${plugin.vendor} ${canonicalId} ${route} ${rule}${rule === 'fixture' ? ` ${stream}` : ''}`;
      if (this.reported.has(key)) return;
      this.reported.add(key);
      report.failures.push({ plugin: plugin.vendor, model: canonicalId, rule, message: `${what}: ${message}` });
    };
    const upstreamRouteId: UpstreamRouteId = route === 'chat' ? plugin.nativeChat!.route : route;
    const upstreamRoute = plugin.routes[upstreamRouteId]!;
    // An adapted route's requests are the adapter's (on /v1/chat, the native chat adapter's, to the same vendor).
    const adapter = route === 'chat' ? undefined : upstreamRoute.adapter;
    const expectedModel = model.upstreamModels?.[route] ?? model.upstreamModel ?? model.id;
    const resolutionRule = alias ? 'alias' : model.listed ? 'routing' : 'hidden-model';
    const requestId = this.nextRequestId();
    const body = clientRequest(route, requestedId, stream);

    this.mock.reset();
    if (adapter && stream && !adapter.stream) {
      const answer = await this.send('POST', routePath(route), body, requestId);
      if (answer.status !== 400)
        fail(
          'stream',
          `routes.${route}.adapter has no stream mapping, so a stream must be refused with a 400; the gateway answered ${answer.status}`,
        );
      return;
    }
    if (upstreamRoute.adapter && !recording) {
      const mode =
        route === 'chat' || !stream
          ? `a JSON answer (<name>.body.json, "stream": false)`
          : 'a stream (<name>.sse, its bytes with their event names)';
      return fail(
        'fixture',
        `routes.${upstreamRouteId} is adapted: the mock upstream does not speak the vendor's format, so the suite answers with a recording: add ${mode} of a model on ${upstreamRouteId}, with its usage, under __fixtures__ (docs/plugins.md, "Recorded fixtures")`,
      );
    }
    if (recording) {
      this.mock.enqueue(recordedAnswer(recording, upstreamRoute.format));
      const reads =
        upstreamRoute.adapter && readerIndex(plugin, model, upstreamRouteId) < 0
          ? `routes.${upstreamRouteId}.adapter reads the vendor's own format`
          : `the plugin's usageExtractors[${readerIndex(plugin, model, upstreamRouteId)}] reads the vendor's own shape`;
      const note = `model '${canonicalId}', ${route === 'chat' ? 'native chat' : route}${stream ? ' (stream)' : ''}: usage: from recorded fixture '${recording.name}' (${reads}, which the standard mock does not speak)`;
      if (!report.notes.includes(note)) report.notes.push(note);
    }
    const before = await this.totals(canonicalId);
    const createdFrom = Math.floor(Date.now() / 1000);
    const answer = await this.send('POST', routePath(route), body, requestId);
    const createdTo = Math.floor(Date.now() / 1000);
    const fault = PLUGIN_FAULT.exec(answer.body.toString('utf8'));
    const faulted = () =>
      fail(
        'plugin-fault',
        `plugin '${fault![1]}', hook '${fault![2]}' failed: it threw or returned a wrong shape${this.faultLog(requestId)}`,
      );
    const [upstream, ...extra] = this.mock.requests;
    // A hook that failed before the request went upstream (a request builder) is named as such.
    if (!upstream && fault) return faulted();
    if (!upstream)
      return fail(
        resolutionRule,
        `answered ${answer.status} without calling the upstream: ${answer.body.toString('utf8').slice(0, 300)}`,
      );
    if (extra.length) fail('routing', `called the upstream ${extra.length + 1} times, expected once`);

    // The request, rule by rule.
    const context = { route: upstreamRouteId, model: canonicalId, upstreamModel: expectedModel, stream, requestId };
    const built = adapter ? builtRequests(adapter, { ...context, body }, createdFrom, createdTo) : undefined;
    const declaredPath = built?.[0]?.path ?? upstreamRoute.path;
    let reachedDeclaredPath = upstream.path === `/v1${declaredPath.split('?')[0]}`;
    if (!reachedDeclaredPath) {
      const whose =
        built?.[0]?.path !== undefined
          ? `routes.${upstreamRouteId}.adapter.buildRequest's path`
          : `routes.${upstreamRouteId}.path`;
      fail(
        'upstream-path',
        `reached the upstream at ${upstream.path}, expected the declared ${whose} ${declaredPath} under the base URL`,
      );
    } else if (!upstreamRoute.adapter && declaredPath !== STANDARD_PATHS[upstreamRoute.format]) {
      reachedDeclaredPath = false;
      fail(
        'upstream-path',
        `routes.${upstreamRouteId}.path is '${declaredPath}', but an upstream speaking ${upstreamRoute.format} serves '${STANDARD_PATHS[upstreamRoute.format]}' (the upstream answered ${upstream.status})`,
      );
    }
    const authFailure = checkAuth(upstream, upstreamRoute.auth);
    if (authFailure) fail('auth', authFailure);
    const defaults = { ...upstreamRoute.defaultHeaders, ...built?.[0]?.headers };
    const missing = Object.entries(defaults).find(([name, value]) => upstream.headers[name] !== value);
    if (missing)
      fail(
        'default-headers',
        `the upstream got ${missing[0]}: ${String(upstream.headers[missing[0]])}, expected the declared '${missing[1]}'`,
      );
    if (built) {
      if (!built.some((request) => isDeepStrictEqual(upstream.body, JSON.parse(JSON.stringify(request.body))))) {
        fail(
          'upstream-body',
          `the upstream body is not what routes.${upstreamRouteId}.adapter.buildRequest makes of the request: got ${upstream.rawBody.slice(0, 300)}`,
        );
      }
    } else if (route === 'chat') {
      const nativeBuilt = plugin.nativeChat!.buildRequest({
        upstreamModel: expectedModel,
        input: CONFORMANCE_INPUT,
        webSearch: false,
      });
      if (!isDeepStrictEqual(upstream.body, JSON.parse(JSON.stringify(nativeBuilt))))
        fail(
          'native-chat',
          `the upstream body is not what nativeChat.buildRequest makes: got ${upstream.rawBody.slice(0, 300)}`,
        );
    } else if (upstream.body?.model !== expectedModel) {
      fail(
        alias ? 'alias' : 'upstream-model',
        `the upstream got model ${JSON.stringify(upstream.body?.model)}, expected '${expectedModel}'${alias ? ` (the alias's target ${canonicalId})` : ''}`,
      );
    }

    // The answer: it needs the declared path served (the mock answers 404 elsewhere).
    if (fault) return faulted();
    if (!reachedDeclaredPath) return;
    if (answer.status !== 200)
      return fail(resolutionRule, `answered ${answer.status}: ${answer.body.toString('utf8').slice(0, 300)}`);
    const events = stream ? decodeSse(answer.body) : [];
    if (stream && !answer.contentType.startsWith('text/event-stream'))
      fail('stream', `answered ${answer.contentType || 'no content type'}, expected text/event-stream`);
    else if (stream && events.length === 0) fail('stream', 'the stream carried no events');
    if (route === 'chat') {
      const text = (JSON.parse(answer.body.toString('utf8')) as { result?: { text?: unknown } }).result?.text;
      if (recording && !recording.stream) {
        const expected = readTextOf(plugin, recording.body);
        if (text !== expected) {
          fail(
            'native-chat',
            `nativeChat.readText did not read the reply text of recorded fixture '${recording.name}': result.text is ${JSON.stringify(text)}, expected ${JSON.stringify(expected)}`,
          );
        }
      } else if (typeof text !== 'string' || !text.startsWith('Mock reply')) {
        fail(
          'native-chat',
          `nativeChat.readText did not read the upstream's reply text: result.text is ${JSON.stringify(text)}`,
        );
      }
    }
    // What clients must get is the recorded model's (its name is in the answer).
    if (adapter && recording)
      await this.checkAdapted(
        fail,
        requestId,
        upstreamRouteId,
        upstreamRoute.format,
        adapter,
        answer,
        events,
        recording,
        recording.model === canonicalId,
      );
    if (!WIRE_FORMATS[upstreamRoute.format].consumesTokens) return;
    const recorded = await this.recordedUsage(canonicalId, before);
    if (!recorded)
      return fail(
        alias ? 'alias' : 'usage',
        `no usage was recorded against ${canonicalId}${recording ? ` from recorded fixture '${recording.name}'` : ''}`,
      );
    const index = readerIndex(plugin, model, upstreamRouteId);
    const reader =
      index >= 0
        ? `the plugin's usageExtractors[${index}]`
        : upstreamRoute.adapter
          ? `routes.${upstreamRouteId}.adapter.usage`
          : `the standard ${upstreamRoute.format} extractor`;
    if (recording) {
      const expected = usageOf(recording.usage);
      if (!isDeepStrictEqual(recorded, expected)) {
        fail(
          'usage',
          `usage from recorded fixture '${recording.name}': ${reader} recorded ${JSON.stringify(recorded)}, but the fixture says ${JSON.stringify(expected)}`,
        );
      }
    } else if (!isDeepStrictEqual(recorded, upstream.reportedUsage)) {
      fail(
        'usage',
        `${reader} recorded ${JSON.stringify(recorded)}, but the upstream reported ${JSON.stringify(upstream.reportedUsage)}`,
      );
    }
  }

  /**
   * What an adapted route's client got from a recording: a stream complete (its terminal event seen:
   * not recorded as cut) and ending with the route's own closing events, each answer in the route's
   * shape, and, where the fixture says what clients of the model it was recorded from must get
   * (`.expected.txt`, `.expected.json`), exactly that (ids and creation times by presence).
   */
  private async checkAdapted(
    fail: (rule: string, message: string) => void,
    requestId: string,
    route: UpstreamRouteId,
    format: WireFormat,
    adapter: RouteAdapter,
    answer: Answer,
    events: readonly string[],
    recording: RecordedFixture,
    recordedModel: boolean,
  ): Promise<void> {
    const outcome = await this.outcomeOf(requestId);
    if (recording.stream) {
      if (outcome === 'upstream_cut') {
        fail(
          'terminal',
          `the gateway recorded the stream as cut: routes.${route}.adapter.stream.terminal (${typeof adapter.stream!.terminal === 'string' ? `'${adapter.stream!.terminal}'` : 'a predicate'}) matched none of the events of recorded fixture '${recording.name}' (${recordedEventNames(recording)})`,
        );
      }
      const unparsed = events.findIndex((data) => data !== '[DONE]' && parseJson(data) === undefined);
      if (unparsed !== -1)
        fail(
          'stream-map',
          `event ${unparsed + 1} of what the client got is not JSON: ${events[unparsed]!.slice(0, 200)} (stream.map returns each event's data as JSON text)`,
        );
      if (recording.expected && recordedModel) {
        const same = sameEvents(events, recording.expected, true);
        if (!same.same)
          fail(
            'stream-map',
            `event ${same.index + 1} of what the client got differs from ${recording.name}.expected.txt (ids and creation times compared by presence)\n${indent(eventDiff(recording.expected, events, 5, true))}`,
          );
      }
      return;
    }
    const body = parseJson(answer.body.toString('utf8'));
    if (typeof body !== 'object' || body === null || !ANSWER_SHAPE[format](body as Record<string, unknown>))
      fail(
        'answer-map',
        `the client's answer is not shaped as a ${format} answer: ${answer.body.toString('utf8').slice(0, 300)}`,
      );
    if (
      recording.expected !== undefined &&
      recordedModel &&
      !isDeepStrictEqual(withoutInstanceFields(body), withoutInstanceFields(recording.expected))
    ) {
      fail(
        'answer-map',
        `the client's answer differs from ${recording.name}.expected.json (ids and creation times compared by presence): got ${answer.body.toString('utf8').slice(0, 300)}`,
      );
    }
  }

  /**
   * Replays a recorded stream for every model of the plugin on the fixture's route: the model it was
   * recorded from must get `<name>.expected.txt` (or the stream unchanged), any other model with
   * declared fixups must get exactly what those fixups make, and every other model the bytes unchanged.
   * On an adapted route the stream is the vendor's: only the model it was recorded from is replayed
   * (the drive of each model checks it), and `.expected.txt` holds what the adapter makes of it.
   */
  async replay(subject: Subject, fixture: RecordedStream): Promise<void> {
    const { plugin, report } = subject;
    const fail = (model: string | undefined, rule: string, message: string) =>
      void report.failures.push({
        plugin: plugin.vendor,
        model,
        rule,
        message: `fixture '${fixture.name}' on ${fixture.route}: ${message}`,
      });
    // fixtureProblem() vetted the fixture: the route streams and the model serves it.
    const route = plugin.routes[fixture.route]!;
    const recordedFrom = canonicalOf(plugin, fixture.model);
    const events = fixtureEvents(fixture.chunks, route.format);
    const bytes = fixture.sse ?? encodeSse(events);
    const models = plugin.models.filter(
      (candidate) => candidate.routes.includes(fixture.route) && (!route.adapter || candidate === recordedFrom),
    );

    for (const model of models) {
      report.checks += 1;
      const canonicalId = `${plugin.vendor}/${model.id}`;
      const fixups = (plugin.streamFixups ?? []).filter(
        (declaration) =>
          declaration.route === fixture.route &&
          declaration.models.some((declared) => canonicalOf(plugin, declared) === model),
      );
      this.mock.reset();
      this.mock.enqueue(streamAnswer(bytes));
      const before = await this.totals(canonicalId);
      const requestId = this.nextRequestId();
      const answer = await this.send(
        'POST',
        routePath(fixture.route),
        clientRequest(fixture.route, spellings(plugin, model, fixture.route)[0]!, true),
        requestId,
      );
      // A hook failing on the stream's first events answers 502, later ones end the stream in band.
      const fault = PLUGIN_FAULT.exec(answer.body.toString('utf8'));
      if (fault) {
        fail(
          canonicalId,
          'plugin-fault',
          `plugin '${fault[1]}', hook '${fault[2]}' failed on the replayed stream: it threw or returned a wrong shape${this.faultLog(requestId)}`,
        );
        continue;
      }
      if (answer.status !== 200) {
        fail(
          canonicalId,
          'fixup',
          `the replayed stream answered ${answer.status}: ${answer.body.toString('utf8').slice(0, 300)}`,
        );
        continue;
      }
      const delivered = decodeSse(answer.body);
      if (route.adapter) {
        if ((await this.outcomeOf(requestId)) === 'upstream_cut') {
          fail(
            canonicalId,
            'terminal',
            `the gateway recorded the replayed stream as cut: routes.${fixture.route}.adapter.stream.terminal matched none of its events (${recordedEventNames(fixture)})`,
          );
        }
        if (fixture.expected) {
          const same = sameEvents(delivered, fixture.expected, true);
          if (!same.same)
            fail(
              canonicalId,
              'stream-map',
              `event ${same.index + 1} of what the client got differs from ${fixture.name}.expected.txt (ids and creation times compared by presence)\n${indent(eventDiff(fixture.expected, delivered, 5, true))}`,
            );
        }
      } else if (model === recordedFrom) {
        const expected = fixture.expected ?? fixture.chunks;
        const same = sameEvents(delivered, expected);
        if (!same.same) {
          const source = fixture.expected
            ? `${fixture.name}.expected.txt`
            : `${fixture.name}.chunks.txt (no .expected.txt: the stream must pass unchanged)`;
          const declared = fixups.length
            ? `${fixups.length} stream fixup(s) declared for it`
            : 'no stream fixup is declared for this model on this route';
          fail(
            canonicalId,
            'fixup',
            `event ${same.index + 1} of what the client got differs from ${source}; ${declared}\n${indent(eventDiff(expected, delivered))}`,
          );
        }
      } else if (fixups.length) {
        const made = applyFixups(events, fixups);
        const same = sameEvents(delivered, made);
        if (!same.same)
          fail(
            canonicalId,
            'fixup',
            `event ${same.index + 1} is not what the model's declared stream fixups make of the recording\n${indent(eventDiff(made, delivered))}`,
          );
      } else if (!answer.body.equals(Buffer.from(bytes))) {
        fail(
          canonicalId,
          'fixup',
          'no stream fixup is declared for this model, yet the stream did not pass byte for byte',
        );
      }
      if (fixture.usage && (model === recordedFrom || route.adapter)) {
        const recorded = await this.recordedUsage(canonicalId, before);
        if (!isDeepStrictEqual(recorded, usageOf(fixture.usage))) {
          fail(
            canonicalId,
            'usage',
            `recorded ${JSON.stringify(recorded)} from the recorded stream, the fixture says ${JSON.stringify(usageOf(fixture.usage))}`,
          );
        }
      }
    }
  }
}

/** The event names of a recording, for a message about its terminal event. */
function recordedEventNames(fixture: RecordedStream): string {
  if (fixture.sse === undefined) return 'its recording keeps no event names: record it as <name>.sse';
  const names = [
    ...new Set(
      new SseSplitter()
        .push(Buffer.from(fixture.sse, 'utf8'))
        .flatMap((block) => (block.event?.event === undefined ? [] : [block.event.event])),
    ),
  ];
  return names.length
    ? `its events are named ${names.map((name) => `'${name}'`).join(', ')}`
    : 'its events have no names';
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/**
 * What an adapter's `buildRequest` makes of the client's request, for each creation time the gateway may
 * have told it (the second the request was sent in, or the next); none when it fails (the gateway's
 * answer names the fault).
 */
function builtRequests(
  adapter: RouteAdapter,
  request: Omit<AdapterRequest, 'created'>,
  from: number,
  to: number,
): AdaptedRequest[] {
  const built: AdaptedRequest[] = [];
  for (let created = from; created <= to; created += 1) {
    try {
      built.push(adapter.buildRequest({ ...request, created }));
    } catch {
      return [];
    }
  }
  return built;
}

/** The three counts of a fixture's usage, in the order the gateway's records give them. */
const usageOf = (usage: TokenUsage): TokenUsage => ({
  inputTokens: usage.inputTokens,
  outputTokens: usage.outputTokens,
  cachedTokens: usage.cachedTokens,
});

/** What the plugin's `nativeChat.readText` reads from a recorded body (undefined when it throws). */
function readTextOf(plugin: ProviderPlugin, body: string): string | undefined {
  try {
    return plugin.nativeChat!.readText(JSON.parse(body));
  } catch {
    return undefined;
  }
}

/** How a declared auth reads in a message: `auth: { header: 'x-acme-key' }`. */
function describeAuth(auth: AuthStyle): string {
  return typeof auth === 'string'
    ? auth
    : JSON.stringify(auth)
        .replace(/"(\w+)":/g, '$1: ')
        .replace(/"/g, "'")
        .replace(/,/g, ', ');
}

/**
 * The upstream got the provider key in the declared place (header after its prefix, or query parameter), and no other
 * credential.
 */
function checkAuth(upstream: RecordedRequest, auth: AuthStyle): string | undefined {
  const declared = `(declared auth: ${describeAuth(auth)})`;
  const place =
    auth === 'bearer'
      ? { header: 'authorization', prefix: 'Bearer ' }
      : auth === 'x-api-key'
        ? { header: 'x-api-key' }
        : auth;
  if ('query' in place) {
    const sent = new URLSearchParams(upstream.query).getAll(place.query);
    if (sent.length !== 1 || sent[0] !== UPSTREAM_KEY)
      return `the upstream got no ?${place.query}=<provider key> query parameter ${declared}`;
  } else {
    const prefix = place.prefix ?? '';
    if (upstream.headers[place.header] !== `${prefix}${UPSTREAM_KEY}`)
      return `the upstream got no ${place.header}: ${prefix}<provider key> ${declared}`;
  }
  for (const other of ['authorization', 'x-api-key']) {
    if (('header' in place && place.header === other) || upstream.headers[other] === undefined) continue;
    return `the upstream also got ${other === 'authorization' ? 'an Authorization header' : other} ${declared}`;
  }
  return undefined;
}
