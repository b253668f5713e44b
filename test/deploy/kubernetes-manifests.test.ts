import { execFile } from 'node:child_process';
import { cp, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import { Ingress } from 'kubernetes-models/networking.k8s.io/v1/Ingress';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { Ajv, type ValidateFunction } from 'ajv';
import { parse, parseAllDocuments } from 'yaml';
import { resolveEnvFiles } from '../../src/config/env-files.ts';
import { checkTrustedProxies } from '../../src/core/incoming-request.ts';
import { startTestGateway } from '../helpers/test-gateway.ts';
import { runConfigCommand } from '../../src/cli/config-command.ts';
import { inspectConfig, loadConfig } from '../../src/config/gateway-config.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const KUBERNETES = join(ROOT, 'deploy', 'kubernetes');
const run = promisify(execFile);

/** A Kubernetes object as YAML gives it, read by field path (broken ones included, hence untyped). */
type K8sObject = Record<string, any>;

/** The schema of each kind the manifests hold; a kind without one is refused rather than passed unchecked. */
const SCHEMAS: Record<string, new (data: never) => { validate(): void }> = {
  'v1/ConfigMap': ConfigMap,
  'v1/Secret': Secret,
  'v1/Service': Service,
  'apps/v1/Deployment': Deployment,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'networking.k8s.io/v1/Ingress': Ingress,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
};

type Schema = Record<string, any>;

/**
 * What the API server does with a custom resource: its fields are checked against the CRD's
 * structural schema, and `kubectl apply` (strict field validation) refuses a field the schema does not
 * name. So every object schema that names its properties is closed here, unless it keeps unknown fields.
 */
function closed(schema: Schema): Schema {
  if (Array.isArray(schema)) return schema.map(closed);
  if (schema === null || typeof schema !== 'object') return schema;
  const copy: Schema = Object.fromEntries(
    Object.entries(schema).map(([key, value]) => [
      key,
      key === 'properties'
        ? Object.fromEntries(Object.entries(value as Schema).map(([name, child]) => [name, closed(child as Schema)]))
        : closed(value as Schema),
    ]),
  );
  if (
    copy.type === 'object' &&
    copy.properties &&
    copy.additionalProperties === undefined &&
    !copy['x-kubernetes-preserve-unknown-fields']
  )
    copy.additionalProperties = false;
  return copy;
}

/** The schemas of the Prometheus Operator's kinds, from its CRDs (test/fixtures/prometheus-operator-crds). */
const CRD_SCHEMAS: Record<string, ValidateFunction> = (() => {
  // The CRDs' patterns are Go (RE2) expressions: `(?i)` is their flag for ignoring case (of the whole pattern here).
  const regExp = (source: string, flags: string) =>
    source.includes('(?i)') ? new RegExp(source.replace('(?i)', ''), `${flags}i`) : new RegExp(source, flags);
  const ajv = new Ajv({
    strict: false,
    allErrors: true,
    validateFormats: false,
    code: { regExp: Object.assign(regExp, { code: 'goRegExp' }) },
  });
  const directory = join(fileURLToPath(new URL('../fixtures/prometheus-operator-crds', import.meta.url)));
  const schemas: Record<string, ValidateFunction> = {};
  for (const file of [
    'monitoring.coreos.com_servicemonitors.yaml',
    'monitoring.coreos.com_podmonitors.yaml',
    'monitoring.coreos.com_prometheusrules.yaml',
  ]) {
    const crd = parse(readFileSync(join(directory, file), 'utf8')) as Schema;
    for (const version of crd.spec.versions as Schema[]) {
      if (!version.served) continue;
      schemas[`${crd.spec.group}/${version.name}/${crd.spec.names.kind}`] = ajv.compile(
        closed(version.schema.openAPIV3Schema),
      );
    }
  }
  return schemas;
})();

/**
 * Throws, naming the object and the field, where the API server would refuse the object: its kind's
 * OpenAPI schema (kubernetes-models), then what the schema leaves to the server's own validation (a
 * name, each container's image, a Deployment selector that selects its own pod template). Fields the
 * schema does not know are not caught here (the schema allows them); the property checks below read
 * every field that matters by its exact path, so a misspelt one fails there.
 */
function validateObject(object: K8sObject): void {
  const id = `${object.kind ?? '(no kind)'} ${object.metadata?.name ?? '(no name)'}`;
  const Schema = SCHEMAS[`${object.apiVersion}/${object.kind}`];
  const custom = CRD_SCHEMAS[`${object.apiVersion}/${object.kind}`];
  if (!Schema && !custom)
    throw new Error(`${id}: no schema known for apiVersion ${object.apiVersion}, kind ${object.kind}`);
  if (custom && !custom(object)) {
    const problems = custom.errors!.map((error) => {
      const extra = error.params.additionalProperty as string | undefined;
      return `${error.instancePath} ${error.message ?? ''}${extra ? ` (${extra})` : ''}`;
    });
    throw new Error(`${id}: ${problems.join('; ')}`);
  }
  try {
    if (Schema) new Schema(object as never).validate();
  } catch (error) {
    throw new Error(`${id}: ${(error as Error).message}`);
  }
  if (!object.metadata?.name) throw new Error(`${id}: metadata.name is required`);
  if (object.kind === 'Deployment') {
    const template = object.spec.template;
    for (const container of [...(template.spec.initContainers ?? []), ...template.spec.containers]) {
      if (typeof container.image !== 'string' || container.image.trim() === '')
        throw new Error(`${id}: container ${container.name}: image is required`);
    }
    for (const [label, value] of Object.entries(object.spec.selector.matchLabels ?? {})) {
      if (template.metadata?.labels?.[label] !== value)
        throw new Error(`${id}: spec.selector label ${label}=${String(value)} does not select the pod template`);
    }
  }
}

/** Every object of a YAML stream (a YAML error throws). */
function parseObjects(text: string): K8sObject[] {
  return parseAllDocuments(text).flatMap((document) => {
    if (document.errors.length) throw new Error(document.errors.map((error) => error.message).join('; '));
    const object = document.toJS() as K8sObject | null;
    return object ? [object] : [];
  });
}

/** `kubectl kustomize DIR`: its objects, or an error carrying kubectl's own message. */
async function render(directory: string): Promise<K8sObject[]> {
  let stdout: string;
  try {
    ({ stdout } = await run('kubectl', ['kustomize', directory], { maxBuffer: 16 * 1024 * 1024 }));
  } catch (error) {
    const { stderr, message } = error as { stderr?: string; message: string };
    throw new Error(`kubectl kustomize ${relative(ROOT, directory) || directory} failed: ${stderr?.trim() || message}`);
  }
  return parseObjects(stdout);
}

async function readObject(path: string): Promise<K8sObject> {
  const [object, ...more] = parseObjects(await readFile(join(KUBERNETES, path), 'utf8'));
  expect(more, `${path} holds one object`).to.deep.equal([]);
  return object!;
}

const find = (objects: K8sObject[], kind: string) => {
  const found = objects.filter((object) => object.kind === kind);
  expect(found, `one ${kind}`).to.have.length(1);
  return found[0]!;
};
const gatewayContainer = (deployment: K8sObject) => {
  const containers = deployment.spec.template.spec.containers as K8sObject[];
  expect(containers.map((container) => container.name)).to.deep.equal(['gateway']);
  return containers[0]!;
};
/** The container's variables with a literal value (those from the Secret have none here). */
const literalEnv = (container: K8sObject): Record<string, string> =>
  Object.fromEntries(
    (container.env as K8sObject[])
      .filter((entry) => typeof entry.value === 'string')
      .map((entry) => [entry.name, entry.value]),
  );
const selects = (selector: Record<string, string>, labels: Record<string, string>) =>
  Object.keys(selector).length > 0 && Object.entries(selector).every(([label, value]) => labels[label] === value);

describe('Kubernetes manifests: files (deploy/kubernetes)', () => {
  const files = [
    'base/deployment.yaml',
    'base/service.yaml',
    'base/poddisruptionbudget.yaml',
    'components/autoscaling/horizontalpodautoscaler.yaml',
    'components/autoscaling-streams/horizontalpodautoscaler.yaml',
    'components/servicemonitor/metrics-service.yaml',
    'components/servicemonitor/servicemonitor.yaml',
    'components/podmonitor/podmonitor.yaml',
    'components/alerts/prometheusrule.yaml',
    'components/network-policy/networkpolicy.yaml',
    'components/ingress/ingress.yaml',
    'secret.example.yaml',
  ];

  it('holds objects that each pass the Kubernetes schema', async () => {
    for (const file of files) validateObject(await readObject(file));
  });

  describe('the validation refuses a broken manifest', () => {
    let deployment: K8sObject;
    before(async () => {
      deployment = await readObject('base/deployment.yaml');
      validateObject(deployment);
    });
    const broken = (change: (copy: K8sObject) => void) => {
      const copy = structuredClone(deployment);
      change(copy);
      return () => validateObject(copy);
    };

    it('a mistyped field: replicas "two"', () => {
      expect(broken((copy) => (copy.spec.replicas = 'two'))).to.throw(
        /^Deployment model-gateway: .*spec\/replicas must be integer/,
      );
    });

    it('a mistyped field: a probe port that is neither a number nor a name', () => {
      expect(broken((copy) => (copy.spec.template.spec.containers[0].readinessProbe.httpGet.port = {}))).to.throw(
        /readinessProbe\/httpGet\/port must be/,
      );
    });

    it('a required field missing: the container name (schema), the container image, the selected labels (API server rules)', () => {
      expect(broken((copy) => delete copy.spec.template.spec.containers[0].name)).to.throw(
        /containers\/0 must have required property name/,
      );
      expect(broken((copy) => delete copy.spec.template.spec.containers[0].image)).to.throw(
        /container gateway: image is required/,
      );
      expect(broken((copy) => delete copy.spec.template.metadata.labels['app.kubernetes.io/component'])).to.throw(
        /does not select the pod template/,
      );
      expect(broken((copy) => delete copy.metadata.name)).to.throw(/metadata\.name is required/);
    });

    it("a custom resource with a misspelt, mistyped or missing field (the CRD's schema)", async () => {
      const monitor = await readObject('components/servicemonitor/servicemonitor.yaml');
      validateObject(monitor);
      const changed = (object: K8sObject, change: (copy: K8sObject) => void) => {
        const copy = structuredClone(object);
        change(copy);
        return () => validateObject(copy);
      };
      expect(changed(monitor, (copy) => (copy.spec.endpoints[0].intervall = '15s'))).to.throw(
        /^ServiceMonitor model-gateway: \/spec\/endpoints\/0 must NOT have additional properties \(intervall\)/,
      );
      expect(changed(monitor, (copy) => (copy.spec.endpoints = 'metrics'))).to.throw(/\/spec\/endpoints must be array/);
      const rule = await readObject('components/alerts/prometheusrule.yaml');
      validateObject(rule);
      expect(changed(rule, (copy) => delete copy.spec.groups[0].rules[0].expr)).to.throw(
        /^PrometheusRule model-gateway: \/spec\/groups\/0\/rules\/0 must have required property 'expr'/,
      );
      expect(changed(rule, (copy) => (copy.spec.groups[0].rules[0].for = 'five minutes'))).to.throw(
        /\/spec\/groups\/0\/rules\/0\/for must match pattern/,
      );
      const pods = await readObject('components/podmonitor/podmonitor.yaml');
      validateObject(pods);
      expect(changed(pods, (copy) => (copy.spec.podMetricsEndpoints[0].port = 9464))).to.throw(
        /podMetricsEndpoints\/0\/port must be string/,
      );
    });

    it('an object of a kind it has no schema for', () => {
      expect(() => validateObject({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'x' } })).to.throw(
        /no schema known for apiVersion v1, kind Pod/,
      );
    });
  });

  it("alerts the same in compose: deploy/prometheus/alerts.yml holds the PrometheusRule's groups", async () => {
    const rule = await readObject('components/alerts/prometheusrule.yaml');
    const file = parse(await readFile(join(ROOT, 'deploy', 'prometheus', 'alerts.yml'), 'utf8')) as K8sObject;
    expect(file).to.deep.equal(rule.spec);
  });

  it('gives a config file that the gateway accepts, as `config check` and start-up read it', async () => {
    const lines: string[] = [];
    const code = await runConfigCommand(
      ['check', join(KUBERNETES, 'base', 'gateway.yaml')],
      { out: (text) => lines.push(text), err: (text) => lines.push(text) },
      {},
    );
    expect(lines.join(''), 'config check').to.match(/: valid \(/);
    expect(code).to.equal(0);
  });

  it('ships an example Secret whose placeholders the gateway refuses to start with', async () => {
    const secret = await readObject('secret.example.yaml');
    expect(secret.metadata.name).to.equal('model-gateway');
    const values = secret.stringData as Record<string, string>;
    expect(values)
      .to.have.property('REDIS_URL')
      .that.matches(/^rediss?:\/\//);
    // envFrom turns each key into a variable: a key that is not a variable name would be dropped.
    for (const key of Object.keys(values)) expect(key).to.match(/^[A-Z_][A-Z0-9_]*$/);
    const { problems } = inspectConfig({ GATEWAY_CONFIG: join(KUBERNETES, 'base', 'gateway.yaml'), ...values });
    expect(problems.join('\n'))
      .to.contain('GATEWAY_ADMIN_TOKEN must be at least 32 characters')
      .and.to.contain('GATEWAY_API_KEYS entry 1 is not a valid key');
  });
});

describe('Kubernetes manifests: rendered by kustomize', function () {
  this.timeout(60_000);
  let base: K8sObject[];
  let autoscaled: K8sObject[];
  /** Every overlay of overlays/, rendered, by its directory name. */
  const overlays: Record<string, K8sObject[]> = {};

  before(async function () {
    try {
      await run('kubectl', ['version', '--client']);
    } catch (error) {
      const reason =
        (error as NodeJS.ErrnoException).code === 'ENOENT'
          ? 'kubectl is not on PATH'
          : `kubectl does not run (${(error as Error).message})`;
      console.log(`      skipped: ${reason}; install kubectl to render and check deploy/kubernetes with kustomize`);
      this.skip();
    }
    base = await render(KUBERNETES);
    for (const name of await readdir(join(KUBERNETES, 'overlays')))
      overlays[name] = await render(join(KUBERNETES, 'overlays', name));
    autoscaled = overlays.autoscaled!;
  });

  it('renders the base and the autoscaled overlay, and every object passes the Kubernetes schema', () => {
    expect(base.map((object) => object.kind).sort()).to.deep.equal([
      'ConfigMap',
      'Deployment',
      'PodDisruptionBudget',
      'Service',
    ]);
    expect(autoscaled.map((object) => object.kind).sort()).to.deep.equal([
      'ConfigMap',
      'Deployment',
      'HorizontalPodAutoscaler',
      'PodDisruptionBudget',
      'Service',
    ]);
    for (const object of [...base, ...autoscaled]) validateObject(object);
    for (const object of base)
      expect(object.metadata.labels).to.include({
        'app.kubernetes.io/name': 'model-gateway',
        'app.kubernetes.io/part-of': 'model-gateway',
      });
  });

  it('runs two replicas of the image as uid 10001 on a read-only root, without privileges', () => {
    const deployment = find(base, 'Deployment');
    expect(deployment.spec.replicas).to.equal(2);
    const pod = deployment.spec.template.spec;
    const container = gatewayContainer(deployment);
    expect(container.image).to.equal('model-gateway:latest');
    expect(pod.securityContext).to.deep.include({ runAsNonRoot: true, runAsUser: 10001, runAsGroup: 10001 });
    expect(pod.securityContext.seccompProfile).to.deep.equal({ type: 'RuntimeDefault' });
    expect(container.securityContext).to.deep.include({
      runAsNonRoot: true,
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
    });
    expect(container.securityContext.capabilities).to.deep.equal({ drop: ['ALL'] });
    expect(pod.automountServiceAccountToken).to.equal(false);
    // A Service named `metrics` would otherwise set METRICS_PORT=tcp://…, which stops the gateway's start.
    expect(pod.enableServiceLinks).to.equal(false);
    // Writable places on the read-only root: /tmp, and the data directory (usage spills there while Redis is away).
    const emptyDirs = new Set(
      (pod.volumes as K8sObject[]).filter((volume) => volume.emptyDir).map((volume) => volume.name),
    );
    const mounts = Object.fromEntries(
      (container.volumeMounts as K8sObject[]).map((mount) => [mount.mountPath, mount.name]),
    );
    expect(emptyDirs.has(mounts['/tmp'])).to.equal(true);
    expect(emptyDirs.has(mounts[literalEnv(container).GATEWAY_DATA_DIR!])).to.equal(true);
    expect(container.resources).to.deep.equal({
      requests: { cpu: '250m', memory: '256Mi' },
      limits: { cpu: '1', memory: '512Mi' },
    });
  });

  it('probes /readyz?degraded=ready for readiness and /healthz for liveness on the http port, which the Service and the gateway use', () => {
    const deployment = find(base, 'Deployment');
    const container = gatewayContainer(deployment);
    expect(container.ports).to.deep.equal([
      { name: 'http', containerPort: 8080, protocol: 'TCP' },
      { name: 'metrics', containerPort: 9464, protocol: 'TCP' },
    ]);
    expect(literalEnv(container).METRICS_PORT).to.equal('9464');
    expect(container.readinessProbe.httpGet).to.deep.equal({ path: '/readyz?degraded=ready', port: 'http' });
    expect(container.livenessProbe.httpGet).to.deep.equal({ path: '/healthz', port: 'http' });
    expect(container.startupProbe.httpGet).to.deep.equal({ path: '/healthz', port: 'http' });
    expect(literalEnv(container).PORT).to.equal('8080');

    const labels = deployment.spec.template.metadata.labels as Record<string, string>;
    const service = find(base, 'Service');
    expect(service.spec.type).to.equal('ClusterIP');
    expect(service.spec.ports).to.deep.equal([{ name: 'http', port: 80, targetPort: 'http', protocol: 'TCP' }]);
    expect(selects(service.spec.selector, labels), 'the Service selects the pods').to.equal(true);
    const budget = find(base, 'PodDisruptionBudget');
    expect(budget.spec.maxUnavailable).to.equal(1);
    expect(selects(budget.spec.selector.matchLabels, labels), 'the budget selects the pods').to.equal(true);
  });

  it('gives the drain its time: grace period >= preStop sleep + GATEWAY_DRAIN_MS + 5 s', () => {
    const deployment = find(base, 'Deployment');
    const container = gatewayContainer(deployment);
    const [sleep, seconds, ...rest] = container.lifecycle.preStop.exec.command as string[];
    expect([sleep, rest]).to.deep.equal(['/bin/sleep', []]);
    const drainMs = Number(literalEnv(container).GATEWAY_DRAIN_MS);
    expect(drainMs).to.be.a('number').and.above(0);
    expect(deployment.spec.template.spec.terminationGracePeriodSeconds).to.be.at.least(
      Number(seconds) + drainMs / 1000 + 5,
    );
  });

  it('takes every secret as a file: no Secret value reaches an environment variable', async () => {
    for (const [name, objects] of [['base', base], ...Object.entries(overlays)] as const) {
      for (const workload of objects.filter((object) => object.spec?.template?.spec)) {
        const pod = workload.spec.template.spec as K8sObject;
        for (const container of [...(pod.initContainers ?? []), ...pod.containers] as K8sObject[]) {
          const where = `${name}: ${workload.kind} ${workload.metadata.name}, container ${container.name}`;
          expect(
            (container.env ?? []).filter((entry: K8sObject) => entry.valueFrom?.secretKeyRef),
            where,
          ).to.deep.equal([]);
          expect(
            (container.envFrom ?? []).filter((entry: K8sObject) => entry.secretRef),
            where,
          ).to.deep.equal([]);
          // No literal that looks like a secret either.
          expect(
            Object.keys(literalEnv(container)).filter(
              (variable) => /KEY|TOKEN|SECRET|PASSWORD/.test(variable) && !variable.endsWith('_FILE'),
            ),
            where,
          ).to.deep.equal([]);
        }
      }
      expect(
        objects.filter((object) => object.kind === 'Secret'),
        `${name} creates no Secret (applying it never overwrites the real one)`,
      ).to.deep.equal([]);
    }
    // Mounted read-only where GATEWAY_ENV_DIR points, REDIS_URL required from it.
    const deployment = find(base, 'Deployment');
    const container = gatewayContainer(deployment);
    const volume = (deployment.spec.template.spec.volumes as K8sObject[]).find((entry) => entry.secret)!;
    expect(volume.secret).to.deep.include({ secretName: 'model-gateway' });
    expect(volume.secret).not.to.have.property('optional');
    const mount = (container.volumeMounts as K8sObject[]).find((entry) => entry.name === volume.name)!;
    expect(mount.readOnly).to.equal(true);
    const env = literalEnv(container);
    expect(env.GATEWAY_ENV_DIR).to.equal(mount.mountPath);
    expect(env.REDIS_URL_FILE).to.equal(`${mount.mountPath}/REDIS_URL`);

    // The example Secret's keys, laid out as kubelet mounts them, are each taken as the setting they name.
    const example = (await readObject('secret.example.yaml')).stringData as Record<string, string>;
    const dir = await mkdtemp(join(tmpdir(), 'k8s-secret-volume-'));
    try {
      await mkdir(join(dir, 'secrets'));
      for (const [key, value] of Object.entries(example)) await writeFile(join(dir, 'secrets', key), value);
      const resolved = resolveEnvFiles({
        GATEWAY_ENV_DIR: join(dir, 'secrets'),
        REDIS_URL_FILE: join(dir, 'secrets', 'REDIS_URL'),
      });
      expect(resolved).to.deep.equal(example);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("renders every overlay, each object passing its schema (CRDs' included); every component is in one", async () => {
    expect(Object.keys(overlays).sort()).to.deep.equal(['autoscaled', 'pod-monitor', 'production']);
    for (const [name, objects] of Object.entries(overlays)) {
      for (const object of objects) {
        validateObject(object);
        expect(object.metadata.labels, `${name}: ${object.kind} ${object.metadata.name}`).to.include({
          'app.kubernetes.io/name': 'model-gateway',
          'app.kubernetes.io/part-of': 'model-gateway',
        });
      }
    }
    expect(overlays.production!.map((object) => object.kind).sort()).to.deep.equal([
      'ConfigMap',
      'Deployment',
      'HorizontalPodAutoscaler',
      'Ingress',
      'NetworkPolicy',
      'PodDisruptionBudget',
      'PrometheusRule',
      'Service',
      'Service',
      'ServiceMonitor',
    ]);
    expect(overlays['pod-monitor']!.map((object) => object.kind).sort()).to.deep.equal([
      'ConfigMap',
      'Deployment',
      'PodDisruptionBudget',
      'PodMonitor',
      'PrometheusRule',
      'Service',
    ]);
    const used = new Set<string>();
    for (const name of Object.keys(overlays)) {
      const kustomization = parse(await readFile(join(KUBERNETES, 'overlays', name, 'kustomization.yaml'), 'utf8')) as {
        components?: string[];
      };
      for (const component of kustomization.components ?? []) used.add(component.split('/').at(-1)!);
    }
    expect([...used].sort()).to.deep.equal((await readdir(join(KUBERNETES, 'components'))).sort());
  });

  it('scrapes the metrics port: a ServiceMonitor through a headless Service, or a PodMonitor', () => {
    const production = overlays.production!;
    const deployment = find(production, 'Deployment');
    const labels = deployment.spec.template.metadata.labels as Record<string, string>;
    const container = gatewayContainer(deployment);
    const metricsPort = (container.ports as K8sObject[]).find((port) => port.name === 'metrics')!;
    expect(metricsPort.containerPort).to.equal(Number(literalEnv(container).METRICS_PORT));
    const monitor = find(production, 'ServiceMonitor');
    const services = production.filter(
      (object) => object.kind === 'Service' && selects(monitor.spec.selector.matchLabels, object.metadata.labels),
    );
    expect(services.map((service) => service.metadata.name)).to.deep.equal(['model-gateway-metrics']);
    const service = services[0]!;
    expect(service.spec.clusterIP).to.equal('None');
    expect(selects(service.spec.selector, labels), 'the metrics Service selects the pods').to.equal(true);
    expect(service.spec.ports).to.deep.equal([
      { name: 'metrics', port: metricsPort.containerPort, targetPort: 'metrics', protocol: 'TCP' },
    ]);
    expect(monitor.spec.endpoints.map((endpoint: K8sObject) => [endpoint.port, endpoint.path])).to.deep.equal([
      ['metrics', '/metrics'],
    ]);
    // The client-facing Service carries no metrics port.
    expect(find(base, 'Service').spec.ports.map((port: K8sObject) => port.name)).to.deep.equal(['http']);
    const podMonitor = find(overlays['pod-monitor']!, 'PodMonitor');
    expect(selects(podMonitor.spec.selector.matchLabels, labels), 'the PodMonitor selects the pods').to.equal(true);
    expect(
      podMonitor.spec.podMetricsEndpoints.map((endpoint: K8sObject) => [endpoint.port, endpoint.path]),
    ).to.deep.equal([['metrics', '/metrics']]);
  });

  it('alerts on served metrics: stale config, queued usage, endpoint down, 5xx, dropped spans, limits nearly spent and spent', async () => {
    const rule = find(overlays.production!, 'PrometheusRule');
    const rules = (rule.spec.groups as K8sObject[]).flatMap((group) => group.rules as K8sObject[]);
    expect(rules.map((entry) => entry.alert)).to.deep.equal([
      'ModelGatewayConfigStale',
      'ModelGatewayUsageQueued',
      'ModelGatewayUpstreamEndpointDown',
      'ModelGatewayHighErrorRate',
      'ModelGatewayTraceSpansDropped',
      'ModelGatewayLimitNearlySpent',
      'ModelGatewayLimitSpent',
    ]);
    const test = await startTestGateway();
    try {
      const served = new Set(
        [...(await (await fetch(`${test.url}/metrics`)).text()).matchAll(/^# TYPE (\S+) /gm)].map((match) => match[1]!),
      );
      for (const entry of rules) {
        const names = [...(entry.expr as string).matchAll(/\b(gateway_[a-z_]+)/g)].map((match) => match[1]!);
        expect(names, entry.alert).to.not.deep.equal([]);
        for (const metric of names)
          expect(
            served.has(metric.replace(/_(total|bucket|sum|count)$/, '')) || served.has(metric),
            `${entry.alert}: ${metric}`,
          ).to.equal(true);
      }
      // The stream autoscaler's metric too.
      const autoscaler = find(overlays.production!, 'HorizontalPodAutoscaler');
      expect(autoscaler.spec.metrics).to.deep.equal([
        {
          type: 'Pods',
          pods: { metric: { name: 'gateway_open_streams' }, target: { type: 'AverageValue', averageValue: '200' } },
        },
      ]);
      expect(served.has('gateway_open_streams')).to.equal(true);
      expect(find(overlays.production!, 'Deployment').spec).not.to.have.property('replicas');
    } finally {
      await test.close();
    }
  });

  it("routes only /v1 through the Ingress, with TLS, and names the controller's pods as trusted proxies", () => {
    const production = overlays.production!;
    const ingress = find(production, 'Ingress');
    expect(ingress.spec.tls).to.have.length(1);
    expect(ingress.spec.tls[0].hosts).to.deep.equal(ingress.spec.rules.map((rule: K8sObject) => rule.host));
    const paths = (ingress.spec.rules as K8sObject[]).flatMap((rule) => rule.http.paths as K8sObject[]);
    expect(paths.map((path) => [path.path, path.pathType])).to.deep.equal([['/v1', 'Prefix']]);
    const service = find(
      production.filter((object) => object.metadata.name === 'model-gateway'),
      'Service',
    );
    for (const path of paths) {
      expect(path.backend.service.name).to.equal(service.metadata.name);
      expect(service.spec.ports.map((port: K8sObject) => port.name)).to.include(path.backend.service.port.name);
    }
    expect(ingress.metadata.annotations['nginx.ingress.kubernetes.io/proxy-buffering']).to.equal('off');
    const proxies = literalEnv(gatewayContainer(find(production, 'Deployment'))).GATEWAY_TRUSTED_PROXIES!;
    expect(proxies).to.be.a('string');
    expect(checkTrustedProxies(proxies.split(','))).to.equal(undefined);
    // The NetworkPolicy lets the http port in from the cluster and the metrics port from Prometheus's namespace only.
    const policy = find(production, 'NetworkPolicy');
    expect(
      selects(policy.spec.podSelector.matchLabels, find(production, 'Deployment').spec.template.metadata.labels),
    ).to.equal(true);
    expect(policy.spec.ingress).to.deep.equal([
      { ports: [{ port: 'http', protocol: 'TCP' }] },
      {
        from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } }],
        ports: [{ port: 'metrics', protocol: 'TCP' }],
      },
    ]);
  });

  it("mounts the ConfigMap (fixed name, no subPath) where GATEWAY_CONFIG points, with a file the gateway accepts with the Deployment's environment", async () => {
    const deployment = find(base, 'Deployment');
    const container = gatewayContainer(deployment);
    const configMap = find(base, 'ConfigMap');
    // No hash suffix: the ConfigMap keeps its name, so kubelet updates the mounted file and the gateway reloads it.
    expect(configMap.metadata.name).to.equal('model-gateway-config');
    const volume = (deployment.spec.template.spec.volumes as K8sObject[]).find((entry) => entry.configMap)!;
    expect(volume.configMap.name).to.equal(configMap.metadata.name);
    const mount = (container.volumeMounts as K8sObject[]).find((entry) => entry.name === volume.name)!;
    // A subPath mount is never updated: live reload would see no change.
    expect(mount).not.to.have.property('subPath');
    const env = literalEnv(container);
    expect(env.GATEWAY_CONFIG).to.equal(`${mount.mountPath}/gateway.yaml`);

    const dir = await mkdtemp(join(tmpdir(), 'k8s-configmap-'));
    try {
      const file = join(dir, 'gateway.yaml');
      await writeFile(file, configMap.data['gateway.yaml'] as string);
      const gatewayEnv = { ...env, GATEWAY_CONFIG: file, REDIS_URL: 'redis://redis.example:6379' };
      const lines: string[] = [];
      const code = await runConfigCommand(
        ['check', file],
        { out: (text) => lines.push(text), err: (text) => lines.push(text) },
        gatewayEnv,
      );
      expect(lines.join(''), 'config check').to.match(/: valid \(/);
      expect(code).to.equal(0);
      const config = loadConfig(gatewayEnv);
      expect(config.port).to.equal(container.ports[0].containerPort);
      expect(config.drainMs).to.equal(Number(env.GATEWAY_DRAIN_MS));
      expect(config.dataDir).to.equal(env.GATEWAY_DATA_DIR);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('autoscaled: scales the Deployment on CPU (70%) from 2 replicas, and leaves the replica count to the autoscaler', () => {
    const autoscaler = find(autoscaled, 'HorizontalPodAutoscaler');
    expect(autoscaler.apiVersion).to.equal('autoscaling/v2');
    expect(autoscaler.spec.scaleTargetRef).to.deep.equal({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      name: find(autoscaled, 'Deployment').metadata.name,
    });
    expect(autoscaler.spec.minReplicas).to.equal(2);
    expect(autoscaler.spec.metrics).to.deep.equal([
      { type: 'Resource', resource: { name: 'cpu', target: { type: 'Utilization', averageUtilization: 70 } } },
    ]);
    expect(find(autoscaled, 'Deployment').spec).not.to.have.property('replicas');
    // Otherwise the same objects as the base.
    const { replicas: _replicas, ...baseSpec } = find(base, 'Deployment').spec as K8sObject;
    expect(find(autoscaled, 'Deployment').spec).to.deep.equal(baseSpec);
  });

  it("fails with kubectl's message when a kustomization is broken", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'k8s-broken-'));
    try {
      await cp(join(KUBERNETES, 'base'), dir, { recursive: true });
      const kustomization = await readFile(join(dir, 'kustomization.yaml'), 'utf8');
      expect(kustomization).to.contain('  - service.yaml\n');
      await writeFile(
        join(dir, 'kustomization.yaml'),
        kustomization.replace('  - service.yaml\n', '  - service.yaml\n  - no-such-file.yaml\n'),
      );
      let failure: Error | undefined;
      await render(dir).catch((error: Error) => (failure = error));
      expect(failure?.message).to.match(/^kubectl kustomize .* failed: .*no-such-file\.yaml/s);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
