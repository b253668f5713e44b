import { expect } from 'chai';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, inspectConfig, loadConfig } from '../../src/config/gateway-config.ts';
import { DEFAULT_TRACING } from '../../src/ops/tracing/tracing-settings.ts';

async function configFile(text: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'gateway-tracing-config-'));
  const path = join(dir, 'gateway.yaml');
  await writeFile(path, text);
  return path;
}

describe("tracing config: the OpenTelemetry variables over the file's tracing section", () => {
  let empty: string;
  before(async () => (empty = await configFile('')));
  const tracing = (env: NodeJS.ProcessEnv, file = empty) => loadConfig({ GATEWAY_CONFIG: file, ...env }).tracing;

  it("is off without an endpoint, with the SDK's defaults for the rest", () => {
    expect(tracing({})).to.deep.equal(DEFAULT_TRACING);
    expect(DEFAULT_TRACING).to.deep.include({
      serviceName: 'model-gateway',
      sampler: { name: 'parentbased_always_on', ratio: 1 },
      captureMessageContent: false,
    });
    expect(DEFAULT_TRACING.batch).to.deep.equal({
      scheduleDelayMs: 5000,
      exportTimeoutMs: 30_000,
      maxQueueSize: 2048,
      maxExportBatchSize: 512,
    });
  });

  it('sends traces and metrics under OTEL_EXPORTER_OTLP_ENDPOINT, as protobuf unless told otherwise', () => {
    const settings = tracing({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' });
    expect(settings.traces).to.deep.equal({
      url: 'http://collector:4318/v1/traces',
      protocol: 'http/protobuf',
      headers: {},
      timeoutMs: 10_000,
    });
    expect(settings.metrics).to.deep.equal({
      url: 'http://collector:4318/v1/metrics',
      protocol: 'http/protobuf',
      headers: {},
      timeoutMs: 10_000,
    });
  });

  it("takes a signal's own endpoint whole, and its own protocol, headers and timeout over the shared ones", () => {
    const settings = tracing({
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://traces.example/otlp/spans',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_HEADERS: 'x-team=ops,authorization=Bearer%20abc',
      OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'X-Team=traces',
      OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: '2500',
    });
    expect(settings.traces).to.deep.equal({
      url: 'https://traces.example/otlp/spans',
      protocol: 'http/json',
      headers: { 'x-team': 'traces', authorization: 'Bearer abc' },
      timeoutMs: 2500,
    });
    expect(settings.metrics).to.equal(undefined);
    expect(tracing({ OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: 'http://m:4318/v1/metrics' }).traces).to.equal(undefined);
  });

  it('honours OTEL_SDK_DISABLED, OTEL_TRACES_EXPORTER=none, OTEL_METRICS_EXPORTER=none|prometheus and tracing.enabled: false', async () => {
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' };
    const off = (settings: ReturnType<typeof tracing>) => [settings.traces, settings.metrics];
    expect(off(tracing({ ...endpoint, OTEL_SDK_DISABLED: 'true' }))).to.deep.equal([undefined, undefined]);
    expect(tracing({ ...endpoint, OTEL_TRACES_EXPORTER: 'none' }).traces).to.equal(undefined);
    expect(tracing({ ...endpoint, OTEL_TRACES_EXPORTER: 'none' }).metrics).to.not.equal(undefined);
    expect(tracing({ ...endpoint, OTEL_METRICS_EXPORTER: 'prometheus' }).metrics).to.equal(undefined);
    expect(tracing({ ...endpoint, OTEL_METRICS_EXPORTER: 'none' }).traces).to.not.equal(undefined);
    const disabled = await configFile('tracing:\n  enabled: false\n  endpoint: http://collector:4318\n');
    expect(off(tracing({}, disabled))).to.deep.equal([undefined, undefined]);
    // The environment wins, as everywhere: OTEL_SDK_DISABLED=false over the file's `enabled: false`.
    expect(tracing({ OTEL_SDK_DISABLED: 'false' }, disabled).traces).to.not.equal(undefined);
  });

  it("sends the audit log's records as OTLP logs alike: the shared endpoint, their own, OTEL_LOGS_EXPORTER, the file", async () => {
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' };
    const shared = tracing({ ...endpoint, OTEL_EXPORTER_OTLP_HEADERS: 'x-team=ops' });
    const url = 'http://collector:4318/v1/logs';
    expect(shared.logs).to.deep.equal({
      url,
      protocol: 'http/protobuf',
      headers: { 'x-team': 'ops' },
      timeoutMs: 10_000,
    });
    const own = tracing({
      OTEL_EXPORTER_OTLP_LOGS_ENDPOINT: 'https://siem.example/otlp/logs',
      OTEL_EXPORTER_OTLP_LOGS_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_LOGS_HEADERS: 'authorization=Bearer%20siem',
      OTEL_EXPORTER_OTLP_LOGS_TIMEOUT: '3000',
    });
    const siem = {
      url: 'https://siem.example/otlp/logs',
      protocol: 'http/json',
      headers: { authorization: 'Bearer siem' },
      timeoutMs: 3000,
    };
    expect(own.logs).to.deep.equal(siem);
    expect([own.traces, own.metrics]).to.deep.equal([undefined, undefined]);
    expect(tracing({ ...endpoint, OTEL_LOGS_EXPORTER: 'none' }).logs).to.equal(undefined);
    expect(tracing({ ...endpoint, OTEL_LOGS_EXPORTER: 'none' }).traces).to.not.equal(undefined);
    expect(tracing({ ...endpoint, OTEL_SDK_DISABLED: 'true' }).logs).to.equal(undefined);
    const file = await configFile('tracing:\n  logsEndpoint: http://siem:4318/v1/logs\n');
    expect(tracing({}, file).logs).to.deep.include({ url: 'http://siem:4318/v1/logs' });
    const disabled = await configFile('tracing:\n  enabled: false\n  logsEndpoint: http://siem:4318/v1/logs\n');
    expect(tracing({}, disabled).logs).to.equal(undefined);
    const { problems } = inspectConfig({
      GATEWAY_CONFIG: empty,
      OTEL_LOGS_EXPORTER: 'console',
      OTEL_EXPORTER_OTLP_LOGS_ENDPOINT: 'siem:4318',
    });
    expect(problems).to.include.members(["OTEL_LOGS_EXPORTER must be otlp or none, got 'console'"]);
    const { problems: notUrl } = inspectConfig({
      GATEWAY_CONFIG: empty,
      OTEL_EXPORTER_OTLP_LOGS_ENDPOINT: 'siem:4318',
    });
    expect(notUrl).to.include.members(['OTEL_EXPORTER_OTLP_LOGS_ENDPOINT must be an http:// or https:// URL']);
    const bad = await configFile('tracing:\n  logsEndpoint: siem:4318\n');
    expect(inspectConfig({ GATEWAY_CONFIG: bad }).problems.join('\n')).to.match(
      /tracing\.logsEndpoint must be an http:\/\/ or https:\/\/ URL/,
    );
  });

  it('reads the service name, resource attributes, sampler, batch and capture settings from the standard variables', () => {
    const settings = tracing({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
      OTEL_SERVICE_NAME: 'gw-eu',
      OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=prod,service.name=ignored,team=a%2Cb',
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.1',
      OTEL_BSP_SCHEDULE_DELAY: '200',
      OTEL_BSP_EXPORT_TIMEOUT: '3000',
      OTEL_BSP_MAX_QUEUE_SIZE: '4096',
      OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '256',
      OTEL_METRIC_EXPORT_INTERVAL: '15000',
      OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'true',
    });
    expect(settings).to.deep.include({
      serviceName: 'gw-eu',
      resourceAttributes: { 'deployment.environment.name': 'prod', team: 'a,b' },
      sampler: { name: 'parentbased_traceidratio', ratio: 0.1 },
      batch: { scheduleDelayMs: 200, exportTimeoutMs: 3000, maxQueueSize: 4096, maxExportBatchSize: 256 },
      metricExportIntervalMs: 15_000,
      captureMessageContent: true,
    });
    expect(tracing({ OTEL_RESOURCE_ATTRIBUTES: 'service.name=from-attributes' }).serviceName).to.equal(
      'from-attributes',
    );
  });

  it("reads the file's tracing section, the variables winning", async () => {
    const file = await configFile(
      [
        'tracing:',
        '  endpoint: http://collector:4318',
        '  protocol: http/json',
        '  serviceName: gw-file',
        '  resourceAttributes: { region: eu, shard: 3 }',
        '  sampler: traceidratio',
        '  samplerArg: 0.25',
        '  batch: { scheduleDelayMs: 100, maxQueueSize: 100, maxExportBatchSize: 10 }',
        '  captureMessageContent: true',
      ].join('\n'),
    );
    const settings = tracing({}, file);
    expect(settings.traces).to.deep.include({ url: 'http://collector:4318/v1/traces', protocol: 'http/json' });
    expect(settings).to.deep.include({
      serviceName: 'gw-file',
      resourceAttributes: { region: 'eu', shard: '3' },
      sampler: { name: 'traceidratio', ratio: 0.25 },
      captureMessageContent: true,
    });
    expect(settings.batch).to.deep.equal({
      scheduleDelayMs: 100,
      exportTimeoutMs: 30_000,
      maxQueueSize: 100,
      maxExportBatchSize: 10,
    });
    const overridden = tracing(
      {
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
        OTEL_TRACES_SAMPLER_ARG: '1',
        OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'false',
      },
      file,
    );
    expect(overridden.traces!.protocol).to.equal('http/protobuf');
    expect(overridden).to.deep.include({ sampler: { name: 'traceidratio', ratio: 1 }, captureMessageContent: false });
  });

  it('lists every bad variable at once, never quoting a header value', () => {
    const { problems } = inspectConfig({
      GATEWAY_CONFIG: empty,
      OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4317',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
      OTEL_TRACES_SAMPLER: 'jaeger_remote',
      OTEL_TRACES_SAMPLER_ARG: '2',
      OTEL_BSP_MAX_QUEUE_SIZE: 'lots',
      OTEL_EXPORTER_OTLP_HEADERS: 'api-key-without-value-s3cr3t',
      OTEL_SDK_DISABLED: 'maybe',
    });
    expect(problems).to.include.members([
      'OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL',
      "OTEL_EXPORTER_OTLP_PROTOCOL must be http/protobuf or http/json (OTLP over gRPC is not supported: point it at the collector's HTTP port, 4318), got 'grpc'",
      "OTEL_TRACES_SAMPLER must be one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio, got 'jaeger_remote'",
      "OTEL_TRACES_SAMPLER_ARG must be a number from 0 to 1, got '2'",
      "OTEL_BSP_MAX_QUEUE_SIZE must be an integer >= 1, got 'lots'",
      'OTEL_EXPORTER_OTLP_HEADERS entry 1 is not key=value (percent-encoded)',
      "OTEL_SDK_DISABLED must be true or false, got 'maybe'",
    ]);
    expect(problems.join('\n')).to.not.include('s3cr3t');
  });

  it('names a bad field of the file by line and column, like every other setting', async () => {
    const file = await configFile(
      'tracing:\n  sampler: sometimes\n  samplerArg: 3\n  batch:\n    maxQueueSize: 10\n    maxExportBatchSize: 20\n  colour: blue\n',
    );
    const error = (() => {
      try {
        loadConfig({ GATEWAY_CONFIG: file });
      } catch (caught) {
        return caught as ConfigError;
      }
      throw new Error('the config was accepted');
    })();
    expect(error).to.be.instanceOf(ConfigError);
    const text = error.problems.join('\n');
    expect(text).to.match(/line 2, column \d+: tracing\.sampler must be one of always_on/);
    expect(text).to.match(/line 3, column \d+: tracing\.samplerArg/);
    expect(text).to.match(
      /line 6, column \d+: the batch size of span exports \(20\) cannot be more than the span queue \(10\)/,
    );
    expect(text).to.match(/tracing.*colour/);
  });
});
