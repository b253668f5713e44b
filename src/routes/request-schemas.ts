import * as yup from 'yup';
import type { UpstreamRouteId } from '../plugins/plugin-contract.ts';

// Messages carry no field path: the path goes into "Field '<path>': <message>".
const REQUIRED = 'is required';
const isPlainObject = (value: unknown) => typeof value === 'object' && value !== null && !Array.isArray(value);

const string = () => yup.string().typeError('must be a string');
const boolean = () => yup.boolean().typeError('must be true or false');
const object = () => yup.mixed<Record<string, unknown>>().test('object', 'must be an object', (value) => value === undefined || isPlainObject(value));
const objects = () => yup.array(object().required('must be an object')).typeError('must be an array of objects');
const oneOf = (message: string, ...checks: ((value: unknown) => boolean)[]) =>
  yup.mixed().test('shape', message, (value) => value === undefined || checks.some((check) => check(value)));
const isString = (value: unknown) => typeof value === 'string';

const model = () => string().required(REQUIRED);

const chatMessage = yup
  .object({
  role: string().required(REQUIRED),
  content: yup
    .mixed()
    .test('content', 'must be a string, an array of content parts or null', (value) => value === undefined || value === null || isString(value) || Array.isArray(value)),
  })
  .typeError('must be an object')
  .required('must be an object');

/** Per route, the fields the gateway checks; every other field is forwarded untouched. */
export const REQUEST_SCHEMAS: Readonly<Record<UpstreamRouteId, yup.AnyObjectSchema>> = {
  'chat-completions': yup.object({
    model: model(),
    messages: yup
      .array(chatMessage)
      .typeError('must be an array of messages')
      .required(REQUIRED)
      .min(1, 'must hold at least one message'),
    tools: objects(),
    tool_choice: oneOf('must be a string or an object', isString, isPlainObject),
    response_format: object(),
    stream: boolean(),
    stream_options: object(),
  }),
  messages: yup.object({
    model: model(),
    messages: objects().required(REQUIRED).min(1, 'must hold at least one message'),
    max_tokens: yup.number().typeError('must be an integer').integer('must be an integer').min(1, 'must be at least 1').required(REQUIRED),
    system: oneOf('must be a string or an array of text blocks', isString, Array.isArray),
    tools: objects(),
    thinking: object(),
    stream: boolean(),
  }),
  'count-tokens': yup.object({
    model: model(),
    messages: objects().required(REQUIRED).min(1, 'must hold at least one message'),
    system: oneOf('must be a string or an array of text blocks', isString, Array.isArray),
    tools: objects(),
    thinking: object(),
  }),
  responses: yup.object({
    model: model(),
    input: yup
      .mixed()
      .required(REQUIRED)
      .test('input', 'must be a string or a list of input items', (value) => value === undefined || isString(value) || Array.isArray(value)),
    instructions: string().nullable(),
    tools: objects(),
    reasoning: object().nullable(),
    previous_response_id: string().nullable(),
    stream: boolean(),
  }),
};
