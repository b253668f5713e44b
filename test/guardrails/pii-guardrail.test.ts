import { expect } from 'chai';
import { checkText, mergeFindings } from '../../src/guardrails/text-engine.ts';
import type { TextContext } from '../../src/guardrails/guardrail.ts';
import { PII_ENTITIES, type PiiEntity } from '../../src/guardrails/guardrail-settings.ts';
import { ibanValid, luhnValid, PII_WINDOWS, piiGuardrail } from '../../src/guardrails/pii-guardrail.ts';

const CONTEXT: TextContext = { phase: 'request', route: 'chat-completions', model: 'alpha/gen-5.5' };
const pii = (entities: readonly PiiEntity[] = PII_ENTITIES, replacement?: string) =>
  piiGuardrail(
    {
      name: 'pii',
      use: 'pii',
      on: 'both',
      action: 'redact',
      entities,
      ...(replacement === undefined ? {} : { replacement }),
    },
    { request: true, response: true },
  );
const found = (text: string, entities?: readonly PiiEntity[]) =>
  mergeFindings(pii(entities).find(text, CONTEXT)).map((finding) => text.slice(finding.start, finding.end));
const redacted = (text: string, entities?: readonly PiiEntity[]) => {
  const verdict = checkText(text, [pii(entities)], CONTEXT);
  return verdict.kind === 'redact' ? verdict.text : text;
};

describe('guardrails: the pii guardrail', () => {
  it('finds e-mail addresses', () => {
    expect(found('Write to ada.lovelace+notes@mail.example.co.uk or bob@example.com.', ['email'])).to.deep.equal([
      'ada.lovelace+notes@mail.example.co.uk',
      'bob@example.com',
    ]);
    expect(found('a @ b, user@localhost, @handle', ['email'])).to.deep.equal([]);
  });

  it('finds phone numbers, international and North American, not dates or plain numbers', () => {
    expect(found('Call +44 20 7946 0958, (212) 555-0199 or 415.555.0123.', ['phone'])).to.deep.equal([
      '+44 20 7946 0958',
      '(212) 555-0199',
      '415.555.0123',
    ]);
    expect(found('On 2024-01-15 we sold 1234567 units at 12:30.', ['phone'])).to.deep.equal([]);
  });

  it('finds payment cards only when their Luhn digit checks out', () => {
    expect(luhnValid('4111111111111111')).to.equal(true);
    expect(luhnValid('4111111111111112')).to.equal(false);
    expect(found('Card 4111 1111 1111 1111, or 5500-0000-0000-0004; not 4111 1111 1111 1112.', ['card'])).to.deep.equal(
      ['4111 1111 1111 1111', '5500-0000-0000-0004'],
    );
    expect(found('Order 12345678901234 shipped.', ['card'])).to.deep.equal([]);
  });

  it('finds IBANs whose mod-97 checksum holds, with or without spaces, and not the word after', () => {
    expect(ibanValid('DE89370400440532013000')).to.equal(true);
    expect(ibanValid('DE89370400440532013001')).to.equal(false);
    expect(found('Pay DE89 3704 0044 0532 0130 00 ABC or GB82WEST12345698765432.', ['iban'])).to.deep.equal([
      'DE89 3704 0044 0532 0130 00',
      'GB82WEST12345698765432',
    ]);
    expect(found('Ref XX12 3456 7890 1234 56 is not one.', ['iban'])).to.deep.equal([]);
  });

  it('finds IPv4 and IPv6 addresses, not versions with more parts, times or C++ scopes', () => {
    expect(found('Hosts 192.168.0.1, 2001:db8::8a2e:370:7334 and ::1.', ['ip'])).to.deep.equal([
      '192.168.0.1',
      '2001:db8::8a2e:370:7334',
      '::1',
    ]);
    expect(found('Version 1.2.3.4.5, at 10:30:00, std::vector, 999.1.1.1', ['ip'])).to.deep.equal([]);
  });

  it('finds common secret formats: provider keys, AWS access key ids, GitHub, Google and Slack tokens, private keys', () => {
    const secrets = [
      'sk-proj-abcdefghijklmnopqrstuvwx12',
      'AKIAIOSFODNN7EXAMPLE',
      `ghp_${'a'.repeat(36)}`,
      `AIza${'b'.repeat(35)}`,
      'xoxb-1234567890-abcdefghij',
      '-----BEGIN RSA PRIVATE KEY-----',
    ];
    expect(found(secrets.join(' and '), ['secret'])).to.deep.equal(secrets);
    expect(found('ask-me-anything-at-all-please and sk-short', ['secret'])).to.deep.equal([]);
  });

  it('redacts each entity as its own placeholder, or all as the replacement set', () => {
    expect(
      redacted('Mail bob@example.com, card 4111111111111111, key sk-abcdefghijklmnopqrstuvwx, from 10.0.0.1.'),
    ).to.equal('Mail [EMAIL], card [CARD], key [SECRET], from [IP].');
    const verdict = checkText('bob@example.com', [pii(['email'], '***')], CONTEXT);
    expect(verdict).to.deep.equal({ kind: 'redact', text: '***', guardrails: ['pii'] });
  });

  it('holds the longest candidate of the chosen entities in a stream', () => {
    expect(pii(['card']).window).to.equal(PII_WINDOWS.card);
    expect(PII_WINDOWS.card).to.equal(37);
    expect(pii(['ip', 'phone']).window).to.equal(Math.max(PII_WINDOWS.ip, PII_WINDOWS.phone));
    expect(pii().window).to.equal(Math.max(...PII_ENTITIES.map((entity) => PII_WINDOWS[entity])));
    for (const entity of PII_ENTITIES)
      expect(PII_WINDOWS[entity], entity).to.be.a('number').and.to.be.lessThan(Infinity);
  });
});
