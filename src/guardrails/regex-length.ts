/**
 * The longest text a JavaScript regular expression (no `u` or `v` flag) can match, in UTF-16 code
 * units: what a stream must hold back so that a match split across events is still seen whole.
 * `Infinity` for a pattern whose matches are unbounded (`*`, `+`, `{n,}`, a backreference).
 *
 * A small recursive reader of the pattern's syntax: alternatives take their longest, a sequence adds
 * up, a quantifier multiplies by its upper bound, a class or `.` is one unit, assertions (`^`, `$`,
 * `\b`, lookarounds) are none. It assumes a pattern `new RegExp` accepts.
 */
export function longestMatch(pattern: string): number {
  const reader = new PatternReader(pattern);
  const length = reader.alternation();
  return length;
}

class PatternReader {
  private at = 0;

  constructor(private readonly source: string) {}

  /** `a|b|c` up to the end or a closing `)`: the longest alternative. */
  alternation(): number {
    let longest = this.sequence();
    while (this.source[this.at] === '|') {
      this.at++;
      longest = Math.max(longest, this.sequence());
    }
    return longest;
  }

  private sequence(): number {
    let total = 0;
    while (this.at < this.source.length && this.source[this.at] !== '|' && this.source[this.at] !== ')') {
      const atom = this.atom();
      total += this.quantified(atom);
    }
    return total;
  }

  private atom(): number {
    const char = this.source[this.at]!;
    if (char === '(') return this.group();
    if (char === '[') return this.characterClass();
    if (char === '\\') return this.escape();
    this.at++;
    if (char === '^' || char === '$') return 0;
    return 1;
  }

  private group(): number {
    this.at++;
    let lookaround = false;
    if (this.source[this.at] === '?') {
      const next = this.source[this.at + 1];
      if (next === ':') this.at += 2;
      else if (next === '=' || next === '!') {
        lookaround = true;
        this.at += 2;
      } else if (next === '<' && (this.source[this.at + 2] === '=' || this.source[this.at + 2] === '!')) {
        lookaround = true;
        this.at += 3;
      } else if (next === '<') {
        // A named group: `(?<name>`.
        this.at = this.source.indexOf('>', this.at) + 1;
      }
    }
    const inner = this.alternation();
    this.at++; // `)`
    return lookaround ? 0 : inner;
  }

  private characterClass(): number {
    this.at++;
    if (this.source[this.at] === '^') this.at++;
    // A `]` right after `[` (or `[^`) closes an empty class in JavaScript.
    while (this.at < this.source.length && this.source[this.at] !== ']')
      this.at += this.source[this.at] === '\\' ? 2 : 1;
    this.at++;
    return 1;
  }

  private escape(): number {
    const next = this.source[this.at + 1] ?? '';
    this.at += 2;
    if (next === 'b' || next === 'B') return 0;
    if (/[1-9]/.test(next) || (next === 'k' && this.source[this.at] === '<')) {
      // A backreference: as long as what it repeats, which this reader does not follow.
      while (/[0-9]/.test(this.source[this.at] ?? '')) this.at++;
      if (next === 'k') this.at = this.source.indexOf('>', this.at) + 1;
      return Infinity;
    }
    if (next === 'x' && /^[0-9A-Fa-f]{2}$/.test(this.source.slice(this.at, this.at + 2))) this.at += 2;
    else if (next === 'u' && /^[0-9A-Fa-f]{4}$/.test(this.source.slice(this.at, this.at + 4))) this.at += 4;
    else if (next === 'c' && /[A-Za-z]/.test(this.source[this.at] ?? '')) this.at += 1;
    return 1;
  }

  /** The atom's length under the quantifier that follows it, if any. */
  private quantified(atom: number): number {
    const char = this.source[this.at];
    let factor: number | undefined;
    if (char === '*' || char === '+') {
      this.at++;
      factor = Infinity;
    } else if (char === '?') {
      this.at++;
      factor = 1;
    } else if (char === '{') {
      const bounds = /^\{(\d+)(,(\d*))?\}/.exec(this.source.slice(this.at));
      if (bounds) {
        this.at += bounds[0].length;
        factor = bounds[2] === undefined ? Number(bounds[1]) : bounds[3] === '' ? Infinity : Number(bounds[3]);
      }
    }
    if (factor === undefined) return atom;
    // A lazy quantifier: the same bound.
    if (this.source[this.at] === '?') this.at++;
    if (atom === 0 || factor === 0) return 0;
    return atom * factor;
  }
}
