import { createHash, createHmac, pbkdf2Sync, randomBytes } from 'node:crypto';
import { expect } from 'chai';
import fc from 'fast-check';
import { X509Certificate } from 'node:crypto';
import { makeTestTls } from '../helpers/kube-api/tls.js';
import {
  formatVerifier,
  makeVerifier,
  mockVerifier,
  parseClientFirst,
  parseVerifier,
  saslprep,
  ScramError,
  serverFirst,
  startExchange,
  tlsServerEndPoint,
  verifyClientFinal,
  type ScramExchangeState,
  type ScramFailure,
  type ScramVerifier,
} from '../../src/wire/scram.js';

// ---------------------------------------------------------------------------------------------------
// A minimal SCRAM-SHA-256 client (no SASLprep: callers pass the prepared password).

interface TestClient {
  first: Buffer;
  final(serverFirstMessage: string): { message: Buffer; expectedServerFinal: string };
}

function scramClient(
  password: string,
  opts: { nonce?: string; gs2?: string; cbind?: string; user?: string } = {},
): TestClient {
  const nonce = opts.nonce ?? randomBytes(18).toString('base64');
  const gs2 = opts.gs2 ?? 'n,,';
  const bare = `n=${opts.user ?? ''},r=${nonce}`;
  return {
    first: Buffer.from(gs2 + bare),
    final(sf) {
      const attrs = new Map(sf.split(',').map((kv) => [kv[0], kv.slice(2)] as const));
      const combined = attrs.get('r')!;
      const salt = Buffer.from(attrs.get('s')!, 'base64');
      const iterations = Number(attrs.get('i'));
      const salted = pbkdf2Sync(password, salt, iterations, 32, 'sha256');
      const clientKey = createHmac('sha256', salted).update('Client Key').digest();
      const storedKey = createHash('sha256').update(clientKey).digest();
      const serverKey = createHmac('sha256', salted).update('Server Key').digest();
      const withoutProof = `c=${opts.cbind ?? Buffer.from(gs2).toString('base64')},r=${combined}`;
      const authMessage = `${bare},${sf},${withoutProof}`;
      const sig = createHmac('sha256', storedKey).update(authMessage).digest();
      const proof = Buffer.from(clientKey.map((b, i) => b ^ sig[i]!));
      return {
        message: Buffer.from(`${withoutProof},p=${proof.toString('base64')}`),
        expectedServerFinal: `v=${createHmac('sha256', serverKey).update(authMessage).digest('base64')}`,
      };
    },
  };
}

function start(client: TestClient, v: ScramVerifier): { sf: string; state: ScramExchangeState } {
  const r = startExchange(client.first, v);
  if (!r.ok) throw new Error(`startExchange failed: ${r.error.message}`);
  return { sf: r.serverFirst, state: r.state };
}

/** Run the whole exchange; returns the server's verdict. */
function exchange(password: string, v: ScramVerifier) {
  const c = scramClient(password);
  const { sf, state } = start(c, v);
  const f = c.final(sf);
  return { result: verifyClientFinal(f.message, state), expected: f.expectedServerFinal };
}

function expectFailure(r: { ok: boolean }, kind?: string, match?: RegExp): ScramError {
  expect(r.ok).to.equal(false);
  const err = (r as ScramFailure).error;
  expect(err).to.be.instanceOf(ScramError);
  if (kind !== undefined) expect(err.kind).to.equal(kind);
  if (match !== undefined) expect(err.message).to.match(match);
  return err;
}

// ---------------------------------------------------------------------------------------------------

const RFC = {
  clientFirst: 'n,,n=user,r=rOprNGfwEbeRWgbNEkqO',
  serverNonce: '%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0',
  serverFirst: 'r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096',
  clientFinal:
    'c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=',
  serverFinal: 'v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=',
};
const rfcVerifier = () =>
  parseVerifier(makeVerifier('pencil', { salt: Buffer.from('W22ZaJ0SNY7soEsUEjb6gQ==', 'base64'), iterations: 4096 }))!;

// Produced by PostgreSQL 15.18 (CREATE ROLE ... PASSWORD '...'; SELECT rolpassword FROM pg_authid).
const PG_VERIFIERS = [
  {
    password: 'pencil',
    prepared: 'pencil',
    text: 'SCRAM-SHA-256$4096:fXIziqBC72IWKgwMwPJwlg==$O4HwkPD2clQR9LI1N9iKMVlxwUP7vuNUnFKWE7GvIY4=:Pb6fYWJY/YpM3Gfa0XmJWYoB0QHQ+UCjw+6Zc71mRuQ=',
  },
  {
    password: 'p\u00e4ssw\u00f6rd',
    prepared: 'p\u00e4ssw\u00f6rd',
    text: 'SCRAM-SHA-256$4096:zcEKk/i9yu6+5oajRTJhiw==$f4B9oRa19V0naVibUXV5LIgSUZawfjHxT0zEUValprg=:leEMb2HJNDYAQiiOz2s35f+2dtAWMWY26x8HrzYzvlA=',
  },
  {
    // ROMAN NUMERAL NINE (NFKC -> "IX"), NO-BREAK SPACE (-> " "), SOFT HYPHEN (-> nothing)
    password: 'I\u2168\u00a0x\u00ad',
    prepared: 'IIX x',
    text: 'SCRAM-SHA-256$4096:qF0EVcp16BWBE6u9edbw9A==$6bebnOvybG1w1N01c4NKC9NwmoCHlIHrbs3AYoJ+vwQ=:Ncx4VkVWdD3cHPsU+61/zQw/OiZKwrwZm7wGJYGGldM=',
  },
  {
    // ZERO WIDTH SPACE is a non-ASCII space (-> " "), LATIN SMALL LIGATURE FI (NFKC -> "fi")
    password: 'a\u200bb\ufb01',
    prepared: 'a bfi',
    text: 'SCRAM-SHA-256$4096:9uduf2M6ZomSALgvz6f6cg==$ljDQF1VgJIpilODHluKwl6WMniK/1INkPw7zGVKkeMI=:FWmpkkTADI2/5TqJYi97CqzErt7hIqvG49w4WIKIcQg=',
  },
  {
    // contains a control character: SASLprep prohibits it, so PostgreSQL hashes the raw password
    password: '\u00e9\u0007',
    prepared: '\u00e9\u0007',
    text: 'SCRAM-SHA-256$4096:pJnaamCzadzUrOXWWqZfaw==$X4Q8BAmGyHv2Efk026/Wm15wIrfthQKrWc9XzMzm1+M=:rwuCzLKA4yRBNHiRPOBX9PxzbFNzf6eW1A6gQspdhBw=',
  },
];

describe('wire/scram', () => {
  describe('RFC 7677 test vector', () => {
    it('produces the RFC server-first and server-final messages and accepts the RFC proof', () => {
      const v = rfcVerifier();
      const first = parseClientFirst(Buffer.from(RFC.clientFirst));
      if (!first.ok) throw first.error;
      expect(first.clientNonce).to.equal('rOprNGfwEbeRWgbNEkqO');
      expect(first.clientFirstBare).to.equal('n=user,r=rOprNGfwEbeRWgbNEkqO');
      expect(first.username).to.equal('user');
      expect(first.cbindFlag).to.equal('n');
      expect(serverFirst(first.clientNonce, v, RFC.serverNonce)).to.equal(RFC.serverFirst);

      const started = startExchange(Buffer.from(RFC.clientFirst), v, RFC.serverNonce);
      if (!started.ok) throw started.error;
      expect(started.serverFirst).to.equal(RFC.serverFirst);
      const fin = verifyClientFinal(Buffer.from(RFC.clientFinal), started.state);
      if (!fin.ok) throw fin.error;
      expect(fin.serverFinal).to.equal(RFC.serverFinal);
    });

    it('the test client reproduces the RFC proof', () => {
      const c = scramClient('pencil', { nonce: 'rOprNGfwEbeRWgbNEkqO', user: 'user' });
      const f = c.final(RFC.serverFirst);
      expect(f.message.toString()).to.equal(RFC.clientFinal);
      expect(f.expectedServerFinal).to.equal(RFC.serverFinal);
    });
  });

  describe('verifiers', () => {
    it('makeVerifier writes PostgreSQL’s format with 4096 iterations and a 16-byte random salt by default', () => {
      const text = makeVerifier('secret');
      expect(text).to.match(/^SCRAM-SHA-256\$4096:[A-Za-z0-9+/]{22}==\$[A-Za-z0-9+/]{43}=:[A-Za-z0-9+/]{43}=$/);
      const v = parseVerifier(text)!;
      expect(v.iterations).to.equal(4096);
      expect(v.salt.length).to.equal(16);
      expect(v.storedKey.length).to.equal(32);
      expect(v.serverKey.length).to.equal(32);
      expect(formatVerifier(v)).to.equal(text);
      expect(makeVerifier('secret')).to.not.equal(text); // fresh salt each time
    });

    it('round-trips with explicit options', () => {
      const salt = Buffer.from('0123456789abcdef0123');
      const text = makeVerifier('pw', { iterations: 10, salt });
      const v = parseVerifier(text)!;
      expect(v.iterations).to.equal(10);
      expect(v.salt.equals(salt)).to.equal(true);
      expect(makeVerifier('pw', { iterations: 10, salt })).to.equal(text);
    });

    it('reproduces verifiers written by PostgreSQL 15, including SASLprep cases', () => {
      for (const pg of PG_VERIFIERS) {
        const v = parseVerifier(pg.text)!;
        expect(v, pg.text).to.not.equal(null);
        expect(formatVerifier(v)).to.equal(pg.text);
        expect(makeVerifier(pg.password, { iterations: v.iterations, salt: v.salt })).to.equal(pg.text);
        expect(saslprep(pg.password).toString('utf8')).to.equal(pg.prepared);
      }
    });

    it('a password authenticates against PostgreSQL-written verifiers through the full exchange', () => {
      for (const pg of PG_VERIFIERS) {
        const { result, expected } = exchange(pg.prepared, parseVerifier(pg.text)!);
        if (!result.ok) throw result.error;
        expect(result.serverFinal).to.equal(expected);
      }
    });

    it('saslprep leaves ASCII alone and falls back to the raw password when output is prohibited', () => {
      expect(saslprep('a b\tc').toString()).to.equal('a b\tc');
      expect(saslprep('\u00ad').toString()).to.equal('\u00ad'); // maps to empty -> raw
      expect(saslprep('\u00e9\u0007').toString()).to.equal('\u00e9\u0007'); // control char -> raw
      expect(saslprep('e\u0301').toString()).to.equal('\u00e9'); // NFKC composes
    });

    it('parseVerifier rejects malformed text', () => {
      const good = PG_VERIFIERS[0]!.text;
      const [, rest] = good.split('$4096:');
      const bad = [
        '',
        'md5abcdef0123456789abcdef0123456789',
        good.replace('SCRAM-SHA-256', 'SCRAM-SHA-1'),
        good.replace('$4096:', '$:'),
        good.replace('$4096:', '$0:'),
        good.replace('$4096:', '$-1:'),
        good.replace('$4096:', '$ 4096:'),
        good.replace('$4096:', '$40x6:'),
        good.replace('$4096:', '$99999999999:'),
        `SCRAM-SHA-256$4096:$${rest!.split('$')[1]}`, // empty salt
        good.replace('fXIziqBC72IWKgwMwPJwlg==', 'fXIziqBC72IWKgwMwPJwlg='), // bad padding
        good.replace('fXIziqBC72IWKgwMwPJwlg==', 'fXIz*qBC72IWKgwMwPJwlg=='),
        good.replace('O4HwkPD2clQR9LI1N9iKMVlxwUP7vuNUnFKWE7GvIY4=', 'O4HwkPD2clQR9LI1N9iKMVlxwUP7vuNU'), // short key
        good.split(':').slice(0, 2).join(':'), // no ServerKey
        good + ':extra',
        good + '$extra',
        good + '\n',
        good.replace(':Pb6f', ':'),
      ];
      for (const text of bad) expect(parseVerifier(text), text).to.equal(null);
    });

    it('makeVerifier rejects invalid options with ScramError', () => {
      expect(() => makeVerifier('x', { iterations: 0 })).to.throw(ScramError);
      expect(() => makeVerifier('x', { iterations: 1.5 })).to.throw(ScramError);
      expect(() => makeVerifier('x', { salt: Buffer.alloc(0) })).to.throw(ScramError);
    });
  });

  describe('exchange', () => {
    const v = parseVerifier(makeVerifier('correct horse', { iterations: 4096 }))!;

    it('accepts the right password and returns the server signature', () => {
      const { result, expected } = exchange('correct horse', v);
      if (!result.ok) throw result.error;
      expect(result.serverFinal).to.equal(expected);
    });

    it('uses an 18-byte random base64 server nonce by default', () => {
      const c = scramClient('x', { nonce: 'abc' });
      const a = start(c, v);
      const b = start(c, v);
      expect(a.state.serverNonce).to.match(/^[A-Za-z0-9+/]{24}$/);
      expect(a.state.serverNonce).to.not.equal(b.state.serverNonce);
      expect(a.sf).to.equal(`r=abc${a.state.serverNonce},s=${v.salt.toString('base64')},i=4096`);
      expect(serverFirst('abc', v, Buffer.alloc(18, 1))).to.equal(
        `r=abc${Buffer.alloc(18, 1).toString('base64')},s=${v.salt.toString('base64')},i=4096`,
      );
    });

    it('works with an independent client (node-postgres’s SASL implementation)', async () => {
      const spec = 'pg/lib/crypto/sasl.js';
      const sasl = (await import(spec)).default;
      const session = sasl.startSession(['SCRAM-SHA-256']);
      const r = startExchange(Buffer.from(session.response), v);
      if (!r.ok) throw r.error;
      await sasl.continueSession(session, 'correct horse', r.serverFirst);
      const fin = verifyClientFinal(Buffer.from(session.response), r.state);
      if (!fin.ok) throw fin.error;
      sasl.finalizeSession(session, fin.serverFinal); // throws if the server signature is wrong
    });

    it('rejects a wrong password as INVALID_PASSWORD (28P01)', () => {
      const { result } = exchange('correct horse!', v);
      const err = expectFailure(result, 'INVALID_PASSWORD');
      expect(err.sqlstate).to.equal('28P01');
    });

    it('rejects a tampered proof', () => {
      const c = scramClient('correct horse');
      const { sf, state } = start(c, v);
      const msg = c.final(sf).message.toString();
      const proof = Buffer.from(msg.slice(msg.indexOf(',p=') + 3), 'base64');
      proof[0] ^= 1;
      const tampered = `${msg.slice(0, msg.indexOf(',p='))},p=${proof.toString('base64')}`;
      expectFailure(verifyClientFinal(Buffer.from(tampered), state), 'INVALID_PASSWORD');
    });

    it('rejects a tampered nonce', () => {
      const c = scramClient('correct horse');
      const { sf, state } = start(c, v);
      const combined = state.clientNonce + state.serverNonce;
      const forged = sf.replace(`r=${combined}`, `r=${combined.slice(0, -1)}${combined.endsWith('A') ? 'B' : 'A'}`);
      expect(forged).to.not.equal(sf);
      const err = expectFailure(verifyClientFinal(c.final(forged).message, state), 'PROTOCOL_VIOLATION');
      expect(err.detail).to.equal('Nonce does not match.');
      // a nonce that only drops the server part, or extends it
      for (const r of [state.clientNonce, `${state.clientNonce}${state.serverNonce}x`]) {
        const sf2 = sf.replace(/^r=[^,]*/, `r=${r}`);
        expectFailure(verifyClientFinal(c.final(sf2).message, state), 'PROTOCOL_VIOLATION', /invalid SCRAM response/);
      }
    });

    it('accepts y,, with c=eSws and checks the channel-binding flag is repeated', () => {
      const ok = scramClient('correct horse', { gs2: 'y,,' });
      const s1 = start(ok, v);
      expect(s1.state.cbindFlag).to.equal('y');
      const r1 = verifyClientFinal(ok.final(s1.sf).message, s1.state);
      if (!r1.ok) throw r1.error;

      const cases: Array<[string, string]> = [
        ['n,,', 'eSws'],
        ['y,,', 'biws'],
        ['n,,', ''],
        ['n,,', 'cD10bHMtc2VydmVyLWVuZC1wb2ludCws'], // p=tls-server-end-point,,
      ];
      for (const [gs2, cbind] of cases) {
        const c = scramClient('correct horse', { gs2, cbind });
        const s = start(c, v);
        expectFailure(
          verifyClientFinal(c.final(s.sf).message, s.state),
          'PROTOCOL_VIOLATION',
          /unexpected SCRAM channel-binding attribute/,
        );
      }
    });

    it('rejects channel binding (p=), authzid (a=) and mandatory extensions (m=)', () => {
      expectFailure(parseClientFirst(Buffer.from('p=tls-server-end-point,,n=,r=abc')), 'PROTOCOL_VIOLATION', /channel binding/);
      expectFailure(parseClientFirst(Buffer.from('p,,n=,r=abc')), 'PROTOCOL_VIOLATION');
      const a = expectFailure(parseClientFirst(Buffer.from('n,a=admin,n=,r=abc')), 'FEATURE_NOT_SUPPORTED');
      expect(a.sqlstate).to.equal('0A000');
      expectFailure(parseClientFirst(Buffer.from('n,,m=ext,n=,r=abc')), 'FEATURE_NOT_SUPPORTED', /extension/);
    });

    it('is as lenient as PostgreSQL: ignores n= and optional extensions, allows a trailing comma', () => {
      for (const text of ['n,,n=someone,r=abc', 'n,,n=,r=abc,x=1,y=2', 'n,,n=,r=abc,', 'y,,n=\u00fc,r=abc']) {
        const r = parseClientFirst(Buffer.from(text));
        if (!r.ok) throw r.error;
        expect(r.clientNonce).to.equal('abc');
      }
      const u = parseClientFirst(Buffer.from('n,,n=j\u00fcrgen,r=abc'));
      expect(u.ok && u.username).to.equal('j\u00fcrgen');
      // extensions in client-final before p= are ignored and stay part of the signed message
      const c = scramClient('correct horse');
      const { sf, state } = start(c, v);
      const msg = c.final(sf).message.toString();
      const withExt = msg.replace(',p=', ',x=whatever,p=');
      expectFailure(verifyClientFinal(Buffer.from(withExt), state), 'INVALID_PASSWORD'); // proof no longer matches
      const r = verifyClientFinal(Buffer.from(`${msg},`), state);
      if (!r.ok) throw r.error;
    });

    it('handles non-ASCII bytes in client-first exactly (AuthMessage is built from raw bytes)', () => {
      // latin1 0xFF is not valid UTF-8; the proof must still verify over the bytes sent
      const bare = Buffer.concat([Buffer.from('n='), Buffer.from([0xff, 0xc3]), Buffer.from(',r=nonce')]);
      const first = Buffer.concat([Buffer.from('n,,'), bare]);
      const r = startExchange(first, v);
      if (!r.ok) throw r.error;
      const salted = pbkdf2Sync('correct horse', v.salt, v.iterations, 32, 'sha256');
      const clientKey = createHmac('sha256', salted).update('Client Key').digest();
      const withoutProof = `c=biws,r=${r.state.clientNonce}${r.state.serverNonce}`;
      const am = Buffer.concat([bare, Buffer.from(`,${r.serverFirst},${withoutProof}`)]);
      const sig = createHmac('sha256', v.storedKey).update(am).digest();
      const proof = Buffer.from(clientKey.map((b, i) => b ^ sig[i]!));
      const fin = verifyClientFinal(Buffer.from(`${withoutProof},p=${proof.toString('base64')}`), r.state);
      if (!fin.ok) throw fin.error;
    });

    it('returns typed failures for malformed client-first messages', () => {
      const bad: Array<string | Buffer> = [
        '',
        'n',
        'n,',
        'n,,',
        'x,,n=,r=abc',
        'nn,n=,r=abc',
        'n,x,n=,r=abc',
        'n,,r=abc',
        'n,,n=',
        'n,,n=,',
        'n,,n=user',
        'n,,n,r=abc',
        'n,,n=,r',
        'n,,n=,x=abc',
        'n,,n=,r=a b',
        'n,,n=,r=a\u00e9',
        'n,,n=,r=abc,1=x',
        'n,,n=,r=abc,xx=1',
        'n,,n=,r=abc,,',
        Buffer.from('n,,n=,r=abc\0'),
        Buffer.from('n,,n=\0,r=abc'),
        Buffer.from([0]),
        Buffer.from([0xff, 0xfe, 0xfd]),
        Buffer.from([0x6e, 0x2c, 0x2c, 0x80, 0x81]),
        '\u00ff\u00ff\u00ff\u00ff',
        ',,,,',
        '====',
        'n,,n=,r=' + 'a'.repeat(100_000) + ',=',
      ];
      for (const input of bad) {
        const body = typeof input === 'string' ? Buffer.from(input, 'latin1') : input;
        let r: { ok: boolean } | undefined;
        expect(() => (r = parseClientFirst(body)), String(input).slice(0, 40)).to.not.throw();
        expectFailure(r!, 'PROTOCOL_VIOLATION');
        expect(() => (r = startExchange(body, v))).to.not.throw();
        expectFailure(r!);
      }
    });

    it('returns typed failures for malformed client-final messages', () => {
      const c = scramClient('correct horse');
      const { sf, state } = start(c, v);
      const good = c.final(sf).message.toString();
      const nonce = state.clientNonce + state.serverNonce;
      const proof = good.slice(good.indexOf(',p=') + 3);
      const bad: Array<string | Buffer> = [
        '',
        'c',
        'c=',
        'c=biws',
        'c=biws,',
        `c=biws,r=${nonce}`,
        `c=biws,r=${nonce},`,
        `c=biws,r=${nonce},p=`,
        `c=biws,r=${nonce},p=!!!!`,
        `c=biws,r=${nonce},p=${proof.slice(0, -4)}`,
        `c=biws,r=${nonce},p=${proof}AAAA`,
        `c=biws,r=${nonce},p=${proof.replace('=', '')}`,
        `c=biws,r=${nonce},p=${proof},x=1`,
        `c=biws,r=${nonce},p=${proof},,`,
        `c=biws,r=${nonce},1=2,p=${proof}`,
        `r=${nonce},c=biws,p=${proof}`,
        `c=biws,p=${proof}`,
        `c=biws,r=${nonce},P=${proof}`,
        Buffer.from(`c=biws,r=${nonce},p=${proof}\0`),
        Buffer.from([0xff, 0x00, 0x01]),
        Buffer.from('\u00ff'.repeat(64), 'latin1'),
        ',,,',
        '=,=,=',
      ];
      for (const input of bad) {
        const body = typeof input === 'string' ? Buffer.from(input, 'latin1') : input;
        let r: ReturnType<typeof verifyClientFinal> | undefined;
        expect(() => (r = verifyClientFinal(body, state)), String(input)).to.not.throw();
        expectFailure(r!, 'PROTOCOL_VIOLATION');
      }
      // and the good one still passes afterwards: the state is not consumed by failures
      const ok = verifyClientFinal(Buffer.from(good), state);
      if (!ok.ok) throw ok.error;
    });

    it('never throws on arbitrary bytes', () => {
      const state = start(scramClient('x'), v).state;
      fc.assert(
        fc.property(fc.uint8Array({ maxLength: 200 }), (bytes) => {
          const body = Buffer.from(bytes);
          const a = parseClientFirst(body);
          const b = verifyClientFinal(body, state);
          if (!a.ok) expect(a.error).to.be.instanceOf(ScramError);
          expect(b.ok).to.equal(false);
          expect((b as ScramFailure).error).to.be.instanceOf(ScramError);
        }),
        { seed: 5802, numRuns: 2000 },
      );
      // structured garbage that gets further into the parsers
      const piece = fc.constantFrom('n', 'y', 'p', 'a', 'm', 'c', 'r', 'x', '=', ',', ',,', 'biws', 'eSws', '\0', 'AAAA');
      fc.assert(
        fc.property(fc.array(piece, { maxLength: 30 }), (parts) => {
          const body = Buffer.from(parts.join(''), 'latin1');
          const a = parseClientFirst(body);
          const b = verifyClientFinal(body, state);
          if (!a.ok) expect(a.error).to.be.instanceOf(ScramError);
          expect(b.ok).to.equal(false);
        }),
        { seed: 7677, numRuns: 2000 },
      );
    });
  });

  describe('mock verifier for unknown users', () => {
    const secret = Buffer.from('cluster mock nonce: 32 bytes long!!');

    it('is deterministic per user and looks like a real verifier on the wire', () => {
      const a = mockVerifier('alice', secret);
      const again = mockVerifier('alice', secret);
      const b = mockVerifier('bob', secret);
      const other = mockVerifier('alice', Buffer.from('another secret'));
      expect(a.salt.length).to.equal(16);
      expect(a.iterations).to.equal(4096);
      expect(a.salt.equals(again.salt)).to.equal(true);
      expect(a.salt.equals(b.salt)).to.equal(false);
      expect(a.salt.equals(other.salt)).to.equal(false);
      const expected = createHash('sha256').update(Buffer.concat([secret, Buffer.from('alice')])).digest().subarray(0, 16);
      expect(a.salt.equals(expected)).to.equal(true);
      expect(parseVerifier(formatVerifier(a))).to.deep.equal(a);
      const sf = serverFirst('abc', a, Buffer.alloc(18));
      expect(sf).to.match(/^r=abc[A-Za-z0-9+/]{24},s=[A-Za-z0-9+/]{22}==,i=4096$/);
    });

    it('fails exactly like a wrong password', () => {
      const real = parseVerifier(makeVerifier('right'))!;
      const wrong = exchange('wrong', real).result;
      const wrongErr = expectFailure(wrong, 'INVALID_PASSWORD');
      for (const pw of ['wrong', 'right', '']) {
        const mock = exchange(pw, mockVerifier('nobody', secret)).result;
        const err = expectFailure(mock, 'INVALID_PASSWORD');
        expect(err.message).to.equal(wrongErr.message);
        expect(err.sqlstate).to.equal(wrongErr.sqlstate);
        expect(err.detail).to.equal(wrongErr.detail);
      }
    });
  });

  describe('channel binding: SCRAM-SHA-256-PLUS with tls-server-end-point (RFC 5929)', () => {
    const v = parseVerifier(makeVerifier('correct horse', { iterations: 4096 }))!;
    const der = new X509Certificate(makeTestTls().certPem).raw;
    const data = tlsServerEndPoint(der)!;
    const header = 'p=tls-server-end-point,,';
    const cbindOf = (hash: Buffer): string => Buffer.concat([Buffer.from(header), hash]).toString('base64');

    function run(client: TestClient, selected: boolean) {
      const r = startExchange(client.first, v, undefined, { selected, data });
      if (!r.ok) return r;
      return verifyClientFinal(client.final(r.serverFirst).message, r.state);
    }

    it('hashes the certificate with its signature hash (ECDSA with SHA-256 here)', () => {
      expect(data.equals(createHash('sha256').update(der).digest())).to.equal(true);
      expect(tlsServerEndPoint(Buffer.from('not a certificate'))).to.equal(null);
    });

    it('accepts a client bound to our certificate, and refuses one bound to another (a man in the middle)', () => {
      const ok = run(scramClient('correct horse', { gs2: header, cbind: cbindOf(data) }), true);
      if (!ok.ok) throw ok.error;
      const other = tlsServerEndPoint(new X509Certificate(makeTestTls().certPem).raw)!;
      expectFailure(run(scramClient('correct horse', { gs2: header, cbind: cbindOf(other) }), true), 'PROTOCOL_VIOLATION', /channel binding check failed/);
    });

    it('refuses y,, when binding is offered (a downgrade), p= with plain SCRAM-SHA-256, n,, with PLUS, and other binding types', () => {
      expectFailure(run(scramClient('correct horse', { gs2: 'y,,' }), false), 'PROTOCOL_VIOLATION', /negotiation error/);
      expectFailure(run(scramClient('correct horse', { gs2: header, cbind: cbindOf(data) }), false), 'PROTOCOL_VIOLATION', /without channel binding/);
      expectFailure(run(scramClient('correct horse', { gs2: 'n,,' }), true), 'PROTOCOL_VIOLATION', /does not include channel binding data/);
      expectFailure(run(scramClient('correct horse', { gs2: 'p=tls-unique,,' }), true), 'PROTOCOL_VIOLATION', /unsupported SCRAM channel-binding type "tls-unique"/);
      const plain = run(scramClient('correct horse', { gs2: 'n,,' }), false);
      if (!plain.ok) throw plain.error;
    });
  });
});
