import { expect } from 'chai';
import { z } from 'zod';
import { schemaInstance } from '../../mock-upstream/schema-instance.ts';

describe('mock upstream: schemaInstance', () => {
  it('fills every declared property in declared order, one value per basic type', () => {
    const schema = {
      type: 'object',
      properties: {
        text: { type: 'string' },
        ratio: { type: 'number' },
        count: { type: 'integer' },
        flag: { type: 'boolean' },
        none: { type: 'null' },
        list: { type: 'array', items: { type: 'string' } },
        nested: { type: 'object', properties: { b: { type: 'integer' }, a: { type: 'string' } } },
      },
    };
    const instance = schemaInstance(schema);
    expect(instance).to.deep.equal({
      text: 'mock',
      ratio: 1,
      count: 1,
      flag: true,
      none: null,
      list: ['mock'],
      nested: { b: 1, a: 'mock' },
    });
    expect(Object.keys(instance as object)).to.deep.equal(['text', 'ratio', 'count', 'flag', 'none', 'list', 'nested']);
  });

  it('takes the first enum value, const, the first non-null branch of anyOf/oneOf and of a type list', () => {
    expect(schemaInstance({ enum: ['celsius', 'fahrenheit'] })).to.equal('celsius');
    expect(schemaInstance({ const: 42 })).to.equal(42);
    expect(schemaInstance({ anyOf: [{ type: 'null' }, { type: 'integer' }] })).to.equal(1);
    expect(schemaInstance({ oneOf: [{ type: 'boolean' }, { type: 'string' }] })).to.equal(true);
    expect(schemaInstance({ type: ['null', 'string'] })).to.equal('mock');
    expect(schemaInstance({ type: 'null' })).to.equal(null);
  });

  it('keeps numbers, string lengths and array sizes within their bounds', () => {
    expect(schemaInstance({ type: 'integer', minimum: 3 })).to.equal(3);
    expect(schemaInstance({ type: 'integer', maximum: -2 })).to.equal(-2);
    expect(schemaInstance({ type: 'integer', exclusiveMinimum: 5 })).to.equal(6);
    expect(schemaInstance({ type: 'number', exclusiveMaximum: 0 })).to.equal(-0.5);
    expect(
      schemaInstance({ type: 'integer', minimum: Number.MIN_SAFE_INTEGER, maximum: Number.MAX_SAFE_INTEGER }),
    ).to.equal(1);
    expect(schemaInstance({ type: 'string', minLength: 6 })).to.equal('mockxx');
    expect(schemaInstance({ type: 'string', maxLength: 2 })).to.equal('mo');
    expect(schemaInstance({ type: 'string', format: 'date-time' })).to.equal('2026-01-01T00:00:00Z');
    expect(schemaInstance({ type: 'array', items: { type: 'integer' }, minItems: 3 })).to.deep.equal([1, 1, 1]);
    expect(schemaInstance({ type: 'array', items: { type: 'integer' }, maxItems: 0 })).to.deep.equal([]);
    expect(schemaInstance({ type: 'array', prefixItems: [{ type: 'string' }, { type: 'boolean' }] })).to.deep.equal([
      'mock',
      true,
    ]);
  });

  it('follows local $ref and merges allOf', () => {
    const schema = {
      type: 'object',
      properties: { home: { $ref: '#/$defs/place' }, work: { $ref: '#/definitions/place' } },
      $defs: { place: { type: 'object', properties: { city: { type: 'string' } } } },
      definitions: { place: { type: 'object', properties: { zip: { type: 'integer' } } } },
    };
    expect(schemaInstance(schema)).to.deep.equal({ home: { city: 'mock' }, work: { zip: 1 } });
    expect(
      schemaInstance({
        allOf: [{ type: 'object', properties: { a: { type: 'string' } } }, { properties: { b: { type: 'boolean' } } }],
      }),
    ).to.deep.equal({ a: 'mock', b: true });
    // A recursive schema stops instead of looping.
    expect(schemaInstance({ $ref: '#' })).to.deep.equal({});
  });

  it('answers what the zod schema of a client parses', () => {
    const schema = z.object({
      city: z.string(),
      days: z.number().int().min(2).max(10),
      unit: z.enum(['celsius', 'fahrenheit']),
      tags: z.array(z.string()).min(2),
      note: z.string().nullable(),
      when: z.iso.datetime(),
      mail: z.email(),
      place: z.object({ lat: z.number(), lon: z.number() }),
    });
    const instance = schemaInstance(z.toJSONSchema(schema));
    expect(schema.parse(instance)).to.deep.equal(instance);
    expect(instance).to.deep.include({ days: 2, unit: 'celsius', note: 'mock' });
  });
});
