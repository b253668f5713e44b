import { expect } from 'chai';
import type { GuardrailActed } from '../../src/data-plane/guardrails/guardrail-run.ts';
import { guardrailReporter } from '../../src/ops/guardrail-reporter.ts';
import { EmbeddedGuardrailActionLog } from '../../src/stores/guardrail-actions/embedded-guardrail-action-log.ts';
import { captureLogs } from '../data-plane/pipeline/guarded-app.ts';

const AT = new Date('2026-03-04T05:06:07.000Z');

describe('guardrail reporter', () => {
  it('counts, logs (team included) and keeps each action, without the webhook detail', async () => {
    const counted: string[] = [];
    const logs = captureLogs();
    const actions = new EmbeddedGuardrailActionLog();
    const report = guardrailReporter(
      { guardrailAction: (guardrail, phase, action) => void counted.push(`${guardrail}/${phase}/${action}`) },
      logs.logger,
      actions,
      () => AT,
    );
    const blocked: GuardrailActed = {
      guardrail: 'moderation',
      phase: 'request',
      action: 'block',
      cause: 'unavailable',
      detail: 'at http://hook.internal:9000/check did not answer',
      route: 'messages',
      model: 'beta/fable-5',
      requestId: 'req-1',
      keyId: 'key_1',
      team: 'research',
    };
    report(blocked);
    report({
      guardrail: 'pii',
      phase: 'response',
      action: 'redact',
      cause: 'finding',
      route: 'chat-completions',
      model: 'alpha/gen-5.5',
    });
    expect(counted).to.deep.equal(['moderation/request/block', 'pii/response/redact']);
    expect(await actions.recent(10)).to.deep.equal([
      {
        at: AT.toISOString(),
        guardrail: 'pii',
        phase: 'response',
        action: 'redact',
        cause: 'finding',
        route: 'chat-completions',
        model: 'alpha/gen-5.5',
        key_id: null,
        team: null,
        request_id: null,
      },
      {
        at: AT.toISOString(),
        guardrail: 'moderation',
        phase: 'request',
        action: 'block',
        cause: 'unavailable',
        route: 'messages',
        model: 'beta/fable-5',
        key_id: 'key_1',
        team: 'research',
        request_id: 'req-1',
      },
    ]);
    const line = JSON.parse(
      logs
        .text()
        .split('\n')
        .find((text) => text.includes("guardrail 'moderation' blocked"))!,
    ) as Record<string, unknown>;
    expect(line).to.include({ guardrail: 'moderation', key_id: 'key_1', team: 'research', request_id: 'req-1' });
  });
});
