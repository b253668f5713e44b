import { expect } from 'chai';
import { requestWalk } from '../../bench/request-walk.ts';

/**
 * The walk of one streaming Chat Completions request through the gateway's own files (see
 * `bench/request-walk.ts` and the lists in `docs/design.md`): a request runs through few, whole modules
 * and does not keep coming back to a folder it left.
 */
describe('architecture: the walk of one streaming request', function () {
  this.timeout(60_000);

  it('runs through at most 30 files of src/ and returns at most 10 times to a folder it had left', async () => {
    const walk = await requestWalk(false);
    expect(walk.files, 'the walk saw the request').to.include('src/data-plane/pipeline/relay.ts');
    expect(walk.files.length, walk.files.join('\n')).to.be.at.most(30);
    expect(walk.returns, walk.files.join('\n')).to.be.at.most(10);
  });

  it('runs through at most 40 files with the response cache, a response guardrail and traces on', async () => {
    const walk = await requestWalk(true);
    expect(walk.files, 'the cache and the guardrails ran').to.include.members([
      'src/data-plane/pipeline/cache.ts',
      'src/guardrails/text-engine.ts',
      'src/ops/tracing/otel-tracing.ts',
    ]);
    expect(walk.files.length, walk.files.join('\n')).to.be.at.most(40);
  });
});
