import { expect } from 'chai';
import { SharedDeadline } from '../../../src/stores/redis/shared-deadline.ts';

const never = <T>() => new Promise<T>(() => {});
const later = <T>(ms: number, value: T) => new Promise<T>((resolve) => setTimeout(() => resolve(value), ms));
const outcome = (promise: Promise<unknown>) =>
  promise.then(
    (value) => ({ value }),
    (error: Error) => ({ error: error.message }),
  );

describe('SharedDeadline', () => {
  it('settles as the command does when it answers in time, with its value or its error', async () => {
    const deadline = new SharedDeadline(200);
    expect(await deadline.race(Promise.resolve(7))).to.equal(7);
    const failed = await outcome(deadline.race(Promise.reject(new Error('NOSCRIPT'))));
    expect(failed).to.deep.equal({ error: 'NOSCRIPT' });
  });

  it('rejects each command that has not answered by its own deadline, and no other', async () => {
    const deadline = new SharedDeadline(40);
    const stalled = outcome(deadline.race(never()));
    const quick = outcome(deadline.race(later(5, 'quick')));
    // Sent after the first one's deadline has passed: it gets a deadline of its own, not the first's.
    await new Promise((resolve) => setTimeout(resolve, 60));
    const afterwards = outcome(deadline.race(later(10, 'afterwards')));
    const stalledLater = outcome(deadline.race(never()));
    expect(await stalled).to.deep.equal({ error: 'Redis did not answer within 40 ms' });
    expect(await quick).to.deep.equal({ value: 'quick' });
    expect(await afterwards).to.deep.equal({ value: 'afterwards' });
    expect(await stalledLater).to.deep.equal({ error: 'Redis did not answer within 40 ms' });
  });

  it('keeps serving after thousands of settled commands (its queue is compacted)', async () => {
    const deadline = new SharedDeadline(20);
    for (let round = 0; round < 3; round++) {
      const values = await Promise.all(
        Array.from({ length: 1500 }, (_, index) => deadline.race(Promise.resolve(index))),
      );
      expect(values[1499]).to.equal(1499);
      await new Promise((resolve) => setTimeout(resolve, 30));
    }
    expect(await outcome(deadline.race(never()))).to.deep.equal({ error: 'Redis did not answer within 20 ms' });
  });

  it('does not keep the process alive by itself', async () => {
    const deadline = new SharedDeadline(60_000);
    const timer = (deadline as unknown as { timer?: NodeJS.Timeout }).timer;
    expect(timer).to.equal(undefined);
    void deadline.race(Promise.resolve(1));
    const armed = (deadline as unknown as { timer?: NodeJS.Timeout }).timer!;
    expect(armed.hasRef()).to.equal(false);
  });
});
