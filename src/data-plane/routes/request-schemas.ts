import * as yup from 'yup';
import type { UpstreamRouteId } from '../../plugins/plugin-contract.ts';
import { fastCheckOf, jsonTypes, shapeMeta } from './request-shapes.ts';
import type { FastCheck } from './request-shapes.ts';

// The checks follow the providers' published request definitions (the OpenAI OpenAPI document behind
// the `openai` package's `ChatCompletionCreateParamsBase` and `ResponseCreateParamsBase`, Anthropic's
// `MessageCreateParamsBase` and `MessageCountTokensParams`): a field the definition declares nullable
// accepts null here too. Only fields the gateway reads or the spec names are checked; every other field
// is forwarded as sent.

// Messages carry no field path: the path goes into "Field '<path>': <message>".
const REQUIRED = 'is required';

const string = () => yup.string().typeError('must be a string');
const boolean = () => yup.boolean().typeError('must be true or false');
const object = () => jsonTypes('must be an object', 'object');
const objects = () => yup.array(object().required('must be an object')).typeError('must be an array of objects');

const model = () => string().required(REQUIRED);

const chatMessage = yup
  .object({
    role: string().required(REQUIRED),
    // Null with `tool_calls` or a legacy `function_call` (assistant), and on `function` messages.
    content: jsonTypes('must be a string, an array of content parts or null', 'string', 'array').nullable(),
  })
  .typeError('must be an object')
  .required('must be an object');

/**
 * Per route, the fields the gateway checks (yup, for the messages); every other field is forwarded
 * untouched. The one written form of each request shape: the fast accept check below and the OpenAPI
 * request components are derived from these schemas (src/routes/request-shapes.ts).
 */
export const REQUEST_SCHEMAS: Readonly<Record<UpstreamRouteId, yup.AnyObjectSchema>> = {
  'chat-completions': yup.object({
    model: model(),
    messages: yup
      .array(chatMessage)
      .typeError('must be an array of messages')
      .required(REQUIRED)
      .min(1, 'must hold at least one message'),
    tools: objects(),
    tool_choice: jsonTypes('must be a string or an object', 'string', 'object'),
    response_format: object(),
    stream: boolean().nullable(),
    stream_options: object().nullable(),
  }),
  messages: yup.object({
    model: model(),
    messages: objects().required(REQUIRED).min(1, 'must hold at least one message'),
    max_tokens: yup
      .number()
      .typeError('must be an integer')
      .integer('must be an integer')
      .min(1, 'must be at least 1')
      .required(REQUIRED),
    system: jsonTypes('must be a string or an array of text blocks', 'string', 'array'),
    tools: objects(),
    thinking: object(),
    stream: boolean(),
  }),
  'count-tokens': yup.object({
    model: model(),
    messages: objects().required(REQUIRED).min(1, 'must hold at least one message'),
    system: jsonTypes('must be a string or an array of text blocks', 'string', 'array'),
    tools: objects(),
    thinking: object(),
  }),
  responses: yup.object({
    model: model(),
    input: jsonTypes('must be a string or a list of input items', 'string', 'array').required(REQUIRED),
    instructions: string().nullable(),
    tools: objects(),
    reasoning: object().nullable(),
    previous_response_id: string().nullable(),
    stream: boolean().nullable(),
  }),
};

/**
 * Per route, the accept check derived from its schema: a body it accepts is valid; one it refuses goes through yup,
 * which names every bad field.
 */
export const FAST_CHECKS: Readonly<Record<UpstreamRouteId, FastCheck>> = Object.fromEntries(
  Object.entries(REQUEST_SCHEMAS).map(([route, schema]) => [route, fastCheckOf(schema, route)]),
) as Record<UpstreamRouteId, FastCheck>;
/** The largest `max_retries` a caller may ask for on the native chat route; a larger value is a 400 ValidationError. */
export const MAX_RETRIES_CAP = 10;

const number = (message: string) => yup.number().typeError(message);

/** The native chat route's body (`POST /v1/chat`): only these fields; the route refuses any other one itself. */
export const NATIVE_CHAT_SCHEMA = yup
  .object({
    model: yup.string().typeError('must be a string').required('is required'),
    input: yup
      .string()
      .typeError('must be a string')
      .nonNullable('must be a string')
      .defined('is required')
      .min(1, 'must not be empty'),
    web_search: yup.boolean().typeError('must be true or false'),
    temperature: number('must be a number').min(0, 'must be >= 0'),
    max_output_tokens: number('must be a positive integer')
      .integer('must be a positive integer')
      .min(1, 'must be a positive integer'),
    max_retries: number('must be an integer >= 0')
      .integer('must be an integer >= 0')
      .min(0, 'must be an integer >= 0')
      .max(MAX_RETRIES_CAP, `must be at most ${MAX_RETRIES_CAP}`),
    timeout: number('must be a number of seconds > 0')
      .moreThan(0, 'must be a number of seconds > 0')
      .meta(shapeMeta({ description: 'Seconds' })),
  })
  .meta(shapeMeta({ closed: true }));
