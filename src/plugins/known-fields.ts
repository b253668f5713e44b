import type {
  AliasDeclaration,
  GuardrailPlugin,
  ModelDeclaration,
  ModelPricing,
  NativeChatAdapter,
  ProviderPlugin,
  RouteAdapter,
  StreamFixupDeclaration,
  StreamMapping,
  UpstreamRoute,
  UsageExtractorDeclaration,
} from './plugin-contract.ts';

/** Whether a declaration's value is a plain object (not null, not an array). */
export const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** Every field of `T`, listed once: the compiler fails here when the contract gains or loses one. */
const fieldsOf = <T>(fields: Record<keyof T, true>): readonly string[] => Object.keys(fields);

/** The fields the contract knows, per kind of object of a declaration (and of a manifest). */
export const KNOWN_FIELDS = {
  plugin: fieldsOf<ProviderPlugin>({
    contract: true,
    vendor: true,
    envPrefix: true,
    routes: true,
    models: true,
    aliases: true,
    streamFixups: true,
    usageExtractors: true,
    nativeChat: true,
  }),
  route: fieldsOf<UpstreamRoute>({
    path: true,
    format: true,
    auth: true,
    modelIds: true,
    forwardHeaders: true,
    defaultHeaders: true,
    adapter: true,
  }),
  adapter: fieldsOf<RouteAdapter>({
    checkRequest: true,
    buildRequest: true,
    mapAnswer: true,
    stream: true,
    mapError: true,
    usage: true,
  }),
  streamMapping: fieldsOf<StreamMapping>({ terminal: true, error: true, createState: true, map: true }),
  model: fieldsOf<ModelDeclaration>({
    id: true,
    upstreamModel: true,
    upstreamModels: true,
    alternateIds: true,
    listed: true,
    routes: true,
    pricing: true,
    webSearch: true,
    maxOutputTokens: true,
  }),
  pricing: fieldsOf<ModelPricing>({ input: true, cachedInput: true, output: true }),
  alias: fieldsOf<AliasDeclaration>({ id: true, target: true, routes: true, listed: true }),
  streamFixup: fieldsOf<StreamFixupDeclaration>({
    name: true,
    route: true,
    models: true,
    fixup: true,
    createState: true,
  }),
  usageExtractor: fieldsOf<UsageExtractorDeclaration>({ route: true, models: true, extractor: true }),
  nativeChat: fieldsOf<NativeChatAdapter>({ route: true, buildRequest: true, readText: true }),
  guardrail: fieldsOf<GuardrailPlugin>({
    contract: true,
    guardrail: true,
    maxFindingChars: true,
    checkOptions: true,
    scan: true,
  }),
  manifest: ['plugins'],
} as const;

/** The edit distance (insertions, deletions, substitutions) between two strings. */
export function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, index) => index);
  for (let i = 1; i <= a.length; i += 1) {
    const current = [i];
    for (let j = 1; j <= b.length; j += 1) {
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length]!;
}

/**
 * The known name closest to `name`, when one is close enough to be what was meant (case aside, or two edits at most).
 */
export function closestName(name: string, known: readonly string[]): string | undefined {
  const lower = name.toLowerCase();
  const ranked = known
    .map((candidate) => ({
      candidate,
      distance: candidate.toLowerCase() === lower ? 0 : editDistance(lower, candidate.toLowerCase()),
    }))
    .sort((a, b) => a.distance - b.distance);
  const best = ranked[0];
  return best && best.distance <= Math.min(2, Math.max(1, Math.floor(name.length / 3))) ? best.candidate : undefined;
}

/**
 * Every field of `value` the contract does not know, in the object's order, each with the problem to
 * report: `unknown field`, with `did you mean '<field>'?` when a known one is close. Empty when every
 * field is known.
 */
export function unknownFields(
  value: Record<string, unknown>,
  known: readonly string[],
): { field: string; problem: string }[] {
  return Object.keys(value)
    .filter((key) => !known.includes(key))
    .map((field) => {
      const meant = closestName(field, known);
      return {
        field,
        problem: meant ? `unknown field: did you mean '${meant}'?` : `unknown field (known: ${known.join(', ')})`,
      };
    });
}
