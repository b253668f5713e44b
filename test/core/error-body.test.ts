import { expect } from 'chai';
import { errorBody } from '../../src/core/error-body.ts';
import { fieldError, quotaExceeded, upstreamFailure, validationError } from '../../src/core/gateway-errors.ts';

describe('errorBody', () => {
  it('gives a ValidationError every field and the Chat Completions envelope beside it', () => {
    const error = validationError(
      [fieldError('body.model', 'is required'), fieldError('body.messages', 'is required')],
      'model',
    );
    const body = errorBody(error, 'completions-envelope');
    expect(body.detail).to.equal('Invalid input parameters');
    expect(body.errors).to.deep.equal(["Field 'body.model': is required", "Field 'body.messages': is required"]);
    expect(body.error).to.deep.include({ type: 'invalid_request_error', param: 'model', code: 'GW_ERR_VALIDATION' });
    expect((body.error as { message: string }).message).to.contain("Field 'body.model': is required");
  });

  it('uses the Messages envelope on messages routes', () => {
    const body = errorBody(upstreamFailure('acme', 'connection refused'), 'messages-envelope');
    expect(body).to.deep.equal({
      detail: "Upstream provider 'acme' failed: connection refused",
      type: 'error',
      error: { type: 'api_error', message: "Upstream provider 'acme' failed: connection refused" },
    });
  });

  it('answers plain routes with detail only', () => {
    expect(errorBody(quotaExceeded('1000 tokens per day'), 'plain')).to.deep.equal({
      detail: 'Quota exceeded: 1000 tokens per day',
    });
  });
});
