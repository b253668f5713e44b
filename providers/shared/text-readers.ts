/** Readers of the generated text in the three upstream answer formats, shared by the native chat adapters. */

type Part = { type?: unknown; text?: unknown };

const list = (value: unknown): unknown[] => (Array.isArray(value) ? value : []);
const field = (value: unknown, key: string): unknown =>
  typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[key] : undefined;
const texts = (parts: unknown[], type: string) =>
  parts
    .filter((part): part is Part => field(part, 'type') === type && typeof field(part, 'text') === 'string')
    .map((part) => part.text as string);
const joined = (parts: string[]) => (parts.length ? parts.join('') : undefined);

/** Text of the first choice of a Chat Completions answer. */
export function readChatCompletionText(body: unknown): string | undefined {
  const content = field(field(list(field(body, 'choices'))[0], 'message'), 'content');
  return typeof content === 'string' ? content : undefined;
}

/** The `output_text` parts of a Responses answer's `message` items, joined (reasoning and tool items skipped). */
export function readResponsesText(body: unknown): string | undefined {
  const messages = list(field(body, 'output')).filter((item) => field(item, 'type') === 'message');
  return joined(
    texts(
      messages.flatMap((item) => list(field(item, 'content'))),
      'output_text',
    ),
  );
}

/** The `text` blocks of a Messages answer, joined (thinking and tool blocks skipped). */
export function readMessagesText(body: unknown): string | undefined {
  return joined(texts(list(field(body, 'content')), 'text'));
}
