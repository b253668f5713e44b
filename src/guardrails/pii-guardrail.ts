import { isIPv6 } from 'node:net';
import type { Finding, Phases, TextGuardrail } from './guardrail.ts';
import type { PiiEntity, PiiSettings } from './guardrail-settings.ts';
import { longestMatch } from './regex-length.ts';

/**
 * One kind of personal data or secret: a pattern for candidates, a check that keeps the real ones
 * (a card's Luhn digit, an IBAN's mod-97 checksum), a cheap test that the text may hold one at all, and
 * the default stand-in.
 */
interface Detector {
  /** The candidates; for an entity found by `find`, what bounds its length (the stream window is read from it). */
  readonly pattern: RegExp;
  readonly replacement: string;
  /** False when the text cannot hold a candidate (skips the pattern). */
  readonly mayHold: (text: string) => boolean;
  /** The finding's span in the match (default: the whole match), or undefined when the candidate is not one. */
  readonly validate?: (match: string) => readonly [number, number] | undefined;
  /** Finds the entity's spans itself, where the pattern scanned at every position would cost too much. */
  readonly find?: (text: string, into: (start: number, end: number) => void) => void;
}

const HAS_DIGIT = /\d/;
const HAS_UPPER_DIGITS = /[A-Z]{2}\d{2}/;
const SECRET_MARKS = /AKIA|ASIA|ABIA|ACCA|gh[pousr]_|AIza|xox[abprs]-|-----BEGIN/;
const HEX_DIGIT = /[0-9A-Fa-f]/;

/** Whether the digits pass the Luhn check (the last is the check digit). */
export function luhnValid(digits: string): boolean {
  let sum = 0;
  for (let index = 0; index < digits.length; index++) {
    let digit = digits.charCodeAt(digits.length - 1 - index) - 48;
    if (index % 2 === 1) {
      digit *= 2;
      if (digit > 9) digit -= 9;
    }
    sum += digit;
  }
  return sum % 10 === 0;
}

/** Whether an IBAN (letters and digits, no spaces) passes its ISO 13616 mod-97 check. */
export function ibanValid(compact: string): boolean {
  if (compact.length < 15 || compact.length > 34) return false;
  const moved = compact.slice(4) + compact.slice(0, 4);
  let remainder = 0;
  for (const char of moved) {
    const code = char.charCodeAt(0);
    const value = code >= 65 ? code - 55 : code - 48;
    remainder = (value > 9 ? remainder * 100 + value : remainder * 10 + value) % 97;
  }
  return remainder === 1;
}

/** The longest prefix of an IBAN candidate (spaces kept) that passes the checksum: its span, else undefined. */
function ibanSpan(candidate: string): readonly [number, number] | undefined {
  const positions: number[] = [];
  let compact = '';
  for (let index = 0; index < candidate.length; index++) {
    if (candidate[index] === ' ') continue;
    compact += candidate[index];
    positions.push(index);
  }
  for (let length = Math.min(34, compact.length); length >= 15; length--) {
    if (ibanValid(compact.slice(0, length))) return [0, positions[length - 1]! + 1];
  }
  return undefined;
}

/** A character of an e-mail address's local part. */
const LOCAL_CHAR = /[A-Za-z0-9._%+-]/;
/** An address's domain, from right after its `@`. */
const DOMAIN = /(?:[A-Za-z0-9-]{1,40}\.){1,3}[A-Za-z]{2,12}(?![A-Za-z0-9-])/y;
const IPV6_MARK = /::|[0-9A-Fa-f]:[0-9A-Fa-f]{1,4}:/;
const IPV4_MARK = /\d\.\d/;

/**
 * E-mail addresses, from each `@` (found natively): the longest run of local-part characters before it
 * (at most 64), and a domain after it. The same spans as the pattern, which tried at every position of a
 * text holding an `@` costs a pass of up to 64 characters per position.
 */
function findEmails(text: string, into: (start: number, end: number) => void): void {
  let after = 0;
  for (let at = text.indexOf('@'); at !== -1; at = text.indexOf('@', at + 1)) {
    let start = at;
    while (start > after && at - start < 64 && LOCAL_CHAR.test(text[start - 1]!)) start--;
    if (start === at) continue;
    DOMAIN.lastIndex = at + 1;
    const domain = DOMAIN.exec(text);
    if (!domain) continue;
    into(start, DOMAIN.lastIndex);
    after = DOMAIN.lastIndex;
    at = after - 1;
  }
}

/** Whether each part of a dotted quad is an octet written without leading zeros. */
function octets(match: string): boolean {
  return match.split('.').every((part) => Number(part) <= 255 && (part.length === 1 || part[0] !== '0'));
}

const DETECTORS: Readonly<Record<PiiEntity, Detector>> = {
  // A local part of at most 64 characters, then up to four domain labels and a top-level domain.
  email: {
    pattern: /[A-Za-z0-9._%+-]{1,64}@(?:[A-Za-z0-9-]{1,40}\.){1,3}[A-Za-z]{2,12}(?![A-Za-z0-9-])/g,
    replacement: '[EMAIL]',
    mayHold: (text) => text.includes('@'),
    find: findEmails,
  },
  // International (+ and a country code) or North American (three, three and four digits).
  phone: {
    pattern:
      /(?<![\w+])(?:\+\d{1,3}(?:[ .-]?\(?\d{1,4}\)?)(?:[ .-]?\d{2,4}){2,4}|(?:\(\d{3}\) ?|\d{3}[ .-])\d{3}[ .-]\d{4})(?!\w)/g,
    replacement: '[PHONE]',
    mayHold: (text) => HAS_DIGIT.test(text),
    validate: (match) => {
      const digits = match.replace(/\D/g, '').length;
      return digits >= 8 && digits <= 15 ? [0, match.length] : undefined;
    },
  },
  // 13 to 19 digits, single spaces or dashes between them allowed, passing the Luhn check.
  card: {
    pattern: /(?<![\d])\d(?:[ -]?\d){12,18}(?![\d])/g,
    replacement: '[CARD]',
    mayHold: (text) => HAS_DIGIT.test(text),
    validate: (match) => (luhnValid(match.replace(/[ -]/g, '')) ? [0, match.length] : undefined),
  },
  // A country code, two check digits and 11 to 30 letters or digits (single spaces allowed), passing mod-97.
  iban: {
    pattern: /(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}/g,
    replacement: '[IBAN]',
    mayHold: (text) => HAS_UPPER_DIGITS.test(text),
    validate: ibanSpan,
  },
  // IPv4 dotted quads, and IPv6 addresses (full or compressed) that Node's parser accepts.
  ip: {
    pattern:
      /(?<![\d.])\d{1,3}(?:\.\d{1,3}){3}(?!\.?\d)|(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])/g,
    replacement: '[IP]',
    mayHold: (text) => IPV4_MARK.test(text) || IPV6_MARK.test(text),
    validate: (match) =>
      (match.includes(':') ? HEX_DIGIT.test(match) && isIPv6(match) : octets(match)) ? [0, match.length] : undefined,
  },
  // Provider API keys (sk-…), AWS access key ids, GitHub, Google and Slack tokens, PEM private keys.
  secret: {
    pattern:
      /\bsk-[A-Za-z0-9_-]{16,180}|\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b|\bgh[pousr]_[A-Za-z0-9]{36,80}\b|\bAIza[0-9A-Za-z_-]{35}|\bxox[abprs]-[A-Za-z0-9-]{10,80}|-----BEGIN [A-Z ]{0,20}PRIVATE KEY-----/g,
    replacement: '[SECRET]',
    mayHold: (text) => text.includes('sk-') || SECRET_MARKS.test(text),
  },
};

/** The longest text each entity's pattern can match (its stream window). */
export const PII_WINDOWS: Readonly<Record<PiiEntity, number>> = Object.fromEntries(
  Object.entries(DETECTORS).map(([entity, detector]) => [entity, longestMatch(detector.pattern.source)]),
) as Record<PiiEntity, number>;

/** Findings of one entity in `text`. */
function findEntity(detector: Detector, text: string, replacement: string, into: Finding[]): void {
  if (!detector.mayHold(text)) return;
  if (detector.find) return detector.find(text, (start, end) => void into.push({ start, end, replacement }));
  const { pattern, validate } = detector;
  pattern.lastIndex = 0;
  for (let match = pattern.exec(text); match !== null; match = pattern.exec(text)) {
    const span = validate ? validate(match[0]) : ([0, match[0].length] as const);
    if (span) into.push({ start: match.index + span[0], end: match.index + span[1], replacement });
  }
}

/**
 * The `pii` guardrail: e-mail addresses, phone numbers, payment cards (Luhn-checked), IBANs (mod-97
 * checked), IP addresses and secrets, as chosen by `entities`; each redacted as `[EMAIL]`, `[PHONE]`,
 * `[CARD]`, `[IBAN]`, `[IP]`, `[SECRET]`, or all as `replacement` when one is set. Its stream window is
 * the longest candidate of the chosen entities, or `windowChars`.
 */
export function piiGuardrail(settings: PiiSettings, phases: Phases): TextGuardrail {
  const detectors = settings.entities.map((entity) => ({
    detector: DETECTORS[entity],
    replacement: settings.replacement ?? DETECTORS[entity].replacement,
  }));
  return {
    kind: 'text',
    name: settings.name,
    phases,
    action: settings.action,
    window: settings.windowChars ?? Math.max(...settings.entities.map((entity) => PII_WINDOWS[entity])),
    find(text) {
      const found: Finding[] = [];
      for (const { detector, replacement } of detectors) findEntity(detector, text, replacement, found);
      return found;
    },
  };
}
