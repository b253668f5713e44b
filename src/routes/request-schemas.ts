import * as yup from 'yup';
import type { UpstreamRouteId } from '../plugins/plugin-contract.ts';
import type { FastCheck } from './validate-request.ts';

// The checks follow the providers' published request definitions (the OpenAI OpenAPI document behind
// the `openai` package's `ChatCompletionCreateParamsBase` and `ResponseCreateParamsBase`, Anthropic's
// `MessageCreateParamsBase` and `MessageCountTokensParams`): a field the definition declares nullable
// accepts null here too. Only fields the gateway reads or the spec names are checked; every other field
// is forwarded as sent.

// Messages carry no field path: the path goes into "Field '<path>': <message>".
const REQUIRED = 'is required';
const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
const isString = (value: unknown): value is string => typeof value === 'string';

const string = () => yup.string().typeError('must be a string');
const boolean = () => yup.boolean().typeError('must be true or false');
// skipAbsent: undefined and null are left to the schema's optional/nullable rule.
const object = () => yup.mixed<Record<string, unknown>>().test({ name: 'object', message: 'must be an object', skipAbsent: true, test: isPlainObject });
const objects = () => yup.array(object().required('must be an object')).typeError('must be an array of objects');
const oneOf = (message: string, ...checks: ((value: unknown) => boolean)[]) =>
  yup.mixed().test({ name: 'shape', message, skipAbsent: true, test: (value) => checks.some((check) => check(value)) });

const model = () => string().required(REQUIRED);

const chatMessage = yup
  .object({
    role: string().required(REQUIRED),
    // Null with `tool_calls` or a legacy `function_call` (assistant), and on `function` messages.
    content: yup
      .mixed()
      .nullable()
      .test({ name: 'content', message: 'must be a string, an array of content parts or null', skipAbsent: true, test: (value) => isString(value) || Array.isArray(value) }),
  })
  .typeError('must be an object')
  .required('must be an object');

/** Per route, the fields the gateway checks (yup, for the messages); every other field is forwarded untouched. */
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
    stream: boolean().nullable(),
    stream_options: object().nullable(),
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
      .test({ name: 'input', message: 'must be a string or a list of input items', skipAbsent: true, test: (value) => isString(value) || Array.isArray(value) }),
    instructions: string().nullable(),
    tools: objects(),
    reasoning: object().nullable(),
    previous_response_id: string().nullable(),
    stream: boolean().nullable(),
  }),
};

// The fast accept checks: the same rules as the schemas above, written out by hand, one line per field
// (yup's `string().required()` refuses the empty string; its non-nullable schemas refuse null). A body
// they accept is valid; a body they refuse goes through yup, which names every bad field. A property
// test holds each check to its schema.
const absent = (value: unknown) => value === undefined;
const nonEmptyString = (value: unknown) => isString(value) && value.length > 0;
const optionalString = (value: unknown) => absent(value) || isString(value);
const optionalBoolean = (value: unknown) => absent(value) || typeof value === 'boolean';
const optionalObject = (value: unknown) => absent(value) || isPlainObject(value);
const nullable = (check: (value: unknown) => boolean) => (value: unknown) => value === null || check(value);
const optionalObjects = (value: unknown) => absent(value) || (Array.isArray(value) && value.every(isPlainObject));
const requiredObjects = (value: unknown) => Array.isArray(value) && value.length > 0 && value.every(isPlainObject);
const systemPrompt = (value: unknown) => absent(value) || isString(value) || Array.isArray(value);

const chatMessageOk = (message: unknown) =>
  isPlainObject(message) && nonEmptyString(message.role) && (message.content === undefined || message.content === null || isString(message.content) || Array.isArray(message.content));
const chatMessages = (value: unknown) => Array.isArray(value) && value.length > 0 && value.every(chatMessageOk);

/**
 * Per route, hand-written checks that accept exactly the bodies (and the array items) the schema in
 * {@link REQUEST_SCHEMAS} accepts.
 */
export const FAST_CHECKS: Readonly<Record<UpstreamRouteId, FastCheck>> = {
  'chat-completions': {
    accepts: (body) =>
      nonEmptyString(body.model) &&
      chatMessages(body.messages) &&
      optionalObjects(body.tools) &&
      (absent(body.tool_choice) || isString(body.tool_choice) || isPlainObject(body.tool_choice)) &&
      optionalObject(body.response_format) &&
      nullable(optionalBoolean)(body.stream) &&
      nullable(optionalObject)(body.stream_options),
    items: { messages: chatMessageOk, tools: isPlainObject },
  },
  messages: {
    accepts: (body) =>
      nonEmptyString(body.model) &&
      requiredObjects(body.messages) &&
      Number.isInteger(body.max_tokens) &&
      (body.max_tokens as number) >= 1 &&
      systemPrompt(body.system) &&
      optionalObjects(body.tools) &&
      optionalObject(body.thinking) &&
      optionalBoolean(body.stream),
    items: { messages: isPlainObject, tools: isPlainObject },
  },
  'count-tokens': {
    accepts: (body) =>
      nonEmptyString(body.model) &&
      requiredObjects(body.messages) &&
      systemPrompt(body.system) &&
      optionalObjects(body.tools) &&
      optionalObject(body.thinking),
    items: { messages: isPlainObject, tools: isPlainObject },
  },
  responses: {
    accepts: (body) =>
      nonEmptyString(body.model) &&
      (isString(body.input) || Array.isArray(body.input)) &&
      nullable(optionalString)(body.instructions) &&
      optionalObjects(body.tools) &&
      nullable(optionalObject)(body.reasoning) &&
      nullable(optionalString)(body.previous_response_id) &&
      nullable(optionalBoolean)(body.stream),
    items: { tools: isPlainObject },
  },
};
