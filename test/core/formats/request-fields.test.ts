import { expect } from 'chai';
import { CHAT_COMPLETIONS_REQUEST_FIELDS } from '../../../src/core/formats/chat-completions.ts';
import { WIRE_FORMATS } from '../../../src/core/formats/index.ts';
import { MESSAGES_REQUEST_FIELDS } from '../../../src/core/formats/messages.ts';
import {
  fieldSteps,
  requestTextReader,
  type FieldStep,
  type RequestField,
} from '../../../src/core/formats/request-fields.ts';
import { RESPONSES_REQUEST_FIELDS } from '../../../src/core/formats/responses.ts';
import { valueAt } from '../../../src/core/formats/format-reading.ts';
import { REQUEST_SCHEMAS } from '../../../src/data-plane/routes/request-schemas.ts';
import type { WireFormat } from '../../../src/plugins/plugin-contract.ts';
import { publishedRequestPaths, type PublishedRequest } from '../../helpers/published-request-paths.ts';

interface Place {
  readonly path: string;
  readonly steps: readonly FieldStep[];
  readonly any: boolean;
}

/** Each format, its list of fields, and the published request types (the official SDKs') it must classify. */
const FORMATS: readonly {
  format: WireFormat;
  fields: readonly RequestField[];
  published: readonly PublishedRequest[];
}[] = [
  { format: 'chat-completions', fields: CHAT_COMPLETIONS_REQUEST_FIELDS, published: ['ChatCompletions'] },
  { format: 'messages', fields: MESSAGES_REQUEST_FIELDS, published: ['Messages'] },
  { format: 'count-tokens', fields: MESSAGES_REQUEST_FIELDS, published: ['CountTokens'] },
  { format: 'responses', fields: RESPONSES_REQUEST_FIELDS, published: ['Responses'] },
];

/**
 * Whether an entry's step names the place's step: the same member (any member of a map), list-ness and
 * `type`; `whole`: the entry takes the member whole, a list included.
 */
const stepMatches = (entry: FieldStep, place: FieldStep, whole = false) =>
  (entry.name === place.name || place.name === '*') &&
  (entry.each === place.each || (whole && !entry.each)) &&
  (!entry.where || entry.where.join('=') === place.where?.join('='));

/** Whether an entry decides a place: read exactly there, or a JSON value (or a skip) at or above it. */
function decides([path, reading]: RequestField, place: Place): boolean {
  const steps = fieldSteps(path);
  const whole = reading !== 'text';
  if (
    steps.length > place.steps.length ||
    !steps.every((step, index) => stepMatches(step, place.steps[index]!, whole && index === steps.length - 1))
  )
    return false;
  if (steps.length < place.steps.length || steps.at(-1)!.each !== place.steps[steps.length - 1]!.each) return whole;
  return whole || !place.any;
}

/** Whether a read entry names a published place: at or above it, or inside one that holds any JSON value. */
function named([path]: RequestField, places: readonly Place[]): boolean {
  const steps = fieldSteps(path);
  return places.some((place) => {
    const shared = Math.min(steps.length, place.steps.length);
    for (let index = 0; index < shared; index++)
      if (!stepMatches(steps[index]!, place.steps[index]!, index === steps.length - 1)) return false;
    return steps.length <= place.steps.length || place.any;
  });
}

/**
 * A request holding `marker` at a place only: one item per list, `type` set where the place names one,
 * `{"k": marker}` where it holds any value.
 */
function bodyAt(place: Place, marker: string): Record<string, unknown> {
  const root: Record<string, unknown> = {};
  let container: Record<string, unknown> = root;
  place.steps.forEach((step, index) => {
    const last = index === place.steps.length - 1;
    let node: unknown = marker;
    if (!last || place.any) {
      const object: Record<string, unknown> = last ? { k: marker } : {};
      if (step.where) object[step.where[0]] = step.where[1];
      node = object;
    }
    container[step.name === '*' ? 'k' : step.name] = step.each ? [node] : node;
    container = node as Record<string, unknown>;
  });
  return root;
}

const published = publishedRequestPaths();
const placesOf = (names: readonly PublishedRequest[]): Place[] =>
  names.flatMap((name) => published[name].map(({ path, any }) => ({ path, any, steps: fieldSteps(path) })));

describe('wire formats: each format lists the request fields the model reads, as published', function () {
  this.timeout(60_000);

  for (const { format, fields, published: names } of FORMATS) {
    const places = placesOf(names);

    it(`${format}: every place of the published request that holds text is read, or skipped with a reason`, () => {
      expect(places.length).to.be.greaterThan(20);
      const undecided = places
        .filter((place) => !fields.some((field) => decides(field, place)))
        .map((place) => place.path + (place.any ? ' (any JSON value)' : ''));
      expect(
        undecided,
        'places of the published request no field of the list decides: add each, read or skipped with a reason',
      ).to.deep.equal([]);
    });

    it(`${format}: the guardrails read each place the list reads (one text, at its path), and none it skips`, () => {
      const read = WIRE_FORMATS[format].texts.request;
      const wrong: string[] = [];
      for (const place of places) {
        const marker = `marker of ${place.path}`;
        const body = bodyAt(place, marker);
        const reading = fields.filter((field) => decides(field, place));
        const reads =
          reading.some(([, how]) => how !== 'skip') &&
          !reading.some(([path, how]) => how === 'skip' && fieldSteps(path).length === place.steps.length);
        const slots = read(body).filter((slot) => slot.text === marker);
        if (slots.length !== (reads ? 1 : 0)) wrong.push(`${place.path}: ${slots.length} texts read`);
        for (const slot of slots)
          if (valueAt(body, slot.path) !== marker) wrong.push(`${place.path}: read at ${slot.path.join('.')}`);
      }
      expect(wrong).to.deep.equal([]);
    });
  }

  it('every field a list reads is in the published request, or says where it comes from', () => {
    for (const { format, fields, published: names } of FORMATS) {
      const places = placesOf(
        names.includes('Messages') || names.includes('CountTokens') ? ['Messages', 'CountTokens'] : names,
      );
      const unknown = fields
        .filter((field) => field[1] !== 'skip' && field[2] === undefined && !named(field, places))
        .map(([path]) => path);
      expect(unknown, format).to.deep.equal([]);
    }
  });

  // Numbers and booleans hold no text.
  it("every field the gateway's own request schemas declare is in its format's list", () => {
    const lists: Record<string, readonly RequestField[]> = {
      'chat-completions': CHAT_COMPLETIONS_REQUEST_FIELDS,
      messages: MESSAGES_REQUEST_FIELDS,
      'count-tokens': MESSAGES_REQUEST_FIELDS,
      responses: RESPONSES_REQUEST_FIELDS,
    };
    const missing: string[] = [];
    const walk = (
      route: string,
      fields: Record<string, { type: string; innerType?: { fields?: Record<string, { type: string }> } }>,
      at: string,
    ) => {
      for (const [name, field] of Object.entries(fields)) {
        const path = `${at}${name}`;
        if (field.type === 'boolean' || field.type === 'number') continue;
        if (field.innerType?.fields) walk(route, field.innerType.fields as never, `${path}[].`);
        else if (
          !lists[route]!.some(
            ([entry]) =>
              entry === path ||
              entry.startsWith(`${path}.`) ||
              entry.startsWith(`${path}[]`) ||
              entry.startsWith(`${path}{`),
          )
        )
          missing.push(`${route}: ${path}`);
      }
    };
    for (const [route, schema] of Object.entries(REQUEST_SCHEMAS))
      walk(route, (schema.describe() as unknown as { fields: never }).fields, '');
    expect(missing).to.deep.equal([]);
  });

  // A JSON value: every string and every member's name, values first.
  it('reads a JSON value whole, JSON text as such, and only objects of the `type` named', () => {
    const read = requestTextReader([
      ['tools[].parameters', 'tree'],
      ['calls[].arguments', 'json'],
      ['docs[].source{type=text}.data', 'text'],
      ['vars.*', 'text'],
    ]);
    const slots = read({
      tools: [{ parameters: { type: 'object', properties: { city: { description: 'A city' } } } }],
      calls: [{ arguments: '{"a":"b"}' }, { arguments: { a: 'c' } }],
      docs: [{ source: { type: 'text', data: 'plain' } }, { source: { type: 'base64', data: 'AAAA' } }],
      vars: { x: 'X', y: 1 },
    });
    expect(slots.map((slot) => [slot.path.join('.'), slot.text, slot.key === true, slot.json === true])).to.deep.equal([
      ['tools.0.parameters.type', 'object', false, false],
      ['tools.0.parameters.type', 'type', true, false],
      ['tools.0.parameters.properties.city.description', 'A city', false, false],
      ['tools.0.parameters.properties.city.description', 'description', true, false],
      ['tools.0.parameters.properties.city', 'city', true, false],
      ['tools.0.parameters.properties', 'properties', true, false],
      ['calls.0.arguments', '{"a":"b"}', false, true],
      ['calls.1.arguments.a', 'c', false, false],
      ['calls.1.arguments.a', 'a', true, false],
      ['docs.0.source.data', 'plain', false, false],
      ['vars.x', 'X', false, false],
    ]);
  });
});
