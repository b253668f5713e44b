import type { Logger } from 'pino';
import { WIRE_FORMATS } from '../core/formats/index.ts';
import type { ModelRegistry, ResolvedModel } from '../core/model-registry.ts';
import type { TokenUsage, UpstreamRouteId, UsageExtractor, WireFormat } from '../plugins/plugin-contract.ts';
import type { CallerKey, ExchangeRecord, RecordedUsage, UsageAccounting } from '../core/exchange.ts';
import { charge } from './pricing.ts';
import { estimateInputTokens, estimateUsage } from './token-estimate.ts';
import { buildUsageRecord } from './usage-record.ts';
import type { UsageStore } from './usage-store.ts';

/** The key id recorded when the gateway runs without authentication (tests, local trials). */
export const ANONYMOUS_KEY_ID = 'anonymous';

/**
 * Usage accounting for the routes: picks each answer's extractor (the plugin's own, else the
 * standard one of its wire format), turns an exchange into one priced record, estimates with a
 * tokenizer where the upstream reported nothing, and hands the record to the store.
 *
 * Which figures a record gets:
 * - usage reported and the answer complete: exactly what was reported;
 * - nothing consumed upstream (an upstream error, count_tokens): zero tokens, not estimated;
 * - consumed but no usage reported (a stream that broke off or ended without its usage event):
 *   tokenizer counts of the request and of the text streamed so far, `estimated: true`;
 * - a stream that did not complete (the client went away, or the upstream cut it before its terminal
 *   event) after some usage was reported (e.g. the input counts of a Messages `message_start`): the
 *   reported input, and the larger of the reported and the counted output, `estimated: true` when the
 *   counted output was taken.
 * Every record carries the exchange's `outcome`.
 */
export class GatewayUsageAccounting implements UsageAccounting {
  private readonly estimating = new Set<Promise<RecordedUsage>>();

  constructor(
    private readonly store: UsageStore,
    private readonly registry: () => ModelRegistry,
    private readonly logger: Logger,
    private readonly now: () => Date = () => new Date(),
  ) {}

  extractor(format: WireFormat, route: UpstreamRouteId, resolved: ResolvedModel): UsageExtractor {
    return this.registry().usageExtractor(route, resolved.canonicalId) ?? WIRE_FORMATS[format].usage;
  }

  streamedText(format: WireFormat, data: string): string {
    return WIRE_FORMATS[format].textOf(data);
  }

  charge(usage: TokenUsage, resolved: ResolvedModel) {
    return charge(usage, resolved.model.pricing);
  }

  record(exchange: ExchangeRecord): Promise<RecordedUsage> | undefined {
    try {
      const time = this.now();
      const finish = (usage: TokenUsage | undefined, estimated: boolean) => {
        const record = buildUsageRecord({
          keyId: exchange.keyId ?? ANONYMOUS_KEY_ID,
          route: exchange.route,
          requestedModel: exchange.resolved.requestedId,
          model: exchange.resolved.canonicalId,
          upstream: exchange.resolved.plugin.vendor,
          status: exchange.status,
          stream: exchange.stream,
          latencyMs: exchange.latencyMs,
          requestId: exchange.requestId,
          usage,
          estimated,
          outcome: exchange.outcome,
          endpoint: exchange.endpoint,
          attempts: exchange.attempts,
          pricing: exchange.resolved.model.pricing,
          time,
          cacheHit: exchange.cacheHit !== undefined,
          guardrails: exchange.guardrails,
        });
        // The reservation settles to the record's figures, estimated ones included (zero: released).
        exchange.settlement?.settle(record);
        this.store.record(record);
      };
      const reported = exchange.usage;
      // A plugin fault leaves the answer's usage unread or partly read, as a cut stream does.
      // So does a stream a guardrail ended: the upstream was dropped mid-answer (a blocked JSON answer came whole, its
      // usage with it).
      const cutShort = (exchange.stream && exchange.outcome !== 'complete') || exchange.outcome === 'plugin_error';
      const counts = exchange.route !== 'count-tokens';
      const needsEstimate = counts && exchange.consumed && (!reported || cutShort);
      // Earlier attempts the upstream had the request of, their usage never read: each costs the input.
      const unreported = counts ? (exchange.unreportedAttempts ?? 0) : 0;
      // Reported and complete, or nothing consumed upstream: the record is taken as it is.
      if (!needsEstimate && unreported === 0) {
        finish(reported, false);
        return undefined;
      }
      const settle = (usage: TokenUsage | undefined, estimated: boolean): RecordedUsage => {
        finish(usage, estimated);
        return { usage, estimated };
      };
      const counting = needsEstimate
        ? estimateUsage(exchange.requestBody(), exchange.responseText())
        : estimateInputTokens(exchange.requestBody()).then((inputTokens): TokenUsage => ({
            inputTokens,
            outputTokens: 0,
            cachedTokens: 0,
          }));
      const estimate = counting.then(
        (counted) => {
          let usage = reported;
          let estimated = false;
          if (needsEstimate && !reported) {
            usage = counted;
            estimated = true;
          } else if (needsEstimate && reported) {
            estimated = counted.outputTokens > reported.outputTokens;
            usage = { ...reported, outputTokens: Math.max(reported.outputTokens, counted.outputTokens) };
          }
          if (unreported > 0) {
            usage = {
              ...(usage ?? { outputTokens: 0, cachedTokens: 0 }),
              inputTokens: (usage?.inputTokens ?? 0) + counted.inputTokens * unreported,
            };
            estimated = true;
          }
          return settle(usage, estimated);
        },
        (error: unknown) => {
          this.logger.error(
            { err: error },
            'usage estimate failed; recording the reported usage (or zero) flagged as estimated',
          );
          return settle(reported, true);
        },
      );
      // A store that throws must not leave the promise rejected (callers are told it never rejects).
      const recorded = estimate.catch((error: unknown): RecordedUsage => {
        this.logger.error({ err: error }, 'usage record failed');
        return { usage: reported, estimated: true };
      });
      this.estimating.add(recorded);
      void recorded.finally(() => this.estimating.delete(recorded));
      return recorded;
    } catch (error) {
      this.logger.error({ err: error }, 'usage record failed');
      return undefined;
    }
  }

  /** Resolves when every record taken so far has reached the store (estimates included). */
  async flush(): Promise<void> {
    await Promise.all(this.estimating);
    await this.store.flush();
  }
}
