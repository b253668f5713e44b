import type { Context } from '@opentelemetry/api';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import {
  BatchSpanProcessor,
  type ReadableSpan,
  type Span,
  type SpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import type { BatchSettings } from './tracing-settings.ts';

/** Why spans were lost: the queue was full (the collector is slow or down), or an export failed. */
export type DropReason = 'queue_full' | 'export_failed';

/** Told of every span exported and every span lost. */
export interface SpanCounts {
  exported(count: number): void;
  dropped(reason: DropReason, count: number): void;
}

/**
 * The SDK's batch span processor with every lost span counted: ended spans wait in its queue and
 * go out in batches on a timer, never on a request's path. While the collector is down or slow the
 * queue fills; a span that finds it full is dropped here (the SDK would drop it too, but only say so
 * in a diagnostic line), and a batch whose export failed (after the exporter's retries, within its
 * timeout) is counted lost.
 */
export class CountedBatchProcessor implements SpanProcessor {
  private readonly inner: BatchSpanProcessor;
  /** Spans handed to the batch processor and not yet handed to the exporter. */
  private queued = 0;

  constructor(
    exporter: SpanExporter,
    private readonly batch: BatchSettings,
    private readonly counts: SpanCounts,
  ) {
    const counting: SpanExporter = {
      export: (spans, done) => {
        this.queued -= spans.length;
        // The batch processor starts an export from the `end()` of the span that filled a batch, and the
        // exporter serialises the batch at once: deferred, that work never runs inside a request's turn.
        setImmediate(() =>
          exporter.export(spans, (result: ExportResult) => {
            if (result.code === ExportResultCode.SUCCESS) counts.exported(spans.length);
            else counts.dropped('export_failed', spans.length);
            done(result);
          }),
        );
      },
      shutdown: () => exporter.shutdown(),
      forceFlush: () => exporter.forceFlush?.() ?? Promise.resolve(),
    };
    this.inner = new BatchSpanProcessor(counting, {
      maxQueueSize: batch.maxQueueSize,
      maxExportBatchSize: batch.maxExportBatchSize,
      scheduledDelayMillis: batch.scheduleDelayMs,
      exportTimeoutMillis: batch.exportTimeoutMs,
    });
  }

  onStart(span: Span, parentContext: Context): void {
    this.inner.onStart(span, parentContext);
  }

  onEnd(span: ReadableSpan): void {
    // Unsampled spans never reach the queue (as in the batch processor itself).
    if ((span.spanContext().traceFlags & 1) === 0) return;
    if (this.queued >= this.batch.maxQueueSize) {
      this.counts.dropped('queue_full', 1);
      return;
    }
    this.queued += 1;
    this.inner.onEnd(span);
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush();
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }
}
