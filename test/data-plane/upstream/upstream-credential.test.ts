import { expect } from 'chai';
import { MockAgent } from 'undici';
import { upstreamCredential, withCredentialQuery } from '../../../src/data-plane/upstream/upstream-credential.ts';
import { UpstreamClient, upstreamEndpoint } from '../../../src/data-plane/upstream/upstream-client.ts';
import type { AuthStyle } from '../../../src/plugins/plugin-contract.ts';

describe('upstreamCredential', () => {
  it('puts the endpoint key where the route declares it', () => {
    expect(upstreamCredential('bearer', 'k-123456789')).to.deep.equal({ headers: { authorization: 'Bearer k-123456789' } });
    expect(upstreamCredential('x-api-key', 'k-123456789')).to.deep.equal({ headers: { 'x-api-key': 'k-123456789' } });
    expect(upstreamCredential({ header: 'x-kappa-key' }, 'k-123456789')).to.deep.equal({ headers: { 'x-kappa-key': 'k-123456789' } });
    expect(upstreamCredential({ header: 'authorization', prefix: 'Token ' }, 'k-1')).to.deep.equal({ headers: { authorization: 'Token k-1' } });
    expect(upstreamCredential({ query: 'key' }, 'k/1+2=3&4')).to.deep.equal({ headers: {}, query: 'key=k%2F1%2B2%3D3%264' });
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
});
