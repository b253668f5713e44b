import fc from 'fast-check';

/**
 * Whether `text` shows `secret` when read in any of the ways a client might: as it is, JSON-unescaped
 * (`\uXXXX` and `\/`, behind any run of backslashes, so JSON nested in JSON strings too) and
 * percent-decoded, each applied again to the result a few times. A regex reading, independent of the
 * redactor's own matcher.
 */
export function revealsSecret(text: string, secret: string): boolean {
  let reading = text;
  for (let pass = 0; pass < 4; pass++) {
    if (reading.includes(secret)) return true;
    reading = reading
      .replace(/\\+u([0-9a-fA-F]{4})/g, (_match, hex: string) => String.fromCharCode(parseInt(hex, 16)))
      .replace(/\\+\//g, '/')
      .replace(/%([0-9a-fA-F]{2})/g, (_match, hex: string) => String.fromCharCode(parseInt(hex, 16)));
  }
  return reading.includes(secret);
}

/** A provider key of realistic shape. */
export const realisticKey = fc.string({
  unit: fc.constantFrom(...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-'),
  minLength: 20,
  maxLength: 64,
});

/** How one character is written. */
export type CharEncoding = 'raw' | 'json' | 'json-upper' | 'json-nested' | 'percent' | 'percent-lower';

const hex = (code: number, width: number) => code.toString(16).padStart(width, '0');

function encodeChar(char: string, encoding: CharEncoding): string {
  const code = char.charCodeAt(0);
  switch (encoding) {
    case 'raw':
      return char;
    case 'json':
      return `\\u${hex(code, 4)}`;
    case 'json-upper':
      return `\\u${hex(code, 4).toUpperCase()}`;
    case 'json-nested':
      return `\\\\u${hex(code, 4)}`;
    case 'percent':
      return `%${hex(code, 2).toUpperCase()}`;
    case 'percent-lower':
      return `%${hex(code, 2)}`;
  }
}

/** `key` with each character written its own way. */
export function encodeKey(key: string, encodings: readonly CharEncoding[]): string {
  return Array.from(key, (char, index) => encodeChar(char, encodings[index % encodings.length]!)).join('');
}

const charEncoding = fc.constantFrom<CharEncoding>(
  'raw',
  'json',
  'json-upper',
  'json-nested',
  'percent',
  'percent-lower',
);

/** Per-character encodings for a key of `length`: a random mix, or one way for every character. */
export const keyEncodings = (length: number) =>
  fc.oneof(
    fc.array(charEncoding, { minLength: length, maxLength: length }),
    charEncoding.map((encoding) => [encoding]),
  );

/** A realistic key and one written form of it. */
export const encodedKey = realisticKey.chain((key) =>
  keyEncodings(key.length).map((encodings) => ({ key, encoded: encodeKey(key, encodings) })),
);
