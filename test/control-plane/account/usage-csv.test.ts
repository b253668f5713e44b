import { expect } from 'chai';
import { usageCsv, usageCsvName } from '../../../src/control-plane/account/usage-csv.ts';

const counts = {
  requests: 2,
  input_tokens: 10,
  output_tokens: 5,
  cached_tokens: 1,
  total_tokens: 15,
  charged_tokens: 14,
  cost_usd: 0.0000125,
  cache_hits: 1,
  saved_usd: 0.000004,
};

describe('usage CSV', () => {
  it('writes a header and one CRLF line per row, costs without trailing zeros', () => {
    expect(usageCsv([{ day: '2026-11-20', ...counts }], 'day')).to.equal(
      'day,requests,input_tokens,output_tokens,cached_tokens,total_tokens,charged_tokens,cost_usd,cache_hits,saved_usd\r\n2026-11-20,2,10,5,1,15,14,0.000013,1,0.000004\r\n',
    );
    expect(usageCsv([], 'model')).to.equal(
      'model,requests,input_tokens,output_tokens,cached_tokens,total_tokens,charged_tokens,cost_usd,cache_hits,saved_usd\r\n',
    );
  });

  it('starts with key_id or team per key or team, the keys in no team under an empty team', () => {
    expect(
      usageCsv([{ key_id: 'key_ab12', ...counts }], 'key')
        .split('\r\n')
        .map((line) => line.split(',')[0]),
    ).to.deep.equal(['key_id', 'key_ab12', '']);
    expect(
      usageCsv(
        [
          { team: 'red', ...counts },
          { team: null, ...counts },
        ],
        'team',
      )
        .split('\r\n')
        .map((line) => line.split(',').slice(0, 2).join(',')),
    ).to.deep.equal(['team,requests', 'red,2', ',2', '']);
    expect(usageCsvName({ groupBy: 'team' })).to.equal('usage-by-team-start-to-now.csv');
  });

  it('quotes commas, quotes and line breaks, and defuses spreadsheet formulas', () => {
    const lines = usageCsv(
      [
        { model: 'a,"b"', ...counts },
        { model: '=HYPERLINK("x")', ...counts },
        { model: 'line\nbreak', ...counts },
      ],
      'model',
    ).split('\r\n');
    expect(lines[1]!.startsWith('"a,""b""",2,')).to.equal(true);
    expect(lines[2]!.startsWith(`"'=HYPERLINK(""x"")",2,`)).to.equal(true);
    expect(lines[3]!.startsWith('"line\nbreak",2,')).to.equal(true);
  });

  it('names the file after the grouping, the key and the days', () => {
    expect(
      usageCsvName({
        groupBy: 'day',
        keyId: 'key_ab12',
        from: new Date('2026-11-01T05:00:00Z'),
        to: new Date('2026-11-23T00:00:00Z'),
      }),
    ).to.equal('usage-by-day-key_ab12-2026-11-01-to-2026-11-23.csv');
    expect(usageCsvName({ groupBy: 'model', keyId: 'key"/../x' })).to.equal('usage-by-model-keyx-start-to-now.csv');
  });
});
