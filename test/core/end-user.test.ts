import { expect } from 'chai';
import { endUserOf as endUserAt } from '../../src/core/incoming-request.ts';
import { ROUTE_TABLE } from '../../src/core/route-table.ts';
import type { RouteId } from '../../src/plugins/plugin-contract.ts';

/** The end user a request to a route names. */
const endUserOf = (route: RouteId, body: Record<string, unknown>, headers: Record<string, string>) =>
  endUserAt(ROUTE_TABLE[route].endUserField, body, headers);
import { isGatewayError } from '../../src/core/gateway-errors.ts';

function refusal(run: () => unknown): { status: number; errors?: readonly string[]; param?: string } {
  try {
    run();
  } catch (error) {
    if (!isGatewayError(error)) throw error;
    return { status: error.status, errors: error.errors, param: error.param };
  }
  throw new Error('not refused');
}

describe('end user of a request', () => {
  const header = { 'x-gateway-end-user': 'from-header' };

  it("reads OpenAI's user, Messages' metadata.user_id, else the x-gateway-end-user header", () => {
    expect(endUserOf('chat-completions', { user: 'alice' }, header)).to.equal('alice');
    expect(endUserOf('responses', { user: 'bob' }, {})).to.equal('bob');
    expect(endUserOf('messages', { metadata: { user_id: 'carol' } }, header)).to.equal('carol');
    expect(endUserOf('count-tokens', { metadata: { user_id: 'dave' } }, {})).to.equal('dave');
    expect(endUserOf('chat-completions', {}, header)).to.equal('from-header');
    expect(endUserOf('messages', { metadata: {} }, header)).to.equal('from-header');
    expect(endUserOf('messages', { user: 'not-a-messages-field' }, header), 'user is not the Messages field').to.equal(
      'from-header',
    );
    // The native route refuses unknown body fields: its end user is the header's.
    expect(endUserOf('chat', { user: 'ignored' }, header)).to.equal('from-header');
    expect(endUserOf('chat-completions', { user: null }, header), 'null counts as absent').to.equal('from-header');
    expect(endUserOf('chat-completions', {}, {})).to.equal(undefined);
    expect(endUserOf('chat-completions', { user: 'x'.repeat(256) }, {})).to.have.length(256);
  });

  it('answers 400 naming the first present field when it is not a non-empty string of at most 256 characters', () => {
    expect(refusal(() => endUserOf('chat-completions', { user: 42 }, header))).to.deep.equal({
      status: 400,
      errors: ["Field 'user': must be a string naming the end user (given once)"],
      param: 'user',
    });
    expect(refusal(() => endUserOf('responses', { user: '  ' }, header)).errors).to.deep.equal([
      "Field 'user': must not be empty",
    ]);
    expect(refusal(() => endUserOf('messages', { metadata: { user_id: 'x'.repeat(257) } }, {})).errors).to.deep.equal([
      "Field 'metadata.user_id': must be at most 256 characters",
    ]);
    expect(refusal(() => endUserOf('chat-completions', {}, { 'x-gateway-end-user': '' }))).to.deep.include({
      param: 'header x-gateway-end-user',
      errors: ["Field 'header x-gateway-end-user': must not be empty"],
    });
  });
});
