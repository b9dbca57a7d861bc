// --login-failure-limit: past N failed passwords from one source address within a minute, that
// source's logins are refused with 28000 before any password is checked (the right one included),
// while other sources log in as usual. The refusal and each failure are logged without the password.

import { expect } from 'chai';
import { PassThrough } from 'node:stream';
import pg from 'pg';
import { createLogger } from '../../src/log.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';

const PASSWORD = 'right-horse-battery-staple';

describe('engine: failed logins per source (--login-failure-limit)', function () {
  this.timeout(30_000);
  let rt: TestRuntime;
  const logged: string[] = [];
  const stream = new PassThrough();
  stream.on('data', (chunk: Buffer) => logged.push(chunk.toString('utf8')));

  before(async function () {
    rt = await startTestRuntime(
      { auth: 'scram', users: [{ name: 'app', password: PASSWORD }], loginFailureLimit: 3 },
      createLogger({ format: 'json', level: 'info', stream }),
    );
  });

  after(async function () {
    await rt?.stop();
  });

  async function login(password: string, host = rt.host): Promise<{ code?: string; message: string; hint?: string } | null> {
    const client = new pg.Client({ ...rt.connection('postgres', 'app'), host, password });
    try {
      await client.connect();
      return null;
    } catch (err) {
      return err as { code?: string; message: string; hint?: string };
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  it('three wrong passwords are 28P01; then even the right one from that address is 28000, with when to retry', async function () {
    for (let i = 0; i < 3; i++) expect((await login('wrong'))?.code).to.equal('28P01');
    const err = await login(PASSWORD);
    expect(err?.code).to.equal('28000');
    expect(err?.message).to.equal('too many failed login attempts from 127.0.0.1');
    expect(err?.hint).to.match(/^Try again in \d+ s with the right password \(--login-failure-limit\)\.$/);
  });

  it('another source (the Unix socket) still logs in', async function () {
    expect(await login(PASSWORD, rt.socketDir)).to.equal(null);
  });

  it('logs each failure and the refusal, never the password', function () {
    const all = logged.join('');
    expect(all.match(/"login-failed"/g)?.length).to.equal(3);
    expect(all).to.include('"login-rate-limited"');
    expect(all).to.not.include(PASSWORD);
  });
});
