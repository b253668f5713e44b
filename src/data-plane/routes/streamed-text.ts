import type { TextSample } from '../../core/exchange.ts';

/**
 * The text of a stream, kept only in case the stream ends without usage and must be estimated, in
 * bounded memory whatever the stream's length: event data is held as received and turned into text
 * lazily (most streams do report usage, so most never pay for it), past `maxPendingChars` the held
 * data is converted, and of the text only the first `maxSampleChars` are kept beside the count of all
 * characters; the estimate extrapolates from that sample.
 */
export class StreamedText {
  private pending: string[] = [];
  private pendingChars = 0;
  private sample = '';
  private chars = 0;

  constructor(
    private readonly extract: (data: string) => string,
    private readonly maxPendingChars = 256 * 1024,
    private readonly maxSampleChars = 256 * 1024,
  ) {}

  add(data: string): void {
    this.pending.push(data);
    this.pendingChars += data.length;
    if (this.pendingChars > this.maxPendingChars) this.convert();
  }

  value(): TextSample {
    this.convert();
    return { text: this.sample, chars: this.chars };
  }

  /** Characters held right now (pending event data and the sample), for tests and diagnostics. */
  get heldChars(): number {
    return this.pendingChars + this.sample.length;
  }

  private convert(): void {
    for (const data of this.pending) {
      const text = this.extract(data);
      this.chars += text.length;
      const room = this.maxSampleChars - this.sample.length;
      if (room > 0) this.sample += text.length <= room ? text : text.slice(0, room);
    }
    this.pending = [];
    this.pendingChars = 0;
  }
}
