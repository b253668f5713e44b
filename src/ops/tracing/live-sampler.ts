import type { Attributes, Context, Link, SpanKind } from '@opentelemetry/api';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  type Sampler,
  type SamplingResult,
} from '@opentelemetry/sdk-trace-base';
import type { SamplerSettings } from './tracing-settings.ts';

/** The SDK's sampler for `OTEL_TRACES_SAMPLER` and its argument. */
export function samplerFor(settings: SamplerSettings): Sampler {
  switch (settings.name) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(settings.ratio);
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(settings.ratio) });
  }
}

/** A sampler a live reload may replace: every span asks the one in force now. */
export class LiveSampler implements Sampler {
  private current: Sampler;
  private settings: SamplerSettings;

  constructor(settings: SamplerSettings) {
    this.settings = settings;
    this.current = samplerFor(settings);
  }

  /** Puts `settings` in force (a no-op when they are the ones in force); true when they changed. */
  update(settings: SamplerSettings): boolean {
    if (settings.name === this.settings.name && settings.ratio === this.settings.ratio) return false;
    this.settings = settings;
    this.current = samplerFor(settings);
    return true;
  }

  shouldSample(
    context: Context,
    traceId: string,
    spanName: string,
    spanKind: SpanKind,
    attributes: Attributes,
    links: Link[],
  ): SamplingResult {
    return this.current.shouldSample(context, traceId, spanName, spanKind, attributes, links);
  }

  toString(): string {
    return `LiveSampler{${this.current.toString()}}`;
  }
}
