import { expect } from 'chai';
import { MockAgent } from 'undici';
import {
  upstreamCredential,
  withCredentialQuery,
  UpstreamClient,
  upstreamEndpoint,
} from '../../../src/data-plane/upstream/upstream-client.ts';
import type { AuthStyle } from '../../../src/plugins/plugin-contract.ts';

describe('upstreamCredential', () => {
  it('puts the endpoint key where the route declares it', () => {
    expect(upstreamCredential('bearer', 'k-123456789')).to.deep.equal({
      headers: { authorization: 'Bearer k-123456789' },
    });
    expect(upstreamCredential('x-api-key', 'k-123456789')).to.deep.equal({ headers: { 'x-api-key': 'k-123456789' } });
    expect(upstreamCredential({ header: 'x-kappa-key' }, 'k-123456789')).to.deep.equal({
      headers: { 'x-kappa-key': 'k-123456789' },
    });
    expect(upstreamCredential({ header: 'authorization', prefix: 'Token ' }, 'k-1')).to.deep.equal({
      headers: { authorization: 'Token k-1' },
    });
    expect(upstreamCredential({ query: 'key' }, 'k/1+2=3&4')).to.deep.equal({
      headers: {},
      query: 'key=k%2F1%2B2%3D3%264',
    });
  });

  it('sends nothing when the endpoint has no key', () => {
    expect(upstreamCredential({ query: 'key' }, undefined)).to.deep.equal({ headers: {} });
  });

  it('appends the query part after any query the path has', () => {
    expect(withCredentialQuery('/v1/chat', { headers: {}, query: 'key=k' })).to.equal('/v1/chat?key=k');
    expect(withCredentialQuery('/v1/chat?alt=sse', { headers: {}, query: 'key=k' })).to.equal('/v1/chat?alt=sse&key=k');
    expect(withCredentialQuery('/v1/chat', { headers: {} })).to.equal('/v1/chat');
  });

  it('is what the upstream client sends, and only that credential', async () => {
    const agent = new MockAgent();
    agent.disableNetConnect();
    const seen: { path: string; headers: Record<string, string> }[] = [];
    const pool = agent.get('http://upstream.test');
    const cases: AuthStyle[] = [{ header: 'x-kappa-key' }, { query: 'key' }];
    for (let index = 0; index < cases.length; index++) {
      pool.intercept({ path: () => true, method: 'POST' }).reply(200, (options) => {
        seen.push({ path: options.path, headers: options.headers as Record<string, string> });
        return '{}';
      });
    }
    const client = new UpstreamClient({ timeoutMs: 1000, dispatcher: agent });
    for (const auth of cases) {
      const response = await client.open({
        endpoint: upstreamEndpoint('kappa', 'http://upstream.test/v1', 'kappa-key-0001'),
        route: { path: '/chat/completions', format: 'chat-completions', auth },
        body: '{}',
      });
      await response.whole(1 << 20);
    }
    expect(seen[0]!.path).to.equal('/v1/chat/completions');
    expect(seen[0]!.headers['x-kappa-key']).to.equal('kappa-key-0001');
    expect(seen[0]!.headers).not.to.have.property('authorization');
    expect(seen[1]!.path).to.equal('/v1/chat/completions?key=kappa-key-0001');
    expect(seen[1]!.headers).not.to.have.property('authorization');
    expect(seen[1]!.headers).not.to.have.property('x-api-key');
    await client.close();
  });

  it("sends an endpoint's own auth in place of the route's: the route's place gets nothing, the endpoint's header nothing from the client or a default", async () => {
    const agent = new MockAgent();
    agent.disableNetConnect();
    const seen: { path: string; headers: Record<string, string> }[] = [];
    const pool = agent.get('http://upstream.test');
    pool
      .intercept({ path: () => true, method: 'POST' })
      .reply(200, (options) => {
        seen.push({ path: options.path, headers: options.headers as Record<string, string> });
        return '{}';
      })
      .times(4);
    const client = new UpstreamClient({ timeoutMs: 1000, dispatcher: agent });
    // The route forwards and defaults headers that an endpoint takes its key in.
    const route = {
      path: '/chat/completions',
      format: 'chat-completions',
      auth: 'bearer',
      forwardHeaders: ['x-region-key', 'x-trace'],
      defaultHeaders: { 'X-Kappa-Key': 'default-value', 'x-version': '2' },
    } as const;
    const clientHeaders = { 'x-region-key': 'client-value', 'x-trace': 't-1', authorization: 'Bearer sk-client' };
    const auths: (AuthStyle | undefined)[] = [
      { query: 'key' },
      { header: 'x-kappa-key' },
      { header: 'x-region-key', prefix: 'Key ' },
      undefined,
    ];
    for (const auth of auths) {
      const response = await client.open({
        endpoint: upstreamEndpoint('kappa', 'http://upstream.test/v1', 'kappa-key-0001', auth),
        route,
        body: '{}',
        clientHeaders,
      });
      await response.whole(1 << 20);
    }
    const [query, header, prefixed, routes] = seen;
    expect(query!.path).to.equal('/v1/chat/completions?key=kappa-key-0001');
    expect(query!.headers).not.to.have.property('authorization');
    expect(query!.headers).to.include({
      'x-region-key': 'client-value',
      'X-Kappa-Key': 'default-value',
      'x-trace': 't-1',
      'x-version': '2',
    });
    expect(header!.path).to.equal('/v1/chat/completions');
    expect(header!.headers).not.to.have.property('authorization');
    expect(header!.headers).to.include({ 'x-kappa-key': 'kappa-key-0001', 'x-region-key': 'client-value' });
    // The route's default in another spelling of the same header is not sent beside the key.
    expect(header!.headers).not.to.have.property('X-Kappa-Key');
    expect(prefixed!.headers).not.to.have.property('authorization');
    expect(prefixed!.headers).to.include({
      'x-region-key': 'Key kappa-key-0001',
      'X-Kappa-Key': 'default-value',
      'x-trace': 't-1',
    });
    // Without an endpoint auth: the route's own.
    expect(routes!.path).to.equal('/v1/chat/completions');
    expect(routes!.headers).to.include({ authorization: 'Bearer kappa-key-0001', 'x-region-key': 'client-value' });
    for (const one of seen) expect(one.headers).not.to.have.property('x-api-key');
    await client.close();
  });

  it("sends no credential, and still not the client's value in the endpoint's header, when the endpoint has no key", async () => {
    const agent = new MockAgent();
    agent.disableNetConnect();
    let headers: Record<string, string> = {};
    agent
      .get('http://upstream.test')
      .intercept({ path: () => true, method: 'POST' })
      .reply(200, (options) => {
        headers = options.headers as Record<string, string>;
        return '{}';
      });
    const client = new UpstreamClient({ timeoutMs: 1000, dispatcher: agent });
    const route = {
      path: '/chat/completions',
      format: 'chat-completions',
      auth: 'bearer',
      forwardHeaders: ['x-region-key'],
    } as const;
    const response = await client.open({
      endpoint: upstreamEndpoint('kappa', 'http://upstream.test/v1', undefined, { header: 'x-region-key' }),
      route,
      body: '{}',
      clientHeaders: { 'x-region-key': 'client-value' },
    });
    await response.whole(1 << 20);
    expect(headers).not.to.have.property('x-region-key');
    expect(headers).not.to.have.property('authorization');
    await client.close();
  });

  it("never forwards the gateway's x-gateway-end-user header, even when a route lists it", async () => {
    const agent = new MockAgent();
    agent.disableNetConnect();
    let headers: Record<string, string> = {};
    agent
      .get('http://upstream.test')
      .intercept({ path: () => true, method: 'POST' })
      .reply(200, (options) => {
        headers = options.headers as Record<string, string>;
        return '{}';
      });
    const client = new UpstreamClient({ timeoutMs: 1000, dispatcher: agent });
    const route = {
      path: '/chat/completions',
      format: 'chat-completions',
      auth: 'bearer',
      forwardHeaders: ['x-gateway-end-user', 'x-trace'],
    } as const;
    const clientHeaders = { 'x-gateway-end-user': 'alice', 'x-trace': 't-1' };
    const response = await client.open({
      endpoint: upstreamEndpoint('kappa', 'http://upstream.test/v1', 'k', undefined),
      route,
      body: '{}',
      clientHeaders,
    });
    await response.whole(1 << 20);
    expect(headers).to.include({ 'x-trace': 't-1' });
    expect(Object.keys(headers).map((name) => name.toLowerCase())).not.to.include('x-gateway-end-user');
    await client.close();
  });
});
