/**
 * An upstream key of the length and shape of a provider's project key (`sk-proj-` and 156 characters): the
 * benchmark's gateways carry one per vendor, as production does, so that what a key costs a request (the
 * credential's redaction in every answer and stream) is measured. The mock upstream takes any key.
 */
export const BENCH_UPSTREAM_KEY = `sk-proj-${'Ab3dE5fGh7jK9mN1pQ3rS5tU7vW9xY1z'.repeat(5).slice(0, 156)}`;

/** Every vendor of the manifest on `baseUrls` (comma-separated endpoints), each with {@link BENCH_UPSTREAM_KEY}. */
export function vendorEnv(baseUrls: string): NodeJS.ProcessEnv {
  return Object.fromEntries(
    ['ALPHA', 'BETA', 'GAMMA', 'DELTA', 'EPSILON', 'ZETA'].flatMap((prefix) => [
      [`${prefix}_BASE_URL`, baseUrls],
      [`${prefix}_API_KEY`, BENCH_UPSTREAM_KEY],
    ]),
  );
}
