import type { Counter, Histogram, LabelValues } from 'prom-client';

/**
 * Children of prom-client metrics that are bound to their series for good. prom-client's own `labels(...)` children
 * hash their label set, validate it and build an object on every update (about a microsecond each, and a request makes
 * a dozen). These make their first update through prom-client itself, which creates or finds the series, then keep a
 * reference to that series and update it in place as prom-client's update does. A new series map (`reset()`) sends
 * the next update through prom-client again. They rely on prom-client 15's series layout, which
 * `test/ops/metrics/bound-children.test.ts` checks by comparing their output with prom-client's own children.
 */
export interface BoundCounter {
  inc(value?: number): void;
}

export interface BoundHistogram {
  observe(value: number): void;
}

interface CounterSeries {
  value: number;
  readonly labels: LabelValues<string>;
}

interface HistogramSeries {
  sum: number;
  count: number;
  readonly bucketValues: Record<string, number>;
  readonly labels: LabelValues<string>;
}

/** The part of a prom-client metric these children use: its series by label hash, replaced on reset. */
interface SeriesOf<S> {
  readonly hashMap: Record<string, S>;
}

/** The series whose labels are `labels`, in a metric's series map. */
function seriesIn<S extends { readonly labels: LabelValues<string> }>(
  map: Record<string, S>,
  labels: LabelValues<string>,
): S | undefined {
  const names = Object.keys(labels);
  for (const series of Object.values(map)) {
    const own = series.labels;
    if (Object.keys(own).length !== names.length) continue;
    if (names.every((name) => String(own[name]) === String(labels[name]))) return series;
  }
  return undefined;
}

export function boundCounter<T extends string>(counter: Counter<T>, labels: LabelValues<T>): BoundCounter {
  const metric = counter as unknown as SeriesOf<CounterSeries>;
  let map: Record<string, CounterSeries> | undefined;
  let series: CounterSeries | undefined;
  return {
    inc(value = 1) {
      if (series !== undefined && map === metric.hashMap && value >= 0 && Number.isFinite(value)) {
        series.value += value;
        return;
      }
      // The first update, one after a reset, or a value prom-client refuses (it throws as it always did).
      counter.inc(labels, value);
      map = metric.hashMap;
      series = seriesIn(map, labels);
    },
  };
}

export function boundHistogram<T extends string>(histogram: Histogram<T>, labels: LabelValues<T>): BoundHistogram {
  const metric = histogram as unknown as SeriesOf<HistogramSeries> & { readonly upperBounds: readonly number[] };
  // The bucket of each bound as prom-client keys it (the bound as a property name).
  const bounds = metric.upperBounds;
  const keys = bounds.map(String);
  let map: Record<string, HistogramSeries> | undefined;
  let series: HistogramSeries | undefined;
  return {
    observe(value) {
      if (series !== undefined && map === metric.hashMap && Number.isFinite(value)) {
        series.sum += value;
        series.count += 1;
        for (let index = 0; index < bounds.length; index += 1) {
          if (value <= bounds[index]!) {
            series.bucketValues[keys[index]!]! += 1;
            break;
          }
        }
        return;
      }
      histogram.observe(labels, value);
      map = metric.hashMap;
      series = seriesIn(map, labels);
    },
  };
}
