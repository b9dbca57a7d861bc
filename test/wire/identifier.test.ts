// clipIdentifier (src/wire/identifier.ts) against what PostgreSQL's pg_mbcliplen does to a UTF8 name:
// cut at 63 bytes, never inside a character. Fixtures at the limit with 1-, 2-, 3- and 4-byte
// characters straddling it.

import { expect } from 'chai';
import { clipIdentifier, MAX_IDENTIFIER_BYTES } from '../../src/wire/identifier.js';

const bytes = (s: string): number => Buffer.byteLength(s, 'utf8');

describe('clipIdentifier: names as PostgreSQL truncates them', () => {
  it('leaves a name of 63 bytes or fewer as it is', () => {
    for (const name of ['', 'postgres', 'a'.repeat(63), 'é'.repeat(31) + 'a', '😀'.repeat(15) + 'abc']) {
      expect(bytes(name)).to.be.at.most(63);
      expect(clipIdentifier(name)).to.equal(name);
    }
  });

  it('cuts ASCII at 63 bytes', () => {
    expect(clipIdentifier('a'.repeat(63) + 'X')).to.equal('a'.repeat(63));
    expect(clipIdentifier('b'.repeat(200))).to.equal('b'.repeat(63));
  });

  it('never splits a multibyte character at the cut', () => {
    // 62 ASCII bytes, then a 2-byte character across bytes 63-64: it goes whole.
    expect(clipIdentifier('a'.repeat(62) + 'é')).to.equal('a'.repeat(62));
    // 61 + a 3-byte character across 62-64.
    expect(clipIdentifier('a'.repeat(61) + '€x')).to.equal('a'.repeat(61));
    // 60 + a 4-byte character across 61-64; 59 + it fits exactly (63 bytes) and stays.
    expect(clipIdentifier('a'.repeat(60) + '😀')).to.equal('a'.repeat(60));
    expect(clipIdentifier('a'.repeat(59) + '😀x')).to.equal('a'.repeat(59) + '😀');
    // A character ending exactly at byte 63 stays.
    expect(clipIdentifier('a'.repeat(61) + 'é' + 'zz')).to.equal('a'.repeat(61) + 'é');
  });

  it('gives at most 63 bytes of valid UTF-8 for every length and mix', () => {
    const chars = ['a', 'é', '€', '😀'];
    for (let n = 0; n < 80; n++) {
      for (const c of chars) {
        for (const d of chars) {
          const name = c.repeat(n) + d.repeat(3);
          const clipped = clipIdentifier(name);
          expect(bytes(clipped)).to.be.at.most(MAX_IDENTIFIER_BYTES);
          expect(name.startsWith(clipped)).to.equal(true);
          // Maximal: the next character of the name would not have fitted.
          if (clipped !== name) expect(bytes(name.slice(0, [...clipped].join('').length + (name.codePointAt(clipped.length)! > 0xffff ? 2 : 1)))).to.be.above(63);
        }
      }
    }
  });
});
