import { expect } from 'chai';
import { buildGuardrailSet } from '../../src/guardrails/guardrail-set.ts';
import type { GuardrailSettings } from '../../src/guardrails/guardrail-settings.ts';
import { readVerdict, webhookGuardrail, type WebhookPost } from '../../src/guardrails/webhook-guardrail.ts';
import { selectionFor } from '../../src/data-plane/guardrails/guardrail-run.ts';
import { ROUTE_TABLE } from '../../src/core/route-table.ts';
import type { ResolvedModel } from '../../src/core/model-registry.ts';

const SETTINGS: GuardrailSettings[] = [
  { name: 'no-emails', use: 'pii', on: 'request', action: 'redact', entities: ['email'] },
  { name: 'no-codes', use: 'regex', on: 'response', action: 'block', patterns: ['CODE-[0-9]{4}'], ignoreCase: false },
  {
    name: 'moderation',
    use: 'webhook',
    on: 'both',
    url: 'http://127.0.0.1:1/check',
    timeoutMs: 100,
    failMode: 'open',
    headers: {},
  },
];

describe('guardrails: the set of a configuration, and what each caller gets', () => {
  it('is nothing without guardrails configured', () => {
    expect(buildGuardrailSet([], [])).to.equal(undefined);
  });

  it('gives a caller naming none every guardrail, by phase: text ones, then webhooks', () => {
    const set = buildGuardrailSet(SETTINGS, [])!;
    expect(set.names).to.deep.equal(['no-emails', 'no-codes', 'moderation']);
    const all = set.select(undefined)!;
    expect(all.request!.text.map((guardrail) => guardrail.name)).to.deep.equal(['no-emails']);
    expect(all.request!.webhooks.map((guardrail) => guardrail.name)).to.deep.equal(['moderation']);
    expect(all.response!.text.map((guardrail) => guardrail.name)).to.deep.equal(['no-codes']);
    expect(set.select(undefined)).to.equal(all);
  });

  it('gives a caller the guardrails it names (unknown names skipped), and none for []', () => {
    const set = buildGuardrailSet(SETTINGS, [])!;
    const named = set.select(['no-codes', 'gone'])!;
    expect(named.request).to.equal(undefined);
    expect(named.response!.text.map((guardrail) => guardrail.name)).to.deep.equal(['no-codes']);
    expect(set.select([])).to.equal(undefined);
    expect(set.select(['no-emails'])!.responseFingerprint).to.equal(undefined);
  });

  it('fingerprints the response guardrails: the same settings the same, another set or other settings another', () => {
    const set = buildGuardrailSet(SETTINGS, [])!;
    const codes = set.select(['no-codes'])!.responseFingerprint;
    expect(codes).to.match(/^[0-9a-f]{32}$/);
    expect(buildGuardrailSet(SETTINGS, [])!.select(['no-codes'])!.responseFingerprint).to.equal(codes);
    expect(set.select(undefined)!.responseFingerprint).not.to.equal(codes);
    const changed = SETTINGS.map((entry) =>
      entry.name === 'no-codes' ? { ...entry, patterns: ['CODE-[0-9]{5}'] } : entry,
    );
    expect(buildGuardrailSet(changed, [])!.select(['no-codes'])!.responseFingerprint).not.to.equal(codes);
  });

  it("runs a request under its key's guardrails over its team's, else its team's, else every one", () => {
    const set = buildGuardrailSet(SETTINGS, [])!;
    const run = (caller: object | undefined) => selectionFor(set, caller as never);
    const names = (selection: ReturnType<typeof run>) =>
      [...(selection?.request?.text ?? []), ...(selection?.response?.text ?? [])].map((guardrail) => guardrail.name);
    expect(names(run(undefined))).to.deep.equal(['no-emails', 'no-codes']);
    expect(names(run({ id: 'k', team: { name: 't', guardrails: ['no-codes'] } }))).to.deep.equal(['no-codes']);
    expect(
      names(run({ id: 'k', guardrails: ['no-emails'], team: { name: 't', guardrails: ['no-codes'] } })),
    ).to.deep.equal(['no-emails']);
    expect(run({ id: 'k', guardrails: [], team: { name: 't' } })).to.equal(undefined);
    expect(selectionFor(undefined, undefined)).to.equal(undefined);
  });
});

describe('guardrails: the webhook', () => {
  it('reads allow, block and rewrite; anything else is no usable answer', () => {
    expect(readVerdict(200, '{"action":"allow"}', 1)).to.deep.equal({ kind: 'allow' });
    expect(readVerdict(201, '{"action":"block","reason":"toxic"}', 1)).to.deep.equal({ kind: 'block' });
    expect(readVerdict(200, '{"action":"rewrite","texts":["a","b"]}', 2)).to.deep.equal({
      kind: 'rewrite',
      texts: ['a', 'b'],
    });
    expect(readVerdict(200, '{"action":"rewrite","texts":["a"]}', 2)).to.deep.equal({
      kind: 'unavailable',
      reason: 'answered rewrite without texts: a list of 2 string(s), one for each text sent',
    });
    expect(readVerdict(500, '{"action":"allow"}', 1)).to.deep.equal({ kind: 'unavailable', reason: 'answered 500' });
    expect(readVerdict(200, 'ok', 1)).to.deep.equal({
      kind: 'unavailable',
      reason: 'answered with something that is not JSON',
    });
    expect(readVerdict(200, '{"allowed":true}', 1)).to.deep.equal({
      kind: 'unavailable',
      reason: "answered without an action ('allow', 'block' or 'rewrite')",
    });
  });

  it('posts the texts with their context and the configured headers, and never rejects', async () => {
    const sent: { url: string; body: string; headers: Record<string, string>; timeoutMs: number }[] = [];
    const answering =
      (answer: () => Promise<{ status: number; body: string }>): WebhookPost =>
      async (url, body, headers, timeoutMs) => {
        sent.push({ url, body, headers: { ...headers }, timeoutMs });
        return answer();
      };
    const settings = {
      name: 'hook',
      use: 'webhook' as const,
      on: 'both' as const,
      url: 'http://hook.example/check',
      timeoutMs: 250,
      failMode: 'closed' as const,
      headers: { authorization: 'Bearer secret' },
    };
    const context = {
      phase: 'request' as const,
      route: 'messages' as const,
      model: 'beta/beta-fable-5-1',
      keyId: 'key_1',
      team: 'support',
      requestId: 'req-9',
      stream: false,
    };
    const hook = webhookGuardrail(
      settings,
      { request: true, response: true },
      answering(async () => ({ status: 200, body: '{"action":"allow"}' })),
    );
    expect(await hook.check(['one', 'two'], context)).to.deep.equal({ kind: 'allow' });
    expect(sent[0]).to.deep.include({
      url: 'http://hook.example/check',
      headers: { authorization: 'Bearer secret' },
      timeoutMs: 250,
    });
    expect(JSON.parse(sent[0]!.body)).to.deep.equal({
      guardrail: 'hook',
      phase: 'request',
      texts: ['one', 'two'],
      context: {
        route: 'messages',
        model: 'beta/beta-fable-5-1',
        key_id: 'key_1',
        team: 'support',
        request_id: 'req-9',
        stream: false,
      },
    });
    const timedOut = webhookGuardrail(
      settings,
      { request: true, response: true },
      answering(() => Promise.reject(Object.assign(new Error('aborted'), { name: 'TimeoutError' }))),
    );
    expect(await timedOut.check(['x'], context)).to.deep.equal({
      kind: 'unavailable',
      reason: 'no answer within 250 ms',
    });
    const unreachable = webhookGuardrail(
      settings,
      { request: true, response: true },
      answering(() => Promise.reject(new Error('ECONNREFUSED'))),
    );
    expect(await unreachable.check(['x'], context)).to.deep.equal({
      kind: 'unavailable',
      reason: 'could not be reached',
    });
  });
});
