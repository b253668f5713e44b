import { expect } from 'chai';
import { definePlugin } from '../../src/plugins/plugin-contract.ts';

// Compiled by `tsc --noEmit` (npm run typecheck): each `@ts-expect-error` below must meet an error, so a
// misspelled field that compiled would fail the type check ("Unused '@ts-expect-error' directive").
const route = { path: '/chat/completions', format: 'chat-completions', auth: 'bearer' } as const;
const model = {
  id: 'kappa-1',
  listed: true,
  routes: ['chat-completions'],
  pricing: { input: 1, cachedInput: 0.1, output: 4 },
} as const;

describe('definePlugin typing', () => {
  it('accepts an exact declaration and refuses misspelled fields at compile time', () => {
    const ok = definePlugin({
      contract: 1,
      vendor: 'kappa',
      routes: { 'chat-completions': { ...route, defaultHeaders: { 'x-v': '1' } } },
      models: [model],
    });
    expect(ok.vendor).to.equal('kappa');

    definePlugin({
      contract: 1,
      vendor: 'kappa',
      // @ts-expect-error defaultHeader is not a field (defaultHeaders is)
      routes: { 'chat-completions': { ...route, defaultHeader: { 'x-v': '1' } } },
      models: [model],
    });
    definePlugin({
      contract: 1,
      vendor: 'kappa',
      routes: { 'chat-completions': route },
      models: [model],
      // @ts-expect-error streamFixup is not a field (streamFixups is)
      streamFixup: [],
    });
    definePlugin({
      contract: 1,
      vendor: 'kappa',
      routes: { 'chat-completions': route },
      // @ts-expect-error pricing.cached is not a field (cachedInput is)
      models: [{ ...model, pricing: { input: 1, cached: 0.1, cachedInput: 0.1, output: 4 } }],
    });
  });
});
