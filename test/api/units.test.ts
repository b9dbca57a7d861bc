// The API's pure parts, without a socket: paths, request-id bookkeeping, token check, loopback rule.

import { expect } from 'chai';
import { BearerToken } from '../../src/api/auth.js';
import { canonical, IdempotencyStore } from '../../src/api/idempotency.js';
import { hostOfHeader, isLoopback, refuseForeign } from '../../src/api/loopback.js';
import { matchPath, PATHS, pathFor } from '../../src/api/paths.js';
import { systemClock } from '../../src/clock.js';
import { PgxError } from '../../src/errors.js';

describe('api: units', () => {
  it('builds and matches paths', () => {
    expect(pathFor(PATHS.databaseTtl, { name: 'tdb_a__b' })).to.equal('/v1/databases/tdb_a__b/ttl');
    expect(matchPath(PATHS.database, '/v1/databases/tdb_a__b')).to.deep.equal({ name: 'tdb_a__b' });
    expect(matchPath(PATHS.database, '/v1/databases/')).to.equal(null);
    expect(matchPath(PATHS.database, '/v1/databases/a/pin')).to.equal(null);
    expect(matchPath(PATHS.databases, '/v1/databases')).to.deep.equal({});
  });

  it('fingerprints bodies whatever their key order', () => {
    expect(canonical({ b: 1, a: [1, { d: 2, c: 3 }] })).to.equal(canonical({ a: [1, { c: 3, d: 2 }], b: 1 }));
    expect(canonical({ a: 1, b: undefined })).to.equal(canonical({ a: 1 }));
  });

  it('replays the first result for a request id, refuses another body, forgets failures', async () => {
    const store = new IdempotencyStore<number>(systemClock);
    let runs = 0;
    const work = async (): Promise<number> => ++runs;
    expect(await store.run('k', { a: 1 }, work)).to.equal(1);
    expect(await store.run('k', { a: 1 }, work)).to.equal(1);
    expect(() => store.run('k', { a: 2 }, work)).to.throw(PgxError, /different body/);
    await store.run('f', {}, async () => Promise.reject(new Error('boom'))).catch(() => undefined);
    await new Promise((r) => setImmediate(r));
    expect(await store.run('f', {}, work)).to.equal(2);
  });

  it('checks bearer tokens', () => {
    const t = new BearerToken('s3cret-token-0123456789');
    expect(t.accepts('Bearer s3cret-token-0123456789')).to.equal(true);
    expect(t.accepts('bearer s3cret-token-0123456789')).to.equal(true);
    expect(t.accepts('Bearer s3cret-token-012345678')).to.equal(false);
    expect(t.accepts(undefined)).to.equal(false);
    expect(t.accepts('Basic czNjcmV0')).to.equal(false);
  });

  it('tells loopback names from any other, exactly', () => {
    for (const h of ['127.0.0.1', '127.0.0.2', 'localhost', 'LocalHost', '::1', '[::1]', '::ffff:127.0.0.1']) expect(isLoopback(h), h).to.equal(true);
    for (const h of ['0.0.0.0', '10.0.0.7', '127.attacker.example', '127.0.0.1.attacker.example', 'localhost.attacker.example', '', '::']) expect(isLoopback(h), h).to.equal(false);
    expect(hostOfHeader('127.0.0.1:7432')).to.equal('127.0.0.1');
    expect(hostOfHeader('[::1]:7432')).to.equal('[::1]');
    expect(hostOfHeader('rebind.attacker.example:7432')).to.equal('rebind.attacker.example');
  });

  it('refuses a foreign Host or Origin on a loopback listener (403, 42501)', () => {
    const own = 'http://127.0.0.1:7432';
    expect(refuseForeign({ host: '127.0.0.1:7432', origin: undefined }, own)).to.equal(null);
    expect(refuseForeign({ host: 'localhost:7432', origin: 'http://localhost:7432' }, own)).to.equal(null);
    for (const refused of [
      { host: 'rebind.attacker.example:7432', origin: undefined },
      { host: undefined, origin: undefined },
      { host: '127.0.0.1:7432', origin: 'https://attacker.example' },
      { host: '127.0.0.1:7432', origin: 'http://localhost:3000' },
      { host: '127.0.0.1:7432', origin: 'null' },
    ]) {
      const err = refuseForeign(refused, own);
      expect(err, JSON.stringify(refused)).to.be.instanceOf(PgxError);
      expect(err!.code).to.equal('INSUFFICIENT_PRIVILEGE');
      expect(err!.httpStatus).to.equal(403);
      expect(err!.hint).to.include(own);
    }
  });
});
