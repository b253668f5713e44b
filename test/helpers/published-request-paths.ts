import { fileURLToPath } from 'node:url';
import ts from 'typescript';

/** The request types of the official SDKs, as their packages publish them (from the providers' API definitions). */
const SOURCE = `
import type { ChatCompletionCreateParamsNonStreaming } from 'openai/resources/chat/completions/completions';
import type { ResponseCreateParamsNonStreaming } from 'openai/resources/responses/responses';
import type {
  MessageCreateParamsNonStreaming,
  MessageCountTokensParams,
} from '@anthropic-ai/sdk/resources/messages/messages';
export type ChatCompletions = ChatCompletionCreateParamsNonStreaming;
export type Responses = ResponseCreateParamsNonStreaming;
export type Messages = MessageCreateParamsNonStreaming;
export type CountTokens = MessageCountTokensParams;
`;

export type PublishedRequest = 'ChatCompletions' | 'Responses' | 'Messages' | 'CountTokens';

/**
 * Every place of a published request type that holds a string, or any JSON value (`unknown`: a schema, a
 * tool's input), as a field path: `name[]` each item of a list, `*` each member of a map, `{type=x}` after
 * a step where the value there is the union member whose `type` is `x` (so `source{type=text}.data` and
 * `source{type=base64}.data` are two places). Literal strings (enums, `type` tags), numbers and booleans
 * hold no text and are left out. `any` marks the places that hold any JSON value.
 */
export function publishedRequestPaths(): Record<PublishedRequest, { readonly path: string; readonly any: boolean }[]> {
  const file = fileURLToPath(new URL('./__published-request-types.ts', import.meta.url));
  const host = ts.createCompilerHost({});
  const getSourceFile = host.getSourceFile.bind(host);
  const fileExists = host.fileExists.bind(host);
  host.getSourceFile = (name, language, ...rest) =>
    name === file ? ts.createSourceFile(name, SOURCE, language) : getSourceFile(name, language, ...rest);
  host.fileExists = (name) => name === file || fileExists(name);
  const options = {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    strict: true,
    skipLibCheck: true,
    noEmit: true,
    types: [],
  };
  const program = ts.createProgram([file], options, host);
  const checker = program.getTypeChecker();
  const module = checker.getSymbolAtLocation(program.getSourceFile(file)!)!;
  const result = {} as Record<PublishedRequest, { path: string; any: boolean }[]>;
  for (const symbol of checker.getExportsOfModule(module)) {
    const found = new Map<string, boolean>();
    walk(checker, checker.getDeclaredTypeOfSymbol(symbol), '', [], found);
    result[symbol.name as PublishedRequest] = [...found]
      .map(([path, any]) => ({ path, any }))
      .sort((a, b) => a.path.localeCompare(b.path));
  }
  return result;
}

const NO_TEXT =
  ts.TypeFlags.Null |
  ts.TypeFlags.Undefined |
  ts.TypeFlags.BooleanLike |
  ts.TypeFlags.NumberLike |
  ts.TypeFlags.BigIntLike |
  ts.TypeFlags.StringLiteral |
  ts.TypeFlags.Void |
  ts.TypeFlags.Never;

/** The literal `type` of an object type (a tagged union's member), if it has one. */
function tagOf(checker: ts.TypeChecker, type: ts.Type): string | undefined {
  const tag = type.getProperty('type');
  if (!tag) return undefined;
  const tagType = checker.getNonNullableType(checker.getTypeOfSymbol(tag));
  return tagType.isStringLiteral() ? tagType.value : undefined;
}

function walk(
  checker: ts.TypeChecker,
  type: ts.Type,
  path: string,
  seen: readonly ts.Type[],
  found: Map<string, boolean>,
): void {
  if (type.isUnion()) {
    for (const member of type.types) walk(checker, member, path, seen, found);
    return;
  }
  if (type.flags & NO_TEXT) return;
  if (type.flags & ts.TypeFlags.String || type.flags & ts.TypeFlags.TemplateLiteral) {
    if (!found.has(path)) found.set(path, false);
    return;
  }
  if (type.flags & (ts.TypeFlags.Unknown | ts.TypeFlags.Any)) {
    found.set(path, true);
    return;
  }
  if (seen.includes(type)) throw new Error(`${path} is recursive: walk it by hand`);
  if (checker.isArrayType(type) || checker.isTupleType(type)) {
    for (const item of checker.getTypeArguments(type as ts.TypeReference))
      walk(checker, item, `${path}[]`, [...seen, type], found);
    return;
  }
  if (type.isIntersection()) {
    for (const member of type.types) walk(checker, member, path, seen, found);
    return;
  }
  if (type.flags & ts.TypeFlags.Object) {
    const tag = tagOf(checker, type);
    const here = tag === undefined || path === '' ? path : `${path}{type=${tag}}`;
    for (const info of checker.getIndexInfosOfType(type)) walk(checker, info.type, `${here}.*`, [...seen, type], found);
    for (const property of checker.getPropertiesOfType(type)) {
      walk(
        checker,
        checker.getTypeOfSymbol(property),
        here === '' ? property.name : `${here}.${property.name}`,
        [...seen, type],
        found,
      );
    }
    return;
  }
  throw new Error(`${path}: a type this walk does not know (${checker.typeToString(type)})`);
}
