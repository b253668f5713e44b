import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { request } from 'undici';
import { startTestGateway, TEST_KEY, UPSTREAM_KEY, type TestGateway } from '../helpers/test-gateway.ts';
import { CHAT_COMPLETIONS_CORPUS } from './request-corpus/chat-completions.ts';
import type { CorpusEntry } from './request-corpus/corpus-entry.ts';
import { COUNT_TOKENS_CORPUS, MESSAGES_CORPUS } from './request-corpus/messages.ts';
import { RESPONSES_CORPUS } from './request-corpus/responses.ts';

/** Upstream model names of the IDs the corpus uses, as the providers' plugins declare them. */
const UPSTREAM_NAMES: Record<string, string> = {
  'alpha/gen-6-astra': 'gen-6-astra',
  'gen-6-astra': 'gen-6-astra',
  'alpha-latest': 'gen-6-astra',
  'alpha/gen-5.5': 'gen-5.5',
  'beta-latest': 'beta-fable-5-1',
  'gamma-latest': 'gamma-3.1-pro-preview',
  'delta/delta-4.7': 'delta-4.7',
  'epsilon/epsilon-5.3-flash': 'epsilon-5.3-flash',
  'zeta/zeta-k3': 'zeta-k3',
  'beta-fable-5-1': 'beta-fable-5-1',
  'beta-opus-4-8': 'beta-opus-4-8',
  'beta-opus-5': 'beta-opus-5',
  'beta-sonnet-4-6': 'beta-sonnet-4-6',
};

const ROUTES = [
  {
    path: '/v1/chat/completions',
    upstreamPath: '/chat/completions',
    corpus: CHAT_COMPLETIONS_CORPUS,
    sdk: ['openai', 'resources/chat/completions/completions.d.ts', 'ChatCompletionCreateParamsBase'],
  },
  {
    path: '/v1/responses',
    upstreamPath: '/responses',
    corpus: RESPONSES_CORPUS,
    sdk: ['openai', 'resources/responses/responses.d.ts', 'ResponseCreateParamsBase'],
  },
  {
    path: '/v1/messages',
    upstreamPath: '/messages',
    corpus: MESSAGES_CORPUS,
    sdk: ['@anthropic-ai/sdk', 'resources/messages/messages.d.ts', 'MessageCreateParamsBase'],
  },
  {
    path: '/v1/messages/count_tokens',
    upstreamPath: '/messages/count_tokens',
    corpus: COUNT_TOKENS_CORPUS,
    sdk: ['@anthropic-ai/sdk', 'resources/messages/messages.d.ts', 'MessageCountTokensParams'],
  },
] as const;

/**
 * What the upstream must receive: the entry's own expectation, or its body with only the top-level model value
 * replaced.
 */
function expectedUpstream(entry: CorpusEntry): string {
  if (entry.upstream) return entry.upstream;
  const model = (JSON.parse(entry.body) as { model: string }).model;
  const escaped = model.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  const pattern = new RegExp(`("model"\\s*:\\s*)"${escaped}"`, 'g');
  expect(entry.body.match(pattern), `${entry.name}: the model value must appear once`).to.have.length(1);
  expect(UPSTREAM_NAMES[model], `${entry.name}: upstream name of ${model}`).to.be.a('string');
  return entry.body.replace(pattern, `$1"${UPSTREAM_NAMES[model]}"`);
}

/**
 * The top-level members of a request type in an SDK's declaration file, and which of them are
 * declared nullable: the documented request fields the corpus must cover.
 */
function declaredFields(pkg: string, file: string, type: string): { all: string[]; nullable: string[] } {
  const require = createRequire(import.meta.url);
  const root = dirname(require.resolve(pkg));
  const lines = readFileSync(join(root, file), 'utf8').split('\n');
  const start = lines.findIndex((line) => line.startsWith(`export interface ${type} `));
  expect(start, `${type} in ${pkg}/${file}`).to.be.above(-1);
  const all: string[] = [];
  const nullable: string[] = [];
  let current: string | undefined;
  let text = '';
  const close = () => {
    if (current && /\|\s*null\b/.test(text)) nullable.push(current);
  };
  for (const line of lines.slice(start + 1)) {
    if (line.startsWith('}')) break;
    const member = /^ {4}([a-z_]+)\??:/.exec(line);
    if (member) {
      close();
      current = member[1]!;
      all.push(current);
      text = line;
    } else if (!/^\s*(\/\*\*|\*)/.test(line)) {
      text += line;
    }
  }
  close();
  return { all, nullable };
}

describe('request conformance corpus through the running gateway', function () {
  this.timeout(120_000);
  let gateway: TestGateway;

  before(async () => {
    gateway = await startTestGateway({ env: { RATE_LIMIT_MAX: '100000' } });
  });
  after(async () => {
    await gateway.close();
  });

  it('holds at least 80 valid bodies, each naming its source', () => {
    const all = ROUTES.flatMap((route) => route.corpus);
    expect(all.length).to.be.at.least(80);
    for (const entry of all) {
      expect(entry.source, entry.name).to.match(/^(openai|@anthropic-ai\/sdk)@\S+ \S+\.d\.ts \S/);
      expect(() => JSON.parse(entry.body), entry.name).not.to.throw();
    }
  });

  for (const route of ROUTES) {
    it(`${route.path}: covers every documented request field of ${route.sdk[2]}, and each nullable one as null`, () => {
      const [pkg, file, type] = route.sdk;
      const { all, nullable } = declaredFields(pkg, file, type);
      const bodies = route.corpus.map((entry) => JSON.parse(entry.body) as Record<string, unknown>);
      const sent = new Set(bodies.flatMap((body) => Object.keys(body)));
      const sentNull = new Set(bodies.flatMap((body) => Object.keys(body).filter((key) => body[key] === null)));
      expect(
        all.filter((field) => !sent.has(field)),
        'fields never sent',
      ).to.deep.equal([]);
      expect(
        nullable.filter((field) => !sentNull.has(field)),
        'nullable fields never sent as null',
      ).to.deep.equal([]);
      expect(all.length).to.be.above(10);
    });

    describe(route.path, () => {
      route.corpus.forEach((entry, index) => {
        it(`${entry.name} → 200, one upstream request with exactly the expected bytes`, async () => {
          const expected = Buffer.from(expectedUpstream(entry), 'utf8');
          for (const vendor of Object.values(gateway.upstreams)) vendor.reset();
          const anthropic = route.path.startsWith('/v1/messages');
          // Messages clients send the key as x-api-key (the format's own header); every other entry a bearer token.
          const auth =
            anthropic && index % 2 === 0 ? { 'x-api-key': TEST_KEY } : { authorization: `Bearer ${TEST_KEY}` };
          const response = await request(`${gateway.url}${route.path}`, {
            method: 'POST',
            headers: {
              'content-type': 'application/json',
              ...auth,
              ...(anthropic ? { 'anthropic-version': '2023-06-01' } : {}),
            },
            body: Buffer.from(entry.body, 'utf8'),
          });
          const answer = await response.body.text();
          expect(response.statusCode, answer).to.equal(200);
          const seen = gateway.allRequests();
          expect(seen, 'upstream requests').to.have.length(1);
          expect(seen[0]!.path).to.equal(`/v1${route.upstreamPath}`);
          expect(
            seen[0]!.rawBytes.equals(expected),
            `upstream received:\n${seen[0]!.rawBody}\nexpected:\n${expected.toString('utf8')}`,
          ).to.equal(true);
          const headers = seen[0]!.headers;
          if (anthropic) {
            expect(headers['x-api-key']).to.equal(UPSTREAM_KEY);
            expect(headers.authorization).to.equal(undefined);
          } else {
            expect(headers.authorization).to.equal(`Bearer ${UPSTREAM_KEY}`);
            expect(headers['x-api-key']).to.equal(undefined);
          }
          expect(JSON.stringify(headers)).not.to.contain(TEST_KEY);
        });
      });
    });
  }
});
