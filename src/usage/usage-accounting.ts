import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { quotaExceeded } from '../errors/gateway-errors.ts';
import type { ModelRegistry, ResolvedModel } from '../plugins/model-registry.ts';
import type { TokenUsage, UpstreamRouteId, UsageExtractor, WireFormat } from '../plugins/plugin-contract.ts';
import type { CallerKey, Exchange, UsageAccounting } from '../routes/route-services.ts';
import { charge } from './pricing.ts';
import { standardExtractors } from './standard-extractors.ts';
import { streamedText } from './streamed-text.ts';
import { estimateUsage } from './token-estimate.ts';
import { dayOf, type UsageRecord } from './usage-record.ts';
import type { UsageStore } from './usage-store.ts';

const ZERO: TokenUsage = { inputTokens: 0, outputTokens: 0, cachedTokens: 0 };
/** The key id recorded when the gateway runs without authentication (tests, local trials). */
export const ANONYMOUS_KEY_ID = 'anonymous';

/**
 * Usage accounting for the routes: picks each answer's extractor (the plugin's own, else the
 * standard one of its wire format), turns an exchange into one priced record, estimates with a
 * tokenizer where the upstream reported nothing, and hands the record to the store.
 */
export class GatewayUsageAccounting implements UsageAccounting {
  private readonly estimating = new Set<Promise<void>>();

  constructor(
    private readonly store: UsageStore,
    private readonly registry: () => ModelRegistry,
    private readonly logger: Logger,
    private readonly now: () => Date = () => new Date(),
  ) {}

  async checkQuota(caller: CallerKey | undefined): Promise<void> {
    const quota = caller?.quota;
    if (!caller || !quota || (quota.daily === undefined && quota.monthly === undefined)) return;
    const today = dayOf(this.now());
    if (quota.daily !== undefined) {
      const used = await this.store.chargedTokens(caller.id, today, today);
      if (used >= quota.daily) throw quotaExceeded(`${used} of ${quota.daily} charged tokens used today (UTC)`);
    }
    if (quota.monthly !== undefined) {
      const used = await this.store.chargedTokens(caller.id, `${today.slice(0, 7)}-01`, today);
      if (used >= quota.monthly) throw quotaExceeded(`${used} of ${quota.monthly} charged tokens used this month (UTC)`);
    }
  }

  extractor(format: WireFormat, route: UpstreamRouteId, resolved: ResolvedModel): UsageExtractor {
    return this.registry().usageExtractor(route, resolved.canonicalId) ?? standardExtractors[format];
  }

  streamedText(format: WireFormat, data: string): string {
    return streamedText(format, data);
  }

  charge(usage: TokenUsage, resolved: ResolvedModel) {
    return charge(usage, resolved.model.pricing);
  }

  record(exchange: Exchange): void {
    const finish = (usage: TokenUsage, estimated: boolean) => {
      const { totalTokens, chargedTokens, costUsd } = charge(usage, exchange.resolved.model.pricing);
      const record: UsageRecord = {
        id: randomUUID(),
        time: this.now().toISOString(),
        keyId: exchange.keyId ?? ANONYMOUS_KEY_ID,
        route: exchange.route,
        requestedModel: exchange.resolved.requestedId,
        model: exchange.resolved.canonicalId,
        upstream: exchange.resolved.plugin.vendor,
        status: exchange.status,
        stream: exchange.stream,
        latencyMs: Math.round(exchange.latencyMs),
        inputTokens: usage.inputTokens,
        outputTokens: usage.outputTokens,
        cachedTokens: usage.cachedTokens,
        totalTokens,
        chargedTokens,
        costUsd,
        estimated,
      };
      this.store.record(record);
    };
    if (exchange.usage) return finish(exchange.usage, false);
    if (!exchange.consumed) return finish(ZERO, false);
    const responseText = exchange.responseText();
    const estimate = estimateUsage(exchange.requestBody, responseText).then(
      (usage) => finish(usage, true),
      (error: unknown) => {
        this.logger.error({ err: error }, 'usage estimate failed; recording zero tokens flagged as estimated');
        finish(ZERO, true);
      },
    );
    this.estimating.add(estimate);
    void estimate.finally(() => this.estimating.delete(estimate));
  }

  /** Resolves when every record taken so far has reached the store (estimates included). */
  async flush(): Promise<void> {
    await Promise.all(this.estimating);
    await this.store.flush();
  }
}
