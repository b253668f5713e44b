import { expect } from 'chai';
import { request } from 'undici';
import { withinOneWindow } from '../helpers/limit-window.ts';
import { sleep } from '../helpers/eventually.ts';
import { startTestGateway, type TestGateway } from '../helpers/test-gateway.ts';

const ADMIN = 'admin-token-for-key-update-tests-0001';
const admin = { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' };
// A key's change reaches admission within the authenticator's trust time (200 ms) and the key store's
// own cache (file: 250 ms recheck; Redis: 500 ms): within a second, on every instance.
const KEY_CHANGE_REACHES_ADMISSION_MS = 1000;

describe('a key changed with PATCH /admin/keys/{id}, end to end', function () {
  this.timeout(90_000);
  let test: TestGateway;

  before(async () => {
    test = await startTestGateway({ env: { GATEWAY_ADMIN_TOKEN: ADMIN, RATE_LIMIT_MAX: '100' } });
  });
  after(async () => test.close());

  const chat = async (key: string) => {
    const response = await request(`${test.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'zeta/zeta-k3', messages: [{ role: 'user', content: 'hi' }] }),
    });
    await response.body.text();
    return response.statusCode;
  };
  const patch = async (id: string, body: unknown) => {
    const response = await request(`${test.url}/admin/keys/${id}`, {
      method: 'PATCH',
      headers: admin,
      body: JSON.stringify(body),
    });
    return { status: response.statusCode, body: (await response.body.json()) as Record<string, unknown> };
  };

  it('enforces a lowered rpm once the trust time has passed, and a removed one no more', async () => {
    const created = await request(`${test.url}/admin/keys`, {
      method: 'POST',
      headers: admin,
      body: JSON.stringify({ name: 'lowered', rpm: 10 }),
    });
    const { id, key } = (await created.body.json()) as { id: string; key: string };
    await withinOneWindow(20_000);
    for (let sent = 0; sent < 3; sent += 1) expect(await chat(key), `request ${sent + 1} under rpm 10`).to.equal(200);

    expect(await patch(id, { rpm: 3 })).to.deep.include({ status: 200 });
    await sleep(KEY_CHANGE_REACHES_ADMISSION_MS);
    // Three requests of this window are counted already: the fourth is over the new rpm.
    expect(await chat(key), 'over the lowered rpm').to.equal(429);

    // Removed: the gateway's own limit (100) applies again.
    expect((await patch(id, { rpm: null })).body).to.include({ rpm: null });
    await sleep(KEY_CHANGE_REACHES_ADMISSION_MS);
    expect(await chat(key), 'the rpm removed').to.equal(200);
  });
});
