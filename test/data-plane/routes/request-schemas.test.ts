import { Ajv2020 } from 'ajv/dist/2020.js';
import { expect } from 'chai';
import fc from 'fast-check';
import * as yup from 'yup';
import { requestJsonSchema } from '../../../src/control-plane/openapi/request-json-schema.ts';
import type { UpstreamRouteId } from '../../../src/plugins/plugin-contract.ts';
import {
  FAST_CHECKS,
  MAX_RETRIES_CAP,
  NATIVE_CHAT_SCHEMA,
  REQUEST_SCHEMAS,
} from '../../../src/data-plane/routes/request-schemas.ts';
import { compileAccepts, fastCheckOf, jsonTypes, readShape } from '../../../src/data-plane/routes/request-shapes.ts';

// Values near every boundary the schemas draw: absent, null, empty, wrong type, right type.
const scalar = fc.constantFrom<unknown>(undefined, null, '', 'x', 0, 1, -1, 1.5, 2 ** 53, true, false);
const part = fc.oneof(
  scalar,
  fc.constant({}),
  fc.constant([]),
  fc.dictionary(fc.constantFrom('type', 'text'), scalar, { maxKeys: 2 }),
);
const anyValue = fc.oneof(scalar, part, fc.array(part, { maxLength: 3 }), fc.jsonValue({ maxDepth: 2 }));
const message = fc.oneof(
  {
    weight: 8,
    arbitrary: fc.record(
      {
        role: fc.oneof(
          { weight: 4, arbitrary: fc.constantFrom('user', 'assistant', 'tool') },
          { weight: 1, arbitrary: scalar },
        ),
        content: fc.oneof(scalar, fc.array(part, { maxLength: 2 })),
      },
      { requiredKeys: ['role'] },
    ),
  },
  { weight: 1, arbitrary: anyValue },
);
const field = (valid: fc.Arbitrary<unknown>) =>
  fc.oneof({ weight: 6, arbitrary: valid }, { weight: 1, arbitrary: anyValue });
const objectList = fc.array(
  fc.oneof(
    { weight: 12, arbitrary: fc.dictionary(fc.string({ maxLength: 3 }), scalar, { maxKeys: 2 }) },
    { weight: 1, arbitrary: anyValue },
  ),
  { maxLength: 3 },
);

type Route = UpstreamRouteId | 'chat';
/** Every route's schema: the compatible routes' and the native chat's. */
const SCHEMAS: Record<Route, yup.AnyObjectSchema> = { ...REQUEST_SCHEMAS, chat: NATIVE_CHAT_SCHEMA };
const number = fc.oneof(fc.integer({ min: -2, max: MAX_RETRIES_CAP + 2 }), fc.constantFrom(0.5, -0.5, 1e-9, 2 ** 53));

const BODIES: Record<Route, fc.Arbitrary<Record<string, unknown>>> = {
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
  chat: fc.record(
    {
      model: field(fc.constant('m')),
      input: field(fc.string({ maxLength: 2 })),
      web_search: field(fc.boolean()),
      temperature: field(number),
      max_output_tokens: field(number),
      max_retries: field(number),
      timeout: field(number),
      stream: field(fc.boolean()),
    },
    { requiredKeys: [] },
  ),
};

// fc.record leaves optional keys out, but a generated `undefined` must not stay as a present key: JSON has none.
const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
const withoutUndefined = (body: Record<string, unknown>) =>
  Object.fromEntries(Object.entries(body).filter(([, value]) => value !== undefined));

describe('request schemas', () => {
  it('each compatible route validates with the check derived from its schema', () => {
    for (const route of Object.keys(REQUEST_SCHEMAS) as UpstreamRouteId[])
      expect(FAST_CHECKS[route]).to.equal(fastCheckOf(REQUEST_SCHEMAS[route]));
  });

  for (const route of Object.keys(BODIES) as Route[]) {
    it(`${route}: the derived fast accept check accepts exactly what the yup schema accepts`, () => {
      let accepted = 0;
      let refused = 0;
      fc.assert(
        fc.property(BODIES[route].map(withoutUndefined), (body) => {
          const yupAccepts = SCHEMAS[route].isValidSync(body, { strict: true });
          expect(fastCheckOf(SCHEMAS[route]).accepts(body), JSON.stringify(body)).to.equal(yupAccepts);
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

  for (const route of Object.keys(BODIES) as Route[]) {
    it(`${route}: the derived OpenAPI request schema accepts exactly the JSON bodies the yup schema accepts`, () => {
      const ajv = new Ajv2020({ strict: true, allowUnionTypes: true });
      const validate = ajv.compile(requestJsonSchema(SCHEMAS[route], route));
      // What the client sends is JSON: a generated undefined array item is sent as null. The native
      // chat's other fields are refused outside yup (the route), so its closed schema sees only its own.
      const known = Object.keys(SCHEMAS[route].fields);
      const asSent = (body: Record<string, unknown>) =>
        JSON.parse(
          JSON.stringify(
            route === 'chat' ? Object.fromEntries(Object.entries(body).filter(([key]) => known.includes(key))) : body,
          ),
        ) as Record<string, unknown>;
      fc.assert(
        fc.property(BODIES[route].map(asSent), (body) => {
          expect(validate(body), `${JSON.stringify(body)}: ${ajv.errorsText(validate.errors)}`).to.equal(
            SCHEMAS[route].isValidSync(body, { strict: true }),
          );
        }),
        { numRuns: 2000 },
      );
    });
  }

  for (const route of Object.keys(BODIES) as Route[]) {
    it(`${route}: each item check accepts exactly what the array's item schema accepts`, () => {
      for (const [key, itemOk] of Object.entries(fastCheckOf(SCHEMAS[route]).items ?? {})) {
        const itemSchema = (SCHEMAS[route].fields[key] as yup.ArraySchema<unknown[], yup.AnyObject>)
          .innerType as yup.Schema;
        fc.assert(
          fc.property(
            fc.oneof(message, anyValue).map((item) => (isObject(item) ? withoutUndefined(item) : item)),
            (item) => {
              expect(itemOk(item), `${key}: ${JSON.stringify(item)}`).to.equal(
                itemSchema.isValidSync(item, { strict: true }),
              );
            },
          ),
          { numRuns: 1000 },
        );
      }
    });
  }

  it('accepts the nulls the definitions allow and refuses the ones they do not', () => {
    const chat = {
      model: 'm',
      messages: [
        { role: 'assistant', content: null, tool_calls: [] },
        { role: 'function', name: 'f', content: null },
      ],
    };
    for (const body of [chat, { ...chat, stream: null, stream_options: null }]) {
      expect(REQUEST_SCHEMAS['chat-completions'].isValidSync(body, { strict: true })).to.equal(true);
      expect(FAST_CHECKS['chat-completions'].accepts(body)).to.equal(true);
    }
    const responses = {
      model: 'm',
      input: 'hi',
      stream: null,
      reasoning: null,
      instructions: null,
      previous_response_id: null,
    };
    expect(REQUEST_SCHEMAS.responses.isValidSync(responses, { strict: true })).to.equal(true);
    expect(FAST_CHECKS.responses.accepts(responses)).to.equal(true);
    for (const body of [
      { model: null, input: 'hi' },
      { model: 'm', input: null },
      { model: 'm', input: 'hi', tools: null },
    ]) {
      expect(REQUEST_SCHEMAS.responses.isValidSync(body, { strict: true })).to.equal(false);
      expect(FAST_CHECKS.responses.accepts(body)).to.equal(false);
    }
  });

  it('derives the rules no route uses today (enum, lessThan, array max) as yup applies them', () => {
    const schema = yup.object({
      kind: yup.string().oneOf(['a', 'b']).required(),
      level: yup.number().lessThan(5).nullable(),
      few: yup.array(yup.boolean().required()).max(2),
      open: yup.mixed().required(),
    });
    const accepts = fastCheckOf(schema).accepts;
    const ajv = new Ajv2020({ strict: true, allowUnionTypes: true });
    const validate = ajv.compile(requestJsonSchema(schema, 'sample'));
    const body = fc.record(
      {
        kind: fc.constantFrom<unknown>('a', 'b', 'c', '', null, 1),
        level: fc.constantFrom<unknown>(null, 4, 4.9, 5, 6, 'x'),
        few: fc.array(fc.constantFrom<unknown>(true, false, null, 1), { maxLength: 3 }),
        open: anyValue.map((value) => JSON.parse(JSON.stringify(value ?? null)) as unknown),
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(body, (value) => {
        const yupAccepts = schema.isValidSync(value, { strict: true });
        expect(accepts(value), JSON.stringify(value)).to.equal(yupAccepts);
        expect(validate(value), JSON.stringify(value)).to.equal(yupAccepts);
      }),
      { numRuns: 1000 },
    );
  });

  it('refuses at start, naming the field, every rule it cannot carry over exactly', () => {
    const cases: [yup.Schema, RegExp][] = [
      [yup.object({ a: yup.mixed().test({ name: 'odd', test: () => true }) }), /body\.a: custom test 'odd'/],
      [yup.object({ a: yup.string().min(2) }), /body\.a: string test 'min'/],
      [yup.object({ a: yup.string().email() }), /body\.a: string test 'email'/],
      [yup.object({ a: yup.array(yup.number().notOneOf([1])) }), /body\.a\[\]: notOneOf/],
      [yup.object({ a: yup.date() }), /body\.a: yup\.date\(\)/],
      [
        yup.object({ a: jsonTypes('x', 'string').test({ name: 'more', test: () => true }) }),
        /body\.a: a jsonTypes\(\) schema with further tests/,
      ],
      [yup.object({ a: yup.string().meta({ unknownKey: 1 }) }), /body\.a: meta 'unknownKey'/],
    ];
    for (const [schema, message] of cases) expect(() => readShape(schema)).to.throw(message);
  });

  it('compiles only property names and finite numbers into the check', () => {
    const accepts = compileAccepts(readShape(yup.object({ "a'); throw 1; ('": yup.string().required() })));
    expect(accepts({ "a'); throw 1; ('": 'x' })).to.equal(true);
    expect(accepts({})).to.equal(false);
  });
});
