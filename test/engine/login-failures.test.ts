// --login-failure-limit, attacked as a tenant would: a guesser on 127.0.0.1 hammering one user's
// password is slowed (its attempts take turns at a growing delay, parallel ones included, and those
// whose turn is too far off get 28000), while every other user from the same address, the same user
// once its turn comes, and the admin on the Unix socket log in. Nothing logged carries a password.

import { expect } from 'chai';
import { PassThrough } from 'node:stream';
import pg from 'pg';
import { createLogger } from '../../src/log.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';

const PASSWORD = 'right-horse-battery-staple';
const ADMIN_PASSWORD = 'admin-horse-battery-staple';
const GUESS = 'guess-number-seven';

interface LoginError {
  code?: string;
  message: string;
  hint?: string;
}

describe('engine: failed logins per (source, user) (--login-failure-limit)', function () {
  this.timeout(60_000);
  let rt: TestRuntime;
  const logged: string[] = [];
  const stream = new PassThrough();
  stream.on('data', (chunk: Buffer) => logged.push(chunk.toString('utf8')));

  before(async function () {
    rt = await startTestRuntime(
      {
        auth: 'scram',
        users: [
          { name: 'app', password: PASSWORD },
          { name: 'other', password: PASSWORD },
          { name: 'postgres', password: ADMIN_PASSWORD, superuser: true },
        ],
        loginFailureLimit: 3,
        // A turn further off than half of it (1 s) is refused rather than held.
        loginTimeout: 2,
      },
      createLogger({ format: 'json', level: 'info', stream }),
    );
  });

  after(async function () {
    await rt?.stop();
  });

  async function login(user: string, password: string, host = '127.0.0.1'): Promise<LoginError | null> {
    const client = new pg.Client({ ...rt.connection('postgres', user), host, password });
    try {
      await client.connect();
      await client.query('SELECT 1');
      return null;
    } catch (err) {
      return err as LoginError;
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  it('a guesser on 127.0.0.1 locks out nobody else: other users and the admin log in from the same address', async function () {
    for (let i = 0; i < 3; i++) expect((await login('app', GUESS))?.code).to.equal('28P01');
    expect(await login('other', PASSWORD)).to.equal(null);
    expect(await login('postgres', ADMIN_PASSWORD)).to.equal(null);
  });

  it('past the limit the guesser is slowed: attempts wait their turn, then a turn too far off is 28000 with when to retry', async function () {
    // Failures 4..6 wait 0.25, 0.5 and 1 s for their turn, and say so.
    for (let i = 0; i < 3; i++) {
      const err = await login('app', GUESS);
      expect(err?.code).to.equal('28P01');
      expect(err?.message).to.equal('password authentication failed for user "app"');
      expect(err?.hint).to.match(/failed logins for this user from 127\.0\.0\.1 within a minute \(--login-failure-limit\): its next attempt waits [\d.]+ s for its turn\.$/);
    }
    // The next turn is 2 s off, more than the 1 s an attempt is held: refused before any password check.
    const err = await login('app', PASSWORD);
    expect(err?.code).to.equal('28000');
    expect(err?.message).to.equal('too many failed login attempts for user "app" from 127.0.0.1');
    expect(err?.hint).to.match(/^Try again in \d+ s with the right password: past --login-failure-limit failures within a minute, this user's logins from this address take turns\.$/);
    // Parallel guesses do not multiply the rate: at most one of them gets a turn.
    const burst = await Promise.all(Array.from({ length: 8 }, () => login('app', GUESS)));
    const codes = burst.map((e) => e?.code);
    expect(codes.filter((c) => c === '28000').length).to.be.at.least(7);
    expect(codes.every((c) => c === '28000' || c === '28P01')).to.equal(true);
    // Meanwhile another user from the same address is not held up at all.
    expect(await login('other', PASSWORD)).to.equal(null);
  });

  it('the right password from the same address gets in once its turn comes (slowed, not switched off)', async function () {
    let err = await login('app', PASSWORD);
    for (let tries = 0; err?.code === '28000' && tries < 10; tries++) {
      const seconds = Number(/Try again in (\d+) s/.exec(err.hint ?? '')?.[1] ?? 1);
      await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
      err = await login('app', PASSWORD);
    }
    expect(err).to.equal(null);
  });

  it('the admin on the Unix socket is never held or refused, however often its password is guessed there', async function () {
    for (let i = 0; i < 8; i++) expect((await login('postgres', GUESS, rt.socketDir))?.code).to.equal('28P01');
    expect(await login('postgres', ADMIN_PASSWORD, rt.socketDir)).to.equal(null);
  });

  it('logs each failure and each held or refused attempt with source and user, never a password', function () {
    const lines = logged.join('').split('\n').filter((l) => l.length > 0).map((l) => JSON.parse(l) as Record<string, unknown>);
    const limited = lines.filter((l) => l.message === 'login-rate-limited');
    expect(limited.length).to.be.at.least(4);
    expect(limited.some((l) => l.refused === true)).to.equal(true);
    for (const l of limited) expect({ source: l.source, user: l.user }).to.deep.equal({ source: '127.0.0.1', user: 'app' });
    expect(lines.filter((l) => l.message === 'login-failed').length).to.be.at.least(14);
    const all = logged.join('');
    for (const secret of [PASSWORD, ADMIN_PASSWORD, GUESS]) expect(all).to.not.include(secret);
  });
});
