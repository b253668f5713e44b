/**
 * The text of a stream, kept only in case the stream ends without usage and must be estimated. Event
 * data is held as received and turned into text lazily (most streams do report usage, so most never
 * pay for it); past `maxPendingChars` the held data is converted, bounding memory.
 */
export class StreamedText {
  private pending: string[] = [];
  private pendingChars = 0;
  private text = '';

  constructor(
    private readonly extract: (data: string) => string,
    private readonly maxPendingChars = 1 << 20,
  ) {}

  add(data: string): void {
    this.pending.push(data);
    this.pendingChars += data.length;
    if (this.pendingChars > this.maxPendingChars) this.convert();
  }

  value(): string {
    this.convert();
    return this.text;
  }

  private convert(): void {
    for (const data of this.pending) this.text += this.extract(data);
    this.pending = [];
    this.pendingChars = 0;
  }
}
