import { expect } from 'chai';
import fc from 'fast-check';
import { Writable } from 'node:stream';
import { pino, type LoggerOptions } from 'pino';
import { logField, writeInfoLine } from '../../src/ops/request-observer.ts';

/** A pino logger whose lines are kept, with a fixed time so that two loggers' lines can be compared. */
function capturing(options: LoggerOptions = {}) {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  const logger = pino({ base: { service: 'model-gateway', pid: 7 }, timestamp: () => ',"time":5', ...options }, sink);
  return { logger, lines };
}

const value = fc.oneof(
  fc.constant(undefined),
  fc.string(),
  fc.string({ unit: 'binary' }),
  fc.integer(),
  fc.double(),
  fc.boolean(),
);
const fields = fc.uniqueArray(fc.tuple(fc.stringMatching(/^[a-z_]{1,12}$/), value), {
  selector: ([name]) => name,
  maxLength: 17,
});

describe('log lines written from serialized fields', () => {
  it("are the lines pino writes for the same fields, a child's bindings included", async () => {
    await fc.assert(
      fc.asyncProperty(fields, fc.boolean(), async (pairs, child) => {
        const own = capturing();
        const written = capturing();
        const ownLogger = child ? own.logger.child({ worker: 2 }) : own.logger;
        const writtenLogger = child ? written.logger.child({ worker: 2 }) : written.logger;
        ownLogger.info(Object.fromEntries(pairs), 'request');
        writeInfoLine(writtenLogger, pairs.map(([name, of]) => logField(name, of)).join(''), 'request');
        await new Promise(setImmediate);
        expect(written.lines).to.have.length(1);
        expect(JSON.parse(written.lines[0]!)).to.deep.equal(JSON.parse(own.lines[0]!));
        // Byte for byte where pino's string escaping and JSON's agree (every value of an access line).
        if (pairs.every(([, of]) => typeof of !== 'string' || /^[\x20-\x7e]*$/.test(of)))
          expect(written.lines[0]).to.equal(own.lines[0]);
      }),
      { numRuns: 300 },
    );
  });

  it('follow the level: nothing below it', async () => {
    const { logger, lines } = capturing({ level: 'warn' });
    writeInfoLine(logger, logField('status', 200), 'request');
    await new Promise(setImmediate);
    expect(lines).to.deep.equal([]);
  });

  it('go through pino when the logger is configured beyond the frame (a mixin, a message prefix, a log formatter)', async () => {
    for (const options of [
      { mixin: () => ({ mixed: true }) },
      { msgPrefix: '[gw] ' },
      { formatters: { log: (object: Record<string, unknown>) => ({ ...object, formatted: true }) } },
    ] satisfies LoggerOptions[]) {
      const own = capturing(options);
      const written = capturing(options);
      own.logger.info({ status: 200, route: 'chat' }, 'request');
      writeInfoLine(written.logger, logField('status', 200) + logField('route', 'chat'), 'request');
      await new Promise(setImmediate);
      expect(written.lines).to.deep.equal(own.lines);
    }
  });
});
