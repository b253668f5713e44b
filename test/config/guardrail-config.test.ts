import { expect } from 'chai';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, inspectConfig, loadConfig } from '../../src/config/gateway-config.ts';
import { runCli } from '../../src/cli/main.ts';
import { PII_ENTITIES } from '../../src/guardrails/guardrail-settings.ts';

async function configFile(text: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'gateway-guardrail-config-'));
  const path = join(dir, 'gateway.yaml');
  await writeFile(path, text);
  return path;
}

describe('config: guardrails', () => {
  it('has none by default', async () => {
    expect(loadConfig({ GATEWAY_CONFIG: await configFile('') }).guardrails).to.deep.equal([]);
  });

  it('reads each kind with its defaults: on both, every pii entity, a webhook timeout of 1 s', async () => {
    const path = await configFile(`guardrails:
  - { name: no-emails, use: pii, on: request, action: redact, entities: [email, phone, card] }
  - { name: no-codes, use: regex, on: response, action: block, patterns: ['PROJECT-[0-9]{4}'] }
  - { name: moderation, use: webhook, on: both, url: http://127.0.0.1:9000/check, timeoutMs: 500, failMode: open }
  - { name: all-pii, use: pii, action: redact, replacement: '***', windowChars: 64 }
  - { name: custom, use: acme-tickets, action: block, options: { prefix: OPS } }
  - { name: shout, use: webhook, url: 'https://hooks.example/x', failMode: closed, headers: { authorization: 'Bearer t' } }
  - { name: cased, use: regex, action: redact, patterns: ['secret'], ignoreCase: true }
`);
    expect(loadConfig({ GATEWAY_CONFIG: path }).guardrails).to.deep.equal([
      { name: 'no-emails', on: 'request', action: 'redact', use: 'pii', entities: ['email', 'phone', 'card'] },
      {
        name: 'no-codes',
        on: 'response',
        action: 'block',
        use: 'regex',
        patterns: ['PROJECT-[0-9]{4}'],
        ignoreCase: false,
      },
      {
        name: 'moderation',
        on: 'both',
        use: 'webhook',
        url: 'http://127.0.0.1:9000/check',
        timeoutMs: 500,
        failMode: 'open',
        headers: {},
      },
      {
        name: 'all-pii',
        on: 'both',
        action: 'redact',
        replacement: '***',
        windowChars: 64,
        use: 'pii',
        entities: [...PII_ENTITIES],
      },
      { name: 'custom', on: 'both', action: 'block', use: 'acme-tickets', options: { prefix: 'OPS' } },
      {
        name: 'shout',
        on: 'both',
        use: 'webhook',
        url: 'https://hooks.example/x',
        timeoutMs: 1000,
        failMode: 'closed',
        headers: { authorization: 'Bearer t' },
      },
      { name: 'cased', on: 'both', action: 'redact', use: 'regex', patterns: ['secret'], ignoreCase: true },
    ]);
  });

  it('lists every problem of every entry at once, by line and field, never quoting a value', async () => {
    const path = await configFile(`guardrails:
  - { name: dup, use: regex, action: block, patterns: ['(unclosed', 'ok', 7, 'x*'] }
  - { name: dup, use: pii, on: sometimes, action: hide, entities: [email, passport], windowChars: 0 }
  - { name: hook, use: webhook, url: 'ftp://nope', timeoutMs: 0, action: block, headers: { x: 1 } }
  - { use: Regex!, action: block }
  - just a string
  - { name: ext, use: my-guard, action: redact, options: [1, 2], patterns: ['a'] }
  - { name: quiet, use: webhook, url: 'http://127.0.0.1:1/x' }
`);
    const { problems } = inspectConfig({ GATEWAY_CONFIG: path });
    const file = path;
    expect(problems).to.deep.equal([
      `${file} line 2, column 56: guardrails[0].patterns[0] is not a valid regular expression (Unterminated group)`,
      `${file} line 2, column 75: guardrails[0].patterns[2] must be a string`,
      `${file} line 2, column 78: guardrails[0].patterns[3] matches the empty text, so it would find something in every text`,
      `${file} line 3, column 7: guardrails[1].name is taken by guardrails[0]: each guardrail needs its own name`,
      `${file} line 3, column 28: guardrails[1].on must be request, response or both`,
      `${file} line 3, column 43: guardrails[1].action must be block or redact`,
      `${file} line 3, column 86: guardrails[1].windowChars must be an integer from 1 to 65536`,
      `${file} line 3, column 75: guardrails[1].entities[1] must be one of email, phone, card, iban, ip, secret`,
      `${file} line 4, column 66: guardrails[2].action is not a setting of a webhook guardrail (settings: name, use, on, url, timeoutMs, failMode, headers)`,
      `${file} line 4, column 33: guardrails[2].url must be an http:// or https:// URL`,
      `${file} line 4, column 52: guardrails[2].timeoutMs must be an integer from 1 to 60000 (ms)`,
      `${file} line 4, column 5: guardrails[2].failMode is missing: open (let the text pass) or closed (refuse it) when the webhook does not answer in time`,
      `${file} line 4, column 81: guardrails[2].headers must map header names to strings`,
      `${file} line 5, column 5: guardrails[3].name must be a name of 1 to 64 letters, digits, ., _ or -, starting with a letter or digit`,
      `${file} line 5, column 7: guardrails[3].use must be regex, pii, webhook or the name of a guardrail plugin`,
      `${file} line 6, column 5: guardrails[4] must be a mapping: { name, use, on, … }`,
      `${file} line 7, column 66: guardrails[5].patterns is not a setting of a guardrail plugin entry (settings: name, use, on, action, replacement, windowChars, options)`,
      `${file} line 7, column 49: guardrails[5].options must be a mapping`,
      `${file} line 8, column 5: guardrails[6].failMode is missing: open (let the text pass) or closed (refuse it) when the webhook does not answer in time`,
    ]);
    expect(problems.join('\n')).not.to.contain('ftp://nope').and.not.to.contain('(unclosed');
    expect(() => loadConfig({ GATEWAY_CONFIG: path })).to.throw(ConfigError);
  });

  it('refuses a list that is not one', async () => {
    const { problems } = inspectConfig({ GATEWAY_CONFIG: await configFile('guardrails: { name: x }\n') });
    expect(problems).to.have.length(1);
    expect(problems[0]).to.match(/line 1, column 1: guardrails must be a list of guardrail entries/);
  });

  it("config check names a use that is neither built in nor a loaded guardrail plugin, after the file's own problems", async () => {
    const path = await configFile('guardrails:\n  - { name: ext, use: not-loaded, action: block }\n');
    let out = '';
    let err = '';
    const code = await runCli(
      ['config', 'check', path],
      { out: (text) => (out += text), err: (text) => (err += text) },
      {},
    );
    expect(code).to.equal(1);
    expect(out).to.equal('');
    expect(err).to.contain(
      `line 2, column 18: guardrails[0].use: 'not-loaded' is neither a built-in guardrail (regex, pii, webhook) nor a loaded guardrail plugin (none is loaded)`,
    );
  });
});
