import { expect } from 'chai';
import { pino } from 'pino';
import { Writable } from 'node:stream';
import { EVENTS, type LimitAlert } from '../../../src/core/diagnostics.ts';
import { deliverAlerts, type AlertPost } from '../../../src/ops/alerts/alert-webhook.ts';
import { EmbeddedAlertLog } from '../../../src/stores/alerts/embedded-alert-log.ts';
import { signWebhook } from '../../../src/ops/alerts/webhook-signature.ts';

const SECRET = 'a-webhook-secret-of-thirty-two-chars-0001';
const URL = 'https://hooks.example.test/alerts?token=do-not-show';
const settings = { url: URL, secret: SECRET, attempts: 4, backoffMs: 5, maxBackoffMs: 10, timeoutMs: 1000 };

function alertOf(source: object): LimitAlert {
  return {
    source,
    id: 'alrt_0123456789abcdef',
    scope: 'key',
    owner: 'key_ab',
    team: 'eng',
    kind: 'budget',
    period: 'day',
    threshold: 80,
    used: 8.5,
    limit: 10,
    unit: 'usd',
    windowEnd: Date.UTC(2026, 0, 2),
    firedAt: Date.UTC(2026, 0, 1, 12),
  };
}

function harness(answers: (number | Error)[], overrides: Partial<typeof settings> = {}) {
  const source = {};
  const lines: string[] = [];
  const logger = pino(
    { level: 'info' },
    new Writable({ write: (chunk, _encoding, done) => (lines.push(String(chunk)), done()) }),
  );
  const log = new EmbeddedAlertLog();
  const calls: { url: string; body: string; headers: Record<string, string> }[] = [];
  const post: AlertPost = async (url, body, headers) => {
    calls.push({ url, body, headers });
    const answer = answers.shift() ?? 200;
    if (answer instanceof Error) throw answer;
    return answer;
  };
  const webhook = deliverAlerts({ source, settings: { ...settings, ...overrides }, log, logger, post });
  return { source, lines, log, calls, webhook };
}

const refused = () => Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });

describe('alert webhook deliverer', () => {
  it('posts the firing signed, retries 5xx, 429 and failures with back-off under one delivery id, and logs each attempt', async () => {
    const { source, log, calls, lines, webhook } = harness([503, refused(), 429, 200]);
    EVENTS.limitAlert.publish(alertOf(source));
    await webhook.idle();
    expect(calls).to.have.length(4);
    expect(new Set(calls.map((call) => call.headers['x-gateway-delivery'])).size).to.equal(1);
    for (const call of calls) {
      expect(call.headers['x-gateway-signature']).to.equal(
        signWebhook(SECRET, Number(call.headers['x-gateway-timestamp']), call.body),
      );
    }
    expect(JSON.parse(calls[0]!.body)).to.deep.equal({
      id: 'alrt_0123456789abcdef',
      type: 'limit.threshold',
      scope: 'key',
      owner: 'key_ab',
      kind: 'budget',
      period: 'day',
      threshold: 80,
      used: 8.5,
      limit: 10,
      unit: 'usd',
      window_end: '2026-01-02T00:00:00.000Z',
      fired_at: '2026-01-01T12:00:00.000Z',
    });
    const entries = await log.deliveries(10);
    expect(entries.map((entry) => [entry.attempt, entry.outcome, entry.status, entry.error])).to.deep.equal([
      [4, 'delivered', 200, null],
      [3, 'retrying', 429, null],
      [2, 'retrying', null, 'connection refused'],
      [1, 'retrying', 503, null],
    ]);
    // The URL (which may carry a credential) and the secret are never logged.
    expect(lines.join('')).to.include('retrying').and.not.include('do-not-show').and.not.include(SECRET);
  });

  it('does not retry a 4xx other than 408 and 429, and gives up after the last attempt', async () => {
    const rejected = harness([400]);
    EVENTS.limitAlert.publish(alertOf(rejected.source));
    await rejected.webhook.idle();
    expect((await rejected.log.deliveries(10)).map((entry) => [entry.attempt, entry.outcome])).to.deep.equal([
      [1, 'failed'],
    ]);
    const down = harness([refused(), refused(), refused()], { attempts: 3 });
    EVENTS.limitAlert.publish(alertOf(down.source));
    await down.webhook.idle();
    const entries = await down.log.deliveries(10);
    expect(entries.map((entry) => entry.outcome)).to.deep.equal(['failed', 'retrying', 'retrying']);
    expect(entries[0]!.next_attempt_at).to.equal(null);
    expect(down.lines.join('')).to.include('no attempt is left');
  });

  it('drops a retry still waiting when it closes', async () => {
    const { source, calls, log, webhook } = harness([500], { backoffMs: 60_000, maxBackoffMs: 60_000 });
    EVENTS.limitAlert.publish(alertOf(source));
    const nextTurn = () => new Promise((resolve) => setImmediate(resolve));
    while (calls.length === 0 || (await log.deliveries(1)).length === 0) await nextTurn();
    webhook.close();
    await webhook.idle();
    expect(calls).to.have.length(1);
  });
});
