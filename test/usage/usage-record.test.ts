import { expect } from 'chai';
import type { ModelPricing } from '../../src/plugins/plugin-contract.ts';
import {
  charge,
  buildUsageRecord,
  dayOf,
  recordTotals,
  type UsageRecordInput,
} from '../../src/usage/usage-accounting.ts';

const pricing: ModelPricing = { input: 2.5, cachedInput: 0.25, output: 15 };

describe('pricing', () => {
  it('charges uncached input + output + cache reads at their price ratio, and costs per 1M tokens', () => {
    // (600 × 2.5 + 400 × 0.25 + 500 × 15) / 1M = 9100 / 1M
    expect(charge({ inputTokens: 1000, outputTokens: 500, cachedTokens: 400 }, pricing)).to.deep.equal({
      totalTokens: 1500,
      chargedTokens: 1140,
      costUsd: 0.0091,
    });
  });

  it('rounds the cache reads up once per request', () => {
    // 3 × 0.1 = 0.3 → 1
    expect(
      charge({ inputTokens: 3, outputTokens: 0, cachedTokens: 3 }, { input: 3, cachedInput: 0.3, output: 15 })
        .chargedTokens,
    ).to.equal(1);
    // 11 × 0.1 = 1.1 → 2, plus 5 uncached and 7 output
    expect(
      charge({ inputTokens: 16, outputTokens: 7, cachedTokens: 11 }, { input: 3, cachedInput: 0.3, output: 15 })
        .chargedTokens,
    ).to.equal(14);
  });

  it('is exact where floating point is not (0.33 / 3.3, 0.11 / 0.7)', () => {
    // 10 × 0.33 / 3.3 is 1.0000000000000002 in floating point: the charge is 1, not 2.
    expect(
      charge({ inputTokens: 10, outputTokens: 0, cachedTokens: 10 }, { input: 3.3, cachedInput: 0.33, output: 1 })
        .chargedTokens,
    ).to.equal(1);
    expect(
      charge({ inputTokens: 70, outputTokens: 0, cachedTokens: 70 }, { input: 0.7, cachedInput: 0.11, output: 1 })
        .chargedTokens,
    ).to.equal(11);
    expect(
      charge({ inputTokens: 1000, outputTokens: 0, cachedTokens: 1000 }, { input: 3, cachedInput: 0.3, output: 1 })
        .chargedTokens,
    ).to.equal(100);
  });

  it('counts cache reads at full weight when they are not cheaper or the model has no input price', () => {
    expect(
      charge({ inputTokens: 100, outputTokens: 10, cachedTokens: 40 }, { input: 0, cachedInput: 0, output: 0 }),
    ).to.deep.equal({ totalTokens: 110, chargedTokens: 110, costUsd: 0 });
    expect(
      charge({ inputTokens: 100, outputTokens: 10, cachedTokens: 40 }, { input: 1, cachedInput: 2, output: 1 })
        .chargedTokens,
    ).to.equal(110);
  });

  it('never counts more cached tokens than input tokens', () => {
    expect(
      charge({ inputTokens: 10, outputTokens: 1, cachedTokens: 50 }, { input: 1, cachedInput: 0.5, output: 1 }),
    ).to.deep.include({ totalTokens: 11, chargedTokens: 6 });
  });
});

describe('buildUsageRecord', () => {
  const input: UsageRecordInput = {
    keyId: 'key_1',
    route: 'chat-completions',
    requestedModel: 'acme-latest',
    model: 'acme/model-1',
    upstream: 'acme',
    status: 200,
    stream: true,
    latencyMs: 812.4,
    usage: { inputTokens: 1000, outputTokens: 500, cachedTokens: 400 },
    pricing,
    time: new Date('2026-11-20T23:59:59.999Z'),
  };

  it('carries the serving endpoint, and the attempts when a request failed over', () => {
    expect(buildUsageRecord({ ...input, endpoint: 'secondary', attempts: 2 })).to.deep.include({
      endpoint: 'secondary',
      attempts: 2,
    });
    const single = buildUsageRecord({ ...input, endpoint: '0', attempts: 1 });
    expect(single.endpoint).to.equal('0');
    expect(single).not.to.have.property('attempts');
  });

  it('prices what the request reported', () => {
    const record = buildUsageRecord(input);
    expect(record).to.deep.equal({
      id: record.id,
      time: '2026-11-20T23:59:59.999Z',
      keyId: 'key_1',
      route: 'chat-completions',
      requestedModel: 'acme-latest',
      model: 'acme/model-1',
      upstream: 'acme',
      status: 200,
      stream: true,
      latencyMs: 812,
      inputTokens: 1000,
      outputTokens: 500,
      cachedTokens: 400,
      totalTokens: 1500,
      chargedTokens: 1140,
      costUsd: 0.0091,
      estimated: false,
      outcome: 'complete',
    });
    expect(record.id).to.match(/^[0-9a-f-]{36}$/);
    expect(buildUsageRecord(input).id).not.to.equal(record.id);
    expect(dayOf(record.time)).to.equal('2026-11-20');
  });

  it('records an upstream error (no usage) with zero tokens and zero cost', () => {
    expect(buildUsageRecord({ ...input, status: 502, usage: undefined })).to.deep.include({
      status: 502,
      inputTokens: 0,
      outputTokens: 0,
      cachedTokens: 0,
      totalTokens: 0,
      chargedTokens: 0,
      costUsd: 0,
      estimated: false,
    });
  });

  it('keeps the estimated flag, the outcome and whole, non-negative counts', () => {
    const record = buildUsageRecord({
      ...input,
      id: 'fixed',
      estimated: true,
      outcome: 'upstream_cut',
      usage: { inputTokens: 10.4, outputTokens: -3, cachedTokens: 99 },
    });
    expect(record).to.deep.include({
      id: 'fixed',
      estimated: true,
      outcome: 'upstream_cut',
      inputTokens: 10,
      outputTokens: 0,
      cachedTokens: 10,
      totalTokens: 10,
    });
  });

  it('sums cost in whole nano-USD', () => {
    expect(recordTotals(buildUsageRecord(input))).to.deep.equal({
      requests: 1,
      input_tokens: 1000,
      output_tokens: 500,
      cached_tokens: 400,
      total_tokens: 1500,
      charged_tokens: 1140,
      cost_nano_usd: 9_100_000,
      cache_hits: 0,
      saved_nano_usd: 0,
    });
  });

  it('records a response cache hit at no cost and no charged tokens, with what it saved', () => {
    const hit = buildUsageRecord({ ...input, cacheHit: true });
    expect(hit).to.deep.include({
      cache: 'hit',
      costUsd: 0,
      chargedTokens: 0,
      savedUsd: 0.0091,
      inputTokens: 1000,
      outputTokens: 500,
      cachedTokens: 400,
      totalTokens: 1500,
    });
    expect(recordTotals(hit)).to.deep.include({
      requests: 1,
      cost_nano_usd: 0,
      charged_tokens: 0,
      cache_hits: 1,
      saved_nano_usd: 9_100_000,
    });
    expect(buildUsageRecord(input)).to.not.have.any.keys('cache', 'savedUsd');
  });
});
