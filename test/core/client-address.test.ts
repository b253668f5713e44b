import type { IncomingMessage } from 'node:http';
import { expect } from 'chai';
import {
  checkTrustedProxies,
  clientAddress,
  clientAddressResolver,
  stampClientAddress,
} from '../../src/core/incoming-request.ts';
import { loadConfig } from '../../src/config/gateway-config.ts';

function request(peer: string, forwardedFor?: string, headers: Record<string, string> = {}): IncomingMessage {
  return {
    socket: { remoteAddress: peer },
    connection: { remoteAddress: peer },
    headers: { ...headers, ...(forwardedFor ? { 'x-forwarded-for': forwardedFor } : {}) },
  } as unknown as IncomingMessage;
}

/** The client address a trusted loopback proxy's `X-Forwarded-For` resolves to, before any /56 grouping. */
function resolved(forwardedFor: string, trusted: readonly string[] = ['loopback'], peer = '127.0.0.1'): string {
  return clientAddressResolver(trusted)(request(peer, forwardedFor));
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

  it('reads every spelling of one client in X-Forwarded-For as one canonical address', () => {
    // Ports (IPv4 `ip:port`, as some load balancers write it, and bracketed IPv6), zone ids, IPv4-mapped
    // IPv6, leading zeros (read as decimal) and the 32-bit integer form.
    const spellings = [
      '10.0.0.1',
      '10.0.0.1:5678',
      '10.0.0.1:0',
      '010.0.0.1',
      '010.000.000.001:80',
      '10.0.0.1%eth0',
      '10.0.0.1%eth0:443',
      '::ffff:10.0.0.1',
      '[::ffff:10.0.0.1]',
      '[::ffff:10.0.0.1]:8080',
      '::FFFF:a00:1',
      '[0:0:0:0:0:ffff:0a00:0001%25eth0]:1',
      '::ffff:010.0.0.1',
      '167772161',
      '167772161:65535',
      '"10.0.0.1:4711"',
      ' 10.0.0.1:1 ',
    ];
    for (const spelling of spellings) expect(resolved(spelling), spelling).to.equal('10.0.0.1');
    expect(resolved('[2001:DB8:0:0::1]:443')).to.equal('2001:db8::1');
    expect(resolved('2001:0db8:0000::0001')).to.equal('2001:db8::1');
    expect(resolved('"[2001:db8::1]:4711"')).to.equal('2001:db8::1');
    expect(resolved('fe80::1%eth0')).to.equal('fe80::1');
    expect(resolved('[fe80::1%eth0]:443')).to.equal('fe80::1');
    expect(resolved('0')).to.equal('0.0.0.0');
    expect(resolved('4294967295')).to.equal('255.255.255.255');
    // Every rule counts them under one key.
    for (const spelling of spellings) {
      const req = request('127.0.0.1', spelling);
      stampClientAddress(req, clientAddressResolver(['loopback']));
      expect(clientAddress(req), spelling).to.equal('10.0.0.1');
    }
    const v6 = request('127.0.0.1', '[2001:DB8:1:2FF::1%1]:443');
    stampClientAddress(v6, clientAddressResolver(['loopback']));
    expect(clientAddress(v6)).to.equal('2001:db8:1:200::/56');
  });

  it('counts an entry it cannot read as the address of the proxy that wrote it', () => {
    const unreadable = [
      'not-an-address',
      'unknown',
      '_hidden',
      '',
      '10.0.0.1:99999',
      '10.0.0.1:port',
      '10.0.0.1:',
      '256.0.0.1',
      '10.0.0',
      '10.1',
      '0x0a.0.0.1',
      '0x0a000001',
      '4294967296',
      '1.2.3.4 5.6.7.8',
      'for=192.0.2.60;proto=http',
      '[10.0.0.1]',
      '[2001:db8::1',
      '2001:db8::1]:443',
      '[2001:db8::1]443',
      '::ffff:10.0.0.1:80',
      '2001:db8::g',
      '"10.0.0.1',
    ];
    for (const entry of unreadable) expect(resolved(`${entry}`), JSON.stringify(entry)).to.equal('127.0.0.1');
    // Behind two proxies: the unreadable entry is counted as the (trusted) proxy that appended it.
    expect(resolved('198.51.100.1, garbage, 10.1.2.3', ['10.0.0.0/8', 'loopback'])).to.equal('10.1.2.3');
    // An empty X-Forwarded-For names nobody: the peer is the client.
    expect(resolved(', ,', ['loopback'])).to.equal('127.0.0.1');
  });

  it('decides trust on the canonical address too, so that one spelling cannot pass for a trusted proxy', () => {
    const trusted = ['10.0.0.0/8', 'loopback'];
    // proxy-addr alone read `012.0.0.1` as octal (10.0.0.1, trusted) and went on to the entry on its left.
    expect(resolved('203.0.113.9, 012.0.0.1', trusted)).to.equal('12.0.0.1');
    // Any spelling of a trusted proxy is that proxy.
    expect(resolved('203.0.113.9, 10.0.0.1:8080', trusted)).to.equal('203.0.113.9');
    expect(resolved('203.0.113.9, [::ffff:10.0.0.1]', trusted)).to.equal('203.0.113.9');
    expect(resolved('203.0.113.9:1234, 167772161', trusted)).to.equal('203.0.113.9');
    // An IPv4-mapped peer is its IPv4 address, trusted or not.
    expect(resolved('198.51.100.1', trusted, '::ffff:127.0.0.1')).to.equal('198.51.100.1');
    expect(clientAddressResolver([])(request('::ffff:203.0.113.7'))).to.equal('203.0.113.7');
    expect(resolved('198.51.100.1', trusted, '::ffff:192.0.2.44')).to.equal('192.0.2.44');
  });

  it("does not read the Forwarded header: a proxy that appends X-Forwarded-For passes a client's own Forwarded on", () => {
    const resolve = clientAddressResolver(['loopback']);
    expect(resolve(request('127.0.0.1', undefined, { forwarded: 'for=192.0.2.60;proto=http' }))).to.equal('127.0.0.1');
    expect(resolve(request('127.0.0.1', '203.0.113.9:4711', { forwarded: 'for="[2001:db8::1]:4711"' }))).to.equal(
      '203.0.113.9',
    );
  });

  it('reads GATEWAY_TRUSTED_PROXIES and refuses an entry it cannot read, naming it', () => {
    expect(
      loadConfig({ GATEWAY_TRUSTED_PROXIES: '10.0.0.0/8, loopback' }, '/nonexistent').trustedProxies,
    ).to.deep.equal(['10.0.0.0/8', 'loopback']);
    expect(loadConfig({}, '/nonexistent').trustedProxies).to.deep.equal([]);
    expect(() => loadConfig({ GATEWAY_TRUSTED_PROXIES: 'not-an-address' }, '/nonexistent')).to.throw(
      /GATEWAY_TRUSTED_PROXIES: .*not-an-address/,
    );
    expect(checkTrustedProxies(['192.168.0.0/16'])).to.equal(undefined);
  });
});
