import { isMap, isScalar, isSeq, type Document, type ErrorCode, type LineCounter, type YAMLError } from 'yaml';
import type { ValidationError } from 'yup';

/** Where a setting sits in the config file: its keys from the top, with list indexes. */
export type FieldPath = readonly (string | number)[];

/**
 * One problem of a configuration: its text, which leads with the field or variable it is about and
 * never quotes the config file's content (a file may hold upstream keys), and where in the file it is.
 */
export interface ConfigProblem {
  readonly text: string;
  /** The field of the file the problem is about; absent for an environment variable. */
  readonly at?: FieldPath;
  /** A position in the file's text, for a problem that belongs to no field (YAML syntax). */
  readonly offset?: number;
}

/** `server.port`, `redis.sentinels[0].port`. */
export function fieldName(path: FieldPath): string {
  return path.reduce<string>(
    (name, key) => (typeof key === 'number' ? `${name}[${key}]` : name ? `${name}.${key}` : key),
    '',
  );
}

function parseFieldName(name: string): FieldPath {
  return [...name.matchAll(/([^.[\]]+)|\[(\d+)\]/g)].map((match) =>
    match[2] === undefined ? match[1]! : Number(match[2]),
  );
}

// The parser's own messages may quote the text at the error (a tag, an escape, a token): these never do.
const YAML_PROBLEMS: Record<ErrorCode, string> = {
  ALIAS_PROPS: 'an alias cannot carry an anchor or a tag',
  BAD_ALIAS: 'an alias names no anchor',
  BAD_DIRECTIVE: 'a directive is not valid',
  BAD_DQ_ESCAPE: 'a double-quoted string holds an invalid escape sequence',
  BAD_INDENT: 'the indentation is wrong, or a bracket or quote is not closed',
  BAD_PROP_ORDER: 'an anchor or tag is in the wrong place',
  BAD_SCALAR_START: 'a plain value starts with a reserved character (quote the value)',
  BLOCK_AS_IMPLICIT_KEY: 'a block collection cannot be a key',
  BLOCK_IN_FLOW: 'a block collection cannot be inside a flow collection',
  DUPLICATE_KEY: 'a key appears twice in one mapping',
  IMPOSSIBLE: 'the parser cannot read this',
  KEY_OVER_1024_CHARS: 'a key is longer than 1024 characters',
  MISSING_CHAR: 'a character is missing (a closing quote or bracket, a comma, or the space after a colon)',
  MULTILINE_IMPLICIT_KEY: 'a key spans several lines (a colon may be missing)',
  MULTIPLE_ANCHORS: 'a node has several anchors',
  MULTIPLE_DOCS: 'the file holds more than one document',
  MULTIPLE_TAGS: 'a node has several tags',
  NON_STRING_KEY: 'a key is not a string',
  RESOURCE_EXHAUSTION: 'aliases expand to too much',
  TAB_AS_INDENT: 'a tab is used for indentation',
  TAG_RESOLVE_FAILED: 'a tag is not known',
  UNEXPECTED_TOKEN: 'unexpected text',
  BAD_COLLECTION_TYPE: 'a tag does not fit its collection',
};

export function yamlProblem(error: YAMLError): ConfigProblem {
  return {
    text: `not valid YAML: ${YAML_PROBLEMS[error.code] ?? 'the parser cannot read this'} (${error.code})`,
    offset: error.pos[0],
  };
}

/**
 * The schema's findings, one problem per field (an unknown key named with its path), and the fields to
 * leave out so that the rest of the file can still be checked. yup's type errors quote the value, so
 * they are worded here instead.
 */
export function schemaProblems(error: ValidationError): { problems: ConfigProblem[]; invalid: FieldPath[] } {
  const problems: ConfigProblem[] = [];
  const invalid: FieldPath[] = [];
  for (const finding of error.inner.length ? error.inner : [error]) {
    const at = parseFieldName(finding.path ?? '');
    if (finding.type === 'noUnknown') {
      for (const key of String(finding.params?.unknown ?? '')
        .split(', ')
        .filter(Boolean)) {
        invalid.push([...at, key]);
        problems.push({ text: `${fieldName([...at, key])} is not a known setting`, at: [...at, key] });
      }
      continue;
    }
    invalid.push(at);
    if (finding.type === 'typeError') {
      const type = String(finding.params?.type ?? 'value');
      problems.push({ text: `${fieldName(at)} must be ${/^[aeiou]/.test(type) ? 'an' : 'a'} ${type}`, at });
    } else {
      problems.push({ text: finding.message, at });
    }
  }
  return { problems, invalid };
}

/** Removes the fields at these paths from a parsed file (a copy). */
export function withoutFields(raw: Record<string, unknown>, paths: readonly FieldPath[]): Record<string, unknown> {
  const copy = structuredClone(raw);
  for (const path of paths) {
    if (path.length === 0) return {};
    let parent: unknown = copy;
    for (const key of path.slice(0, -1))
      parent =
        parent === null || typeof parent !== 'object' ? undefined : (parent as Record<string | number, unknown>)[key];
    if (parent !== null && typeof parent === 'object')
      delete (parent as Record<string | number, unknown>)[path.at(-1)!];
  }
  return copy;
}

/** Describes problems of one config file: by line, column and field, never by quoting its text. */
export class ConfigProblemReporter {
  constructor(
    /** How the file is named in messages: relative to the working directory when under it. */
    readonly fileName: string,
    private readonly document?: Document.Parsed,
    private readonly lines?: LineCounter,
  ) {}

  describe(problem: ConfigProblem): string {
    if (problem.at === undefined && problem.offset === undefined) return problem.text;
    const offset = problem.offset ?? this.offsetOf(problem.at!);
    if (offset === undefined || !this.lines) return `${this.fileName}: ${problem.text}`;
    const { line, col } = this.lines.linePos(offset);
    return `${this.fileName} line ${line}, column ${col}: ${problem.text}`;
  }

  /** Where the field's key starts (an item's start in a list), or its closest parent that is in the file. */
  private offsetOf(path: FieldPath): number | undefined {
    let node: unknown = this.document?.contents;
    let offset = rangeStart(node);
    for (const key of path) {
      if (isMap(node)) {
        const pair = node.items.find((item) => String(isScalar(item.key) ? item.key.value : item.key) === String(key));
        if (!pair) break;
        offset = rangeStart(pair.key) ?? offset;
        node = pair.value;
      } else if (isSeq(node) && typeof key === 'number') {
        node = node.items[key];
        offset = rangeStart(node) ?? offset;
      } else {
        break;
      }
    }
    return offset;
  }
}

function rangeStart(node: unknown): number | undefined {
  return (node as { range?: [number, number, number] } | null | undefined)?.range?.[0];
}
