// ErrorResponse / NoticeResponse (src/wire/error-response.ts): exact bytes against hand-written
// fixtures (protocol docs, "Message Formats" and "Error and Notice Message Fields"), the encode -> parse
// round trip, every truncation of a body, and pg-protocol reading our bytes split at every offset.

import { expect } from 'chai';
import { hex, expectBytes, pgParse } from '../helpers/bytes.js';
import fc from 'fast-check';
import { errorResponse, noticeResponse, parseErrorFields, type ErrorFields, type Severity } from '../../src/wire/error-response.js';

// FATAL 08P01 "bad": E, Int32 length, then S FATAL\0 V FATAL\0 C 08P01\0 M bad\0, then a final NUL.
// Length = 4 + 7 + 7 + 7 + 5 + 1 = 31.
const FATAL_BAD = hex(`
  45 0000001f
  53 46415441 4c00
  56 46415441 4c00
  43 30385030 3100
  4d 62616400
  00
`);

describe('wire/error-response: writers', () => {
  it('ErrorResponse: S, V, C, M fields in that order, then the terminator', () => {
    expectBytes(errorResponse({ severity: 'FATAL', code: '08P01', message: 'bad' }), FATAL_BAD);
  });

  it('adds D and H after M when given', () => {
    const msg = errorResponse({ severity: 'ERROR', code: '57014', message: 'm', detail: 'd', hint: 'h' });
    // 4 + S ERROR\0 (7) + V ERROR\0 (7) + C 57014\0 (7) + M m\0 (3) + D d\0 (3) + H h\0 (3) + 1 = 35
    expectBytes(
      msg,
      Buffer.concat([hex('45 00000023'), Buffer.from('SERROR\0VERROR\0C57014\0Mm\0Dd\0Hh\0\0', 'latin1')]),
    );
    const onlyHint = errorResponse({ severity: 'FATAL', code: '53300', message: 'm', hint: 'h' });
    expectBytes(onlyHint, Buffer.concat([hex('45 00000020'), Buffer.from('SFATAL\0VFATAL\0C53300\0Mm\0Hh\0\0', 'latin1')]));
    const undefinedFields = errorResponse({ severity: 'FATAL', code: '53300', message: 'm', detail: undefined, hint: undefined });
    expectBytes(undefinedFields, Buffer.concat([hex('45 0000001d'), Buffer.from('SFATAL\0VFATAL\0C53300\0Mm\0\0', 'latin1')]));
  });

  it('NoticeResponse has the same body under type N', () => {
    const notice = noticeResponse({ severity: 'FATAL', code: '08P01', message: 'bad' });
    expect(notice[0]).to.equal(0x4e);
    expectBytes(notice.subarray(1), FATAL_BAD.subarray(1));
  });

  it('counts bytes of multi-byte text and grows past its first buffer', () => {
    const message = 'ошибка '.repeat(40); // 40 * 13 bytes of UTF-8, more than the 64 + length first guess
    const msg = errorResponse({ severity: 'ERROR', code: 'XX000', message, hint: 'подсказка' });
    expect(msg.readInt32BE(1)).to.equal(msg.length - 1);
    const fields = parseErrorFields(msg.subarray(5));
    expect(fields.get('M')).to.equal(message);
    expect(fields.get('H')).to.equal('подсказка');
  });
});

describe('wire/error-response: parseErrorFields', () => {
  it('reads the fixture', () => {
    expect([...parseErrorFields(FATAL_BAD.subarray(5))]).to.deep.equal([
      ['S', 'FATAL'],
      ['V', 'FATAL'],
      ['C', '08P01'],
      ['M', 'bad'],
    ]);
  });

  it('reads a PostgreSQL ErrorResponse with fields we never write', () => {
    // What PostgreSQL 18 sends for `SELECT 1/0` (shortened): S V C M F L R.
    const body = Buffer.from('SERROR\0VERROR\0C22012\0Mdivision by zero\0Fint.c\0L841\0Rint4div\0\0', 'latin1');
    const fields = parseErrorFields(body);
    expect(fields.get('C')).to.equal('22012');
    expect(fields.get('M')).to.equal('division by zero');
    expect(fields.get('R')).to.equal('int4div');
    expect(fields.size).to.equal(7);
  });

  it('never throws on a truncated body: it keeps the complete fields before the cut', () => {
    const body = errorResponse({ severity: 'ERROR', code: '42P01', message: 'relation "x" does not exist', detail: 'd', hint: 'h' }).subarray(5);
    const full = [...parseErrorFields(body)];
    for (let cut = 0; cut <= body.length; cut++) {
      const got = [...parseErrorFields(body.subarray(0, cut))];
      // Exactly the fields whose NUL lies before the cut.
      let complete = 0;
      let pos = 0;
      while (pos < cut && body[pos] !== 0) {
        const end = body.indexOf(0, pos + 1);
        if (end < 0 || end >= cut) break;
        complete++;
        pos = end + 1;
      }
      expect(got, `cut ${cut}`).to.deep.equal(full.slice(0, complete));
    }
  });

  it('stops at the terminator and ignores what follows', () => {
    const fields = parseErrorFields(Buffer.from('Mone\0\0Mtwo\0\0', 'latin1'));
    expect([...fields]).to.deep.equal([['M', 'one']]);
    expect(parseErrorFields(Buffer.alloc(0)).size).to.equal(0);
  });
});

const severities: Severity[] = ['ERROR', 'FATAL', 'PANIC', 'WARNING', 'NOTICE', 'DEBUG', 'INFO', 'LOG'];
/** Protocol strings cannot hold NUL. */
const text = fc.string({ unit: 'grapheme', maxLength: 60 }).map((s) => s.replaceAll('\0', ''));
const fieldsArb: fc.Arbitrary<ErrorFields> = fc.record({
  severity: fc.constantFrom(...severities),
  code: fc.stringMatching(/^[0-9A-Z]{5}$/),
  message: text,
  detail: fc.option(text, { nil: undefined }),
  hint: fc.option(text, { nil: undefined }),
});

describe('wire/error-response: round trip', () => {
  it('encode -> parse gives the fields back (property, fixed seed)', () => {
    fc.assert(
      fc.property(fieldsArb, fc.boolean(), (f, notice) => {
        const msg = notice ? noticeResponse(f) : errorResponse(f);
        expect(msg[0]).to.equal(notice ? 0x4e : 0x45);
        expect(msg.readInt32BE(1)).to.equal(msg.length - 1);
        expect(msg[msg.length - 1]).to.equal(0);
        const fields = parseErrorFields(msg.subarray(5));
        const expected: Array<[string, string]> = [
          ['S', f.severity],
          ['V', f.severity],
          ['C', f.code],
          ['M', f.message],
        ];
        if (f.detail !== undefined) expected.push(['D', f.detail]);
        if (f.hint !== undefined) expected.push(['H', f.hint]);
        expect([...fields]).to.deep.equal(expected);
      }),
      { seed: 20240611, numRuns: 500 },
    );
  });

  it('pg-protocol (node-postgres) reads our ErrorResponse identically at every split', async () => {
    const msg = Buffer.concat([
      errorResponse({ severity: 'FATAL', code: '08P01', message: 'invalid frontend message type 122', hint: 'h' }),
      noticeResponse({ severity: 'WARNING', code: '01000', message: 'w', detail: 'd' }),
    ]);
    const whole = await pgParse([msg]);
    expect(whole[0]).to.include({ name: 'error', severity: 'FATAL', code: '08P01', message: 'invalid frontend message type 122', hint: 'h' });
    expect(whole[1]).to.include({ name: 'notice', severity: 'WARNING', code: '01000', message: 'w', detail: 'd' });
    for (let cut = 0; cut <= msg.length; cut++) {
      const split = await pgParse([msg.subarray(0, cut), msg.subarray(cut)]);
      expect(split.map((m) => [m.name, m.code, m.message]), `cut ${cut}`).to.deep.equal(whole.map((m) => [m.name, m.code, m.message]));
    }
  });
});
