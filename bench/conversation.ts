/**
 * Turns of a conversation before a request's last message, user and assistant in turn, of about `bytes` in all
 * (each turn about 1 KB): what a chat application sends as its history, so that a request's size is measured as
 * well as its count.
 */
export function conversation(bytes: number): { role: string; content: string }[] {
  const turns: { role: string; content: string }[] = [];
  const sentence = 'The quick brown fox jumps over the lazy dog, then weighs what it means at some length. ';
  for (let size = 0; size < bytes; size += 1000)
    turns.push({ role: turns.length % 2 ? 'assistant' : 'user', content: sentence.repeat(11).slice(0, 970) });
  return turns;
}
