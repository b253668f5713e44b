import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { promisify } from 'node:util';
import { runCli } from '../../../src/cli/main.ts';
import { hashApiKey } from '../../../src/core/api-keys.ts';
import { AUDIT_EVENT_NAME } from '../../../src/ops/audit/otlp-audit-logs.ts';
import { eventually } from '../../helpers/eventually.ts';
import { OtlpReceiver, type ReceivedLogRecord } from '../../helpers/otlp-receiver.ts';
import { startTestGateway, type TestGateway } from '../../helpers/test-gateway.ts';

const ADMIN_TOKEN = 'otlp-audit-admin-token-0123456789abcdef';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' };

interface StoredRecord {
  seq: number;
  time: string;
  actor: { kind: string; id: string; name?: string; roles: string[] } | null;
  via: string;
  address: string | null;
  action: string;
  outcome: string;
  target: { type: string; id?: string; team?: string | null };
  before: unknown;
  after: unknown;
  reason: string | null;
  prev: string;
  hash: string;
}

async function call(test: TestGateway, method: string, path: string, headers: Record<string, string>, body?: unknown) {
  const response = await fetch(`${test.url}${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  type Answer = { id: string; key: string; token: string; data: unknown };
  return { status: response.status, json: (await response.json()) as Answer };
}

async function stored(test: TestGateway): Promise<StoredRecord[]> {
  return ((await call(test, 'GET', '/admin/audit?limit=1000', admin)).json.data as StoredRecord[]).reverse();
}

/** The five records {@link changeThings} makes, once the audit log has stored them all. */
async function storedChanges(test: TestGateway): Promise<StoredRecord[]> {
  let records: StoredRecord[] = [];
  await eventually(async () => (records = await stored(test)).length === 5, 'five records stored');
  return records;
}

/**
 * Changes through the admin API: a team, a key in it, a service token, a refusal of that token's role and
 * a wrong credential. Gives back the secrets made, which no log record may hold.
 */
async function changeThings(test: TestGateway): Promise<string[]> {
  expect((await call(test, 'POST', '/admin/teams', admin, { name: 'blue', rpm: 50 })).status).to.equal(201);
  const key = await call(test, 'POST', '/admin/keys', admin, { name: 'blue worker', team: 'blue' });
  expect(key.status).to.equal(201);
  const token = await call(test, 'POST', '/admin/tokens', admin, {
    name: 'blue reader',
    role: 'viewer',
    teams: ['blue'],
  });
  expect(token.status).to.equal(201);
  const asViewer = { authorization: `Bearer ${token.json.token}`, 'content-type': 'application/json' };
  expect((await call(test, 'PATCH', `/admin/keys/${key.json.id}`, asViewer, { rpm: 5 })).status).to.equal(403);
  expect((await call(test, 'GET', '/admin/keys', { authorization: 'Bearer not-the-admin-token' })).status).to.equal(
    401,
  );
  return [key.json.key, token.json.token, hashApiKey(key.json.key), hashApiKey(token.json.token), ADMIN_TOKEN];
}

describe('audit records as OTLP logs, decoded by a real OTLP receiver', function () {
  this.timeout(60_000);

  for (const protocol of ['http/protobuf', 'http/json'] as const) {
    it(`sends each audit record once as an OTLP log record (${protocol}): the record whole, its fields as attributes, never a secret`, async () => {
      const receiver = await OtlpReceiver.start();
      const test = await startTestGateway({
        env: {
          GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN,
          OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
          OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
          OTEL_SERVICE_NAME: 'audited-gateway',
        },
      });
      try {
        const secrets = await changeThings(test);
        const records = await storedChanges(test);
        await eventually(() => receiver.logs.length === records.length, 'every stored record as a log record', 10_000);
        expect(receiver.problems).to.deep.equal([]);
        expect(
          receiver.contentTypes.every((type) =>
            type.startsWith(protocol === 'http/json' ? 'application/json' : 'application/x-protobuf'),
          ),
        ).to.equal(true);
        expect(records.map((record) => `${record.action} ${record.outcome}`)).to.deep.equal([
          'team.create ok',
          'key.create ok',
          'token.create ok',
          'keys.write refused',
          'authenticate refused',
        ]);

        // The same records, in the order kept: the body is the stored record without its place in the chain.
        const bodies = receiver.logs.map((log) => JSON.parse(String(log.body)) as Record<string, unknown>);
        expect(bodies).to.deep.equal(records.map(({ seq: _seq, prev: _prev, hash: _hash, ...entry }) => entry));
        for (const [index, record] of records.entries()) {
          const log: ReceivedLogRecord = receiver.logs[index]!;
          const refused = record.outcome === 'refused';
          expect(log).to.deep.include({
            eventName: AUDIT_EVENT_NAME,
            severityNumber: refused ? 13 : 9,
            severityText: refused ? 'WARN' : 'INFO',
            scope: 'model-gateway',
          });
          expect(log.timeUnixNano).to.equal(BigInt(Date.parse(record.time)) * 1_000_000n);
          expect(log.resource['service.name']).to.equal('audited-gateway');
          const expected: Record<string, unknown> = {
            'gateway.audit.action': record.action,
            'gateway.audit.outcome': record.outcome,
            'gateway.audit.via': 'admin',
            'gateway.audit.target.type': record.target.type,
            'client.address': '127.0.0.1',
          };
          if (record.actor)
            Object.assign(expected, {
              'gateway.audit.actor.kind': record.actor.kind,
              'gateway.audit.actor.id': record.actor.id,
              'gateway.audit.actor.roles': record.actor.roles,
            });
          if (record.actor?.name) expected['gateway.audit.actor.name'] = record.actor.name;
          if (record.target.id) expected['gateway.audit.target.id'] = record.target.id;
          if (record.target.team) expected['gateway.audit.target.team'] = record.target.team;
          if (record.reason) expected['gateway.audit.reason'] = record.reason;
          expect(log.attributes, record.action).to.deep.equal(expected);
        }
        const refusal = receiver.logs.find((log) => log.attributes['gateway.audit.action'] === 'keys.write')!;
        expect(refusal.attributes).to.deep.include({
          'gateway.audit.actor.kind': 'service-token',
          'gateway.audit.actor.roles': ['viewer:blue'],
          'gateway.audit.target.team': 'blue',
        });
        const everything = JSON.stringify(receiver.logs, (_name, value) =>
          typeof value === 'bigint' ? String(value) : value,
        );
        for (const secret of secrets) expect(everything).to.not.include(secret);
      } finally {
        await test.close();
        await receiver.close();
      }
    });
  }

  it("sends the CLI's changes too, before the command returns", async () => {
    const receiver = await OtlpReceiver.start();
    const dataDir = await mkdtemp(join(tmpdir(), 'gateway-otlp-audit-cli-'));
    try {
      const io = { out: () => {}, err: (text: string) => expect.fail(text) };
      const env = { GATEWAY_DATA_DIR: dataDir, OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url };
      expect(await runCli(['teams', 'create', 'green', '--rpm', '10'], io, env)).to.equal(0);
      expect(receiver.logs).to.have.length(1);
      const [log] = receiver.logs;
      const cli = { 'gateway.audit.via': 'cli', 'gateway.audit.actor.kind': 'cli' };
      expect(log!.attributes).to.deep.include({
        ...cli,
        'gateway.audit.action': 'team.create',
        'gateway.audit.target.id': 'green',
      });
      const body = JSON.parse(String(log!.body)) as { before: unknown; after: Record<string, unknown> };
      expect(body.before).to.equal(null);
      expect(body.after).to.deep.include({ name: 'green', rpm: 10 });
    } finally {
      await receiver.close();
      await rm(dataDir, { recursive: true, force: true });
    }
  });

  it('answers every change while the collector does not answer, keeps each in the store, and logs the records it could not send (how many, nothing of them)', async () => {
    const receiver = await OtlpReceiver.start();
    receiver.answer = 'hang';
    const lines: string[] = [];
    const logTo = new PassThrough();
    logTo.on('data', (chunk: Buffer) => lines.push(...chunk.toString('utf8').split('\n').filter(Boolean)));
    const test = await startTestGateway({
      env: {
        GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN,
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_EXPORTER_OTLP_TIMEOUT: '300',
        LOG_LEVEL: 'warn',
      },
      logTo,
    });
    try {
      const secrets = await changeThings(test);
      await storedChanges(test);
      await eventually(
        () => lines.some((line) => line.includes('audit records could not be sent as OTLP logs')),
        'the lost records logged',
        10_000,
      );
      const warning = JSON.parse(lines.find((line) => line.includes('audit records could not be sent'))!) as {
        level: number;
        records: number;
      };
      expect(warning.level).to.equal(40);
      expect(warning.records).to.be.at.least(1);
      for (const secret of secrets) expect(lines.join('\n')).to.not.include(secret);
      expect(receiver.logs).to.deep.equal([]);
    } finally {
      await test.close();
      await receiver.close();
    }
  });

  it('sends no log record with OTEL_LOGS_EXPORTER=none or OTEL_SDK_DISABLED=true, and loads the logs SDK only when logs are configured', async () => {
    const receiver = await OtlpReceiver.start();
    try {
      for (const off of [{ OTEL_LOGS_EXPORTER: 'none' }, { OTEL_SDK_DISABLED: 'true' }]) {
        const env = { GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN, OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, ...off };
        const test = await startTestGateway({ env });
        try {
          await changeThings(test);
          await storedChanges(test);
        } finally {
          await test.close();
        }
      }
      expect(receiver.logs).to.deep.equal([]);
      // A gateway in a process of its own: which modules it loaded, without logs configured and with.
      const loaded = async (env: NodeJS.ProcessEnv) => {
        const script = [
          "import { createRequire } from 'node:module';",
          "import { startTestGateway } from './test/helpers/test-gateway.ts';",
          'const test = await startTestGateway({ env: JSON.parse(process.env.GATEWAY_TEST_ENV) });',
          "const sdk = Object.keys(createRequire(import.meta.url).cache).some((path) => path.includes('/@opentelemetry/sdk-logs/'));",
          'await test.close();',
          'console.log(JSON.stringify({ sdk }));',
        ].join('\n');
        const { stdout } = await promisify(execFile)(
          process.execPath,
          ['--import', 'tsx', '--input-type=module', '-e', script],
          {
            env: { ...process.env, GATEWAY_TEST_ENV: JSON.stringify(env) },
          },
        );
        return (JSON.parse(stdout.trim().split('\n').at(-1)!) as { sdk: boolean }).sdk;
      };
      expect(await loaded({ GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN })).to.equal(false);
      expect(
        await loaded({ GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN, OTEL_EXPORTER_OTLP_LOGS_ENDPOINT: `${receiver.url}/v1/logs` }),
      ).to.equal(true);
    } finally {
      await receiver.close();
    }
  });
});
