import type { IncomingMessage } from 'node:http';
import { expect } from 'chai';
import { checkTrustedProxies, clientAddress, clientAddressResolver, stampClientAddress } from '../../src/core/client-address.ts';
import { loadConfig } from '../../src/config/gateway-config.ts';

function request(peer: string, forwardedFor?: string): IncomingMessage {
  return { socket: { remoteAddress: peer }, connection: { remoteAddress: peer }, headers: forwardedFor ? { 'x-forwarded-for': forwardedFor } : {} } as unknown as IncomingMessage;
}

describe('client address', () => {
  it('is the socket peer when no proxy is trusted, whatever X-Forwarded-For says', () => {
    const req = request('203.0.113.7', '198.51.100.1');
    stampClientAddress(req, clientAddressResolver([]));
    expect(clientAddress(req)).to.equal('203.0.113.7');
  });

  it('is the nearest untrusted address of X-Forwarded-For when the peer is a trusted proxy', () => {
    const resolve = clientAddressResolver(['10.0.0.0/8', 'loopback']);
    const viaProxies = request('127.0.0.1', '198.51.100.1, 203.0.113.9, 10.1.2.3');
    stampClientAddress(viaProxies, resolve);
    expect(clientAddress(viaProxies)).to.equal('203.0.113.9');
    // A peer that is not trusted cannot name another client.
    const direct = request('192.0.2.44', '198.51.100.1');
    stampClientAddress(direct, resolve);
    expect(clientAddress(direct)).to.equal('192.0.2.44');
  });

  it('counts an IPv6 client by its /56', () => {
    const req = request('2001:db8:1:2ff::1');
    stampClientAddress(req, clientAddressResolver([]));
    expect(clientAddress(req)).to.equal('2001:db8:1:200::/56');
  });

  it('reads GATEWAY_TRUSTED_PROXIES and refuses an entry it cannot read, naming it', () => {
    expect(loadConfig({ GATEWAY_TRUSTED_PROXIES: '10.0.0.0/8, loopback' }, '/nonexistent').trustedProxies).to.deep.equal(['10.0.0.0/8', 'loopback']);
    expect(loadConfig({}, '/nonexistent').trustedProxies).to.deep.equal([]);
    expect(() => loadConfig({ GATEWAY_TRUSTED_PROXIES: 'not-an-address' }, '/nonexistent')).to.throw(/GATEWAY_TRUSTED_PROXIES: .*not-an-address/);
    expect(checkTrustedProxies(['192.168.0.0/16'])).to.equal(undefined);
  });
});
