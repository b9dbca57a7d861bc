// Exact bytes of every backend writer (src/wire/backend.ts), against fixtures written out by hand from
// the "Message Formats" section of the PostgreSQL protocol documentation. Each fixture is also read
// back by an independent parser (pg-protocol, which node-postgres uses), fed split at every offset.

import { expect } from 'chai';
import { hex, expectBytes, pgParse } from '../helpers/bytes.js';
import { Auth, TxStatus } from '../../src/wire/codes.js';
import {
  AUTHENTICATION_OK,
  ENCRYPTION_REFUSED,
  READY_IDLE,
  authenticationSASL,
  authenticationSASLContinue,
  authenticationSASLFinal,
  backendKeyData,
  dataRows,
  negotiateProtocolVersion,
  parameterStatus,
  readyForQuery,
} from '../../src/wire/backend.js';

/** pg-protocol's reading of a fixture is the same whichever offset it is split at. */
async function expectSameAtEverySplit(bytes: Buffer): Promise<Array<Record<string, unknown>>> {
  const whole = await pgParse([bytes]);
  for (let cut = 0; cut <= bytes.length; cut++) {
    const split = await pgParse([bytes.subarray(0, cut), bytes.subarray(cut)]);
    expect(split, `cut ${cut}`).to.deep.equal(whole);
  }
  return whole;
}

describe('wire/backend: writers', () => {
  it('AuthenticationOk: R, length 8, Int32 0', async () => {
    expectBytes(AUTHENTICATION_OK, hex('52 00000008 00000000'));
    const [m] = await expectSameAtEverySplit(AUTHENTICATION_OK);
    expect(m!.name).to.equal('authenticationOk');
  });

  it('ReadyForQuery: Z, length 5, status I / T / E', async () => {
    expectBytes(READY_IDLE, hex('5a 00000005 49'));
    expectBytes(readyForQuery(TxStatus.Idle), hex('5a 00000005 49'));
    expectBytes(readyForQuery(TxStatus.InBlock), hex('5a 00000005 54'));
    expectBytes(readyForQuery(TxStatus.Failed), hex('5a 00000005 45'));
    const msgs = await expectSameAtEverySplit(Buffer.concat([READY_IDLE, readyForQuery(TxStatus.InBlock), readyForQuery(TxStatus.Failed)]));
    expect(msgs.map((m) => m.status)).to.deep.equal(['I', 'T', 'E']);
  });

  it('DataRow: D, length, Int16 column count, each value as Int32 length and bytes (-1: NULL), rows back to back', async () => {
    const rows = dataRows([['1262', null], ['é']]);
    // 4 + 2 + (4 + 4) + 4 = 18; 4 + 2 + (4 + 2) = 12 ("é" is two bytes in UTF-8)
    expectBytes(rows, hex('44 00000012 0002 00000004 31323632 ffffffff  44 0000000c 0001 00000002 c3a9'));
    expectBytes(dataRows([]), hex(''));
    const msgs = await expectSameAtEverySplit(rows);
    expect(msgs.map((m) => m.fields)).to.deep.equal([['1262', null], ['é']]);
  });

  it('the answer to SSLRequest / GSSENCRequest is the single byte N', () => {
    expectBytes(ENCRYPTION_REFUSED, hex('4e'));
  });

  it('AuthenticationSASL: R, length, Int32 10, NUL-terminated mechanisms, a final NUL', async () => {
    const scram = authenticationSASL(['SCRAM-SHA-256']);
    // 4 (length) + 4 (code) + 14 ("SCRAM-SHA-256\0") + 1 (list terminator) = 23
    expectBytes(scram, hex('52 00000017 0000000a 5343 5241 4d2d 5348 412d 3235 3600 00'));
    const two = authenticationSASL(['SCRAM-SHA-256-PLUS', 'SCRAM-SHA-256']);
    expectBytes(
      two,
      Buffer.concat([hex('52 0000002a 0000000a'), Buffer.from('SCRAM-SHA-256-PLUS\0SCRAM-SHA-256\0\0')]),
    );
    expectBytes(authenticationSASL([]), hex('52 00000009 0000000a 00'));
    const [m] = await expectSameAtEverySplit(two);
    expect(m!.name).to.equal('authenticationSASL');
    expect(m!.mechanisms).to.deep.equal(['SCRAM-SHA-256-PLUS', 'SCRAM-SHA-256']);
  });

  it('AuthenticationSASLContinue: R, length, Int32 11, the data unterminated', async () => {
    const data = 'r=abc,s=c2FsdA==,i=4096';
    const msg = authenticationSASLContinue(data);
    expectBytes(msg, Buffer.concat([hex('52 0000001f 0000000b'), Buffer.from(data)]));
    expect(msg.readInt32BE(1)).to.equal(8 + data.length);
    const [m] = await expectSameAtEverySplit(msg);
    expect(m!.name).to.equal('authenticationSASLContinue');
    expect(m!.data).to.equal(data);
  });

  it('AuthenticationSASLFinal: R, length, Int32 12, the data unterminated', async () => {
    const data = 'v=' + 'A'.repeat(44);
    const msg = authenticationSASLFinal(data);
    expectBytes(msg, Buffer.concat([hex('52 00000036 0000000c'), Buffer.from(data)]));
    const [m] = await expectSameAtEverySplit(msg);
    expect(m!.name).to.equal('authenticationSASLFinal');
    expect(m!.data).to.equal(data);
  });

  it('AuthenticationSASLContinue grows past its first buffer (long and multi-byte data)', () => {
    const data = 'é'.repeat(600); // 1200 bytes of UTF-8
    const msg = authenticationSASLContinue(data);
    expect(msg.length).to.equal(1 + 4 + 4 + 1200);
    expect(msg.readInt32BE(1)).to.equal(4 + 4 + 1200);
    expect(msg.readInt32BE(5)).to.equal(Auth.SASLContinue);
    expect(msg.toString('utf8', 9)).to.equal(data);
  });

  it('ParameterStatus: S, length, name NUL, value NUL', async () => {
    const msg = parameterStatus('client_encoding', 'UTF8');
    expectBytes(msg, hex('53 00000019 636c69656e745f656e636f64696e6700 5554463800'));
    expectBytes(parameterStatus('', ''), hex('53 00000006 00 00'));
    const [m] = await expectSameAtEverySplit(msg);
    expect(m).to.include({ name: 'parameterStatus', parameterName: 'client_encoding', parameterValue: 'UTF8' });
  });

  it('ParameterStatus with multi-byte text counts bytes, not characters', async () => {
    const msg = parameterStatus('application_name', 'приложение-'.repeat(10));
    const value = Buffer.from('приложение-'.repeat(10));
    expectBytes(msg, Buffer.concat([Buffer.from([0x53]), int32(4 + 17 + value.length + 1), Buffer.from('application_name\0'), value, hex('00')]));
    const [m] = await pgParse([msg]);
    expect(m!.parameterValue).to.equal('приложение-'.repeat(10));
  });

  it('BackendKeyData: K, length 12, Int32 pid, Int32 secret (signed or not)', async () => {
    expectBytes(backendKeyData(0x1234, 0x7fabcdef), hex('4b 0000000c 00001234 7fabcdef'));
    expectBytes(backendKeyData(1, -1), hex('4b 0000000c 00000001 ffffffff'));
    expectBytes(backendKeyData(0x7fffffff, -0x80000000), hex('4b 0000000c 7fffffff 80000000'));
    const [m] = await expectSameAtEverySplit(backendKeyData(0x1234, 0x7fabcdef));
    expect(m).to.include({ name: 'backendKeyData', processID: 0x1234, secretKey: 0x7fabcdef });
  });

  it('NegotiateProtocolVersion: v, length, Int32 newest version (3 << 16 | minor, as PostgreSQL sends it), Int32 count, option names', () => {
    expectBytes(negotiateProtocolVersion(0, []), hex('76 0000000c 00030000 00000000'));
    expectBytes(
      negotiateProtocolVersion(0, ['_pq_.a', '_pq_.bc']),
      Buffer.concat([hex('76 0000001b 00030000 00000002'), Buffer.from('_pq_.a\0_pq_.bc\0')]),
    );
    expectBytes(negotiateProtocolVersion(2, ['_pq_.x']), Buffer.concat([hex('76 00000013 00030002 00000001'), Buffer.from('_pq_.x\0')]));
  });

  it('BackendKeyData with a long (protocol 3.2) secret: the length follows from the message', () => {
    const secret = Buffer.alloc(32, 0xab);
    expectBytes(backendKeyData(0x1234, secret), Buffer.concat([hex('4b 00000028 00001234'), secret]));
  });

  it('a login greeting made of these writers reads back in order at every split', async () => {
    const greeting = Buffer.concat([
      AUTHENTICATION_OK,
      parameterStatus('server_version', '18.0'),
      parameterStatus('TimeZone', 'UTC'),
      backendKeyData(4242, -559038737),
      READY_IDLE,
    ]);
    const msgs = await expectSameAtEverySplit(greeting);
    expect(msgs.map((m) => m.name)).to.deep.equal([
      'authenticationOk',
      'parameterStatus',
      'parameterStatus',
      'backendKeyData',
      'readyForQuery',
    ]);
    expect(msgs[3]).to.include({ processID: 4242, secretKey: -559038737 });
  });

  it('constant messages are not disturbed by building others', () => {
    const before = Buffer.from(AUTHENTICATION_OK);
    for (let i = 0; i < 10; i++) authenticationSASLContinue('x'.repeat(i * 100));
    expectBytes(AUTHENTICATION_OK, before);
    expectBytes(READY_IDLE, hex('5a 00000005 49'));
  });
});

function int32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeInt32BE(n);
  return b;
}
