// The one duration grammar (src/durations.ts) every surface reads: a Branch's ttl, `pgx db create --ttl`,
// the MCP tools' ttl. Sums of whole parts with a unit; bare whole numbers are seconds where a surface takes them.

import { expect } from 'chai';
import { parseDuration, parseSeconds } from '../../src/durations.js';

describe('durations: one grammar', () => {
  it('reads parts and sums of parts', () => {
    expect(parseDuration('30s')).to.equal(30_000);
    expect(parseDuration('1h30m')).to.equal(5_400_000);
    expect(parseDuration('7d')).to.equal(604_800_000);
    expect(parseDuration('0s')).to.equal(0);
    expect(parseSeconds('1h30m')).to.equal(5400);
    expect(parseSeconds('3600')).to.equal(3600);
    expect(parseSeconds(' 90m ')).to.equal(5400);
  });

  it('refuses what is not one', () => {
    for (const text of ['', 'soon', '1.5h', '1h 30m', '-1h', '1w', 'h', '3600s1']) {
      expect(parseSeconds(text), text).to.equal(null);
    }
    expect(parseDuration('3600'), 'a bare number is not a duration string (a Branch says its unit)').to.equal(null);
  });
});
