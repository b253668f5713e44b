import { expect } from 'chai';
import fc from 'fast-check';
import type * as yup from 'yup';
import type { UpstreamRouteId } from '../../src/plugins/plugin-contract.ts';
import { FAST_CHECKS, REQUEST_SCHEMAS } from '../../src/routes/request-schemas.ts';

// Values near every boundary the schemas draw: absent, null, empty, wrong type, right type.
const scalar = fc.constantFrom<unknown>(undefined, null, '', 'x', 0, 1, -1, 1.5, 2 ** 53, true, false);
const part = fc.oneof(scalar, fc.constant({}), fc.constant([]), fc.dictionary(fc.constantFrom('type', 'text'), scalar, { maxKeys: 2 }));
const anyValue = fc.oneof(scalar, part, fc.array(part, { maxLength: 3 }), fc.jsonValue({ maxDepth: 2 }));
const message = fc.oneof(
  { weight: 8, arbitrary: fc.record({ role: fc.oneof({ weight: 4, arbitrary: fc.constantFrom('user', 'assistant', 'tool') }, { weight: 1, arbitrary: scalar }), content: fc.oneof(scalar, fc.array(part, { maxLength: 2 })) }, { requiredKeys: ['role'] }) },
  { weight: 1, arbitrary: anyValue },
);
const field = (valid: fc.Arbitrary<unknown>) => fc.oneof({ weight: 6, arbitrary: valid }, { weight: 1, arbitrary: anyValue });
const objectList = fc.array(fc.oneof({ weight: 12, arbitrary: fc.dictionary(fc.string({ maxLength: 3 }), scalar, { maxKeys: 2 }) }, { weight: 1, arbitrary: anyValue }), { maxLength: 3 });

const BODIES: Record<UpstreamRouteId, fc.Arbitrary<Record<string, unknown>>> = {
  'chat-completions': fc.record(
    {
      model: field(fc.constant('m')),
      messages: field(fc.array(message, { minLength: 1, maxLength: 3 })),
      tools: field(objectList),
      tool_choice: field(fc.constantFrom('auto', { type: 'function' })),
      response_format: field(fc.constant({ type: 'json_object' })),
      stream: field(fc.boolean()),
      stream_options: field(fc.constant({ include_usage: false })),
    },
    { requiredKeys: [] },
  ),
  messages: fc.record(
    {
      model: field(fc.constant('m')),
      messages: field(objectList),
      max_tokens: field(fc.integer({ min: -2, max: 5 })),
      system: field(fc.oneof(fc.string(), objectList)),
      tools: field(objectList),
      thinking: field(fc.constant({ type: 'enabled', budget_tokens: 1024 })),
      stream: field(fc.boolean()),
    },
    { requiredKeys: [] },
  ),
  'count-tokens': fc.record(
    {
      model: field(fc.constant('m')),
      messages: field(objectList),
      system: field(fc.oneof(fc.string(), objectList)),
      tools: field(objectList),
      thinking: field(fc.constant({ type: 'disabled' })),
    },
    { requiredKeys: [] },
  ),
  responses: fc.record(
    {
      model: field(fc.constant('m')),
      input: field(fc.oneof(fc.string(), objectList)),
      instructions: field(fc.string()),
      tools: field(objectList),
      reasoning: field(fc.constant({ effort: 'low' })),
      previous_response_id: field(fc.string()),
      stream: field(fc.boolean()),
    },
    { requiredKeys: [] },
  ),
};

// fc.record leaves optional keys out, but a generated `undefined` must not stay as a present key: JSON has none.
const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
const withoutUndefined = (body: Record<string, unknown>) => Object.fromEntries(Object.entries(body).filter(([, value]) => value !== undefined));

describe('request schemas', () => {
  for (const route of Object.keys(BODIES) as UpstreamRouteId[]) {
    it(`${route}: the fast accept check accepts exactly what the yup schema accepts`, () => {
      let accepted = 0;
      let refused = 0;
      fc.assert(
        fc.property(BODIES[route].map(withoutUndefined), (body) => {
          const yupAccepts = REQUEST_SCHEMAS[route].isValidSync(body, { strict: true });
          expect(FAST_CHECKS[route].accepts(body), JSON.stringify(body)).to.equal(yupAccepts);
          if (yupAccepts) accepted++;
          else refused++;
        }),
        { numRuns: 2000 },
      );
      // Both outcomes were exercised, so agreement is not a vacuous one.
      expect(accepted).to.be.above(50);
      expect(refused).to.be.above(50);
    });
  }

  for (const route of Object.keys(BODIES) as UpstreamRouteId[]) {
    it(`${route}: each item check accepts exactly what the array's item schema accepts`, () => {
      for (const [key, itemOk] of Object.entries(FAST_CHECKS[route].items ?? {})) {
        const itemSchema = (REQUEST_SCHEMAS[route].fields[key] as yup.ArraySchema<unknown[], yup.AnyObject>).innerType as yup.Schema;
        fc.assert(
          fc.property(fc.oneof(message, anyValue).map((item) => (isObject(item) ? withoutUndefined(item) : item)), (item) => {
            expect(itemOk(item), `${key}: ${JSON.stringify(item)}`).to.equal(itemSchema.isValidSync(item, { strict: true }));
          }),
          { numRuns: 1000 },
        );
      }
    });
  }

  it('accepts the nulls the definitions allow and refuses the ones they do not', () => {
    const chat = { model: 'm', messages: [{ role: 'assistant', content: null, tool_calls: [] }, { role: 'function', name: 'f', content: null }] };
    for (const body of [chat, { ...chat, stream: null, stream_options: null }]) {
      expect(REQUEST_SCHEMAS['chat-completions'].isValidSync(body, { strict: true })).to.equal(true);
      expect(FAST_CHECKS['chat-completions'].accepts(body)).to.equal(true);
    }
    const responses = { model: 'm', input: 'hi', stream: null, reasoning: null, instructions: null, previous_response_id: null };
    expect(REQUEST_SCHEMAS.responses.isValidSync(responses, { strict: true })).to.equal(true);
    expect(FAST_CHECKS.responses.accepts(responses)).to.equal(true);
    for (const body of [{ model: null, input: 'hi' }, { model: 'm', input: null }, { model: 'm', input: 'hi', tools: null }]) {
      expect(REQUEST_SCHEMAS.responses.isValidSync(body, { strict: true })).to.equal(false);
      expect(FAST_CHECKS.responses.accepts(body)).to.equal(false);
    }
  });
});
