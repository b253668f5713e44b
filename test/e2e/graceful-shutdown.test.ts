import { expect } from 'chai';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { startMockUpstream } from '../../mock-upstream/mock-upstream-server.ts';
import { GatewayProcess } from '../helpers/gateway-process.ts';

describe('graceful shutdown', function () {
  this.timeout(30_000);

  it('finishes a stream in flight on SIGTERM, stores its usage, and exits 0', async () => {
    const upstream = await startMockUpstream({ chunkDelayMs: 100 });
    const dataDir = await mkdtemp(join(tmpdir(), 'gateway-shutdown-'));
    const env = { ZETA_BASE_URL: upstream.url, GATEWAY_API_KEYS: 'sk-shutdown-test-0001', GATEWAY_DATA_DIR: dataDir };
    const gateway = await GatewayProcess.start(env);
    try {
      const response = await request(`${gateway.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: 'Bearer sk-shutdown-test-0001' },
        body: JSON.stringify({ model: 'zeta/zeta-k3', stream: true, messages: [{ role: 'user', content: 'a stream long enough to outlive the signal' }] }),
      });
      const exited = gateway.stop();
      const text = await response.body.text();
      expect(text.trimEnd().endsWith('data: [DONE]')).to.equal(true);
      expect(await exited).to.equal(0);
      const restarted = await GatewayProcess.start(env);
      try {
        const usage = await request(`${restarted.url}/v1/usage`, { headers: { authorization: 'Bearer sk-shutdown-test-0001' } });
        const rows = ((await usage.body.json()) as { data: { model: string; output_tokens: number }[] }).data;
        expect(rows.map((row) => row.model)).to.deep.equal(['zeta/zeta-k3']);
        expect(rows[0]!.output_tokens).to.equal(upstream.requests[0]!.reportedUsage!.outputTokens);
      } finally {
        await restarted.stop();
      }
    } finally {
      await gateway.stop();
      await upstream.close();
    }
  });
});
