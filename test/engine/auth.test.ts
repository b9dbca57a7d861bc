import { expect } from 'chai';
import net from 'node:net';
import { runCommand } from '../helpers/commands.js';
import pg from 'pg';
import postgres from 'postgres';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';

/** Reads a raw socket until `done` says the collected bytes are complete. */
function collect(socket: net.Socket, done: (buf: Buffer) => boolean, timeoutMs = 5000): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    let buf = Buffer.alloc(0);
    const timer = setTimeout(() => reject(new Error(`timed out; got ${buf.toString('latin1')}`)), timeoutMs);
    const onData = (chunk: Buffer): void => {
      buf = Buffer.concat([buf, chunk]);
      if (done(buf)) {
        clearTimeout(timer);
        socket.off('data', onData);
        resolve(buf);
      }
    };
    socket.on('data', onData);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve(buf);
    });
  });
}

function startupPacket(minor: number, params: Record<string, string>): Buffer {
  const body = Buffer.concat([
    ...Object.entries(params).flatMap(([k, v]) => [Buffer.from(`${k}\0${v}\0`)]),
    Buffer.from([0]),
  ]);
  const head = Buffer.alloc(8);
  head.writeInt32BE(8 + body.length, 0);
  head.writeInt32BE((3 << 16) | minor, 4);
  return Buffer.concat([head, body]);
}

/** Message types in order, from a buffer of complete backend messages. */
function types(buf: Buffer): string[] {
  const out: string[] = [];
  let pos = 0;
  while (pos + 5 <= buf.length) {
    out.push(String.fromCharCode(buf[pos]!));
    pos += 1 + buf.readInt32BE(pos + 1);
  }
  return out;
}

describe('engine: startup and authentication', function () {
  this.timeout(60000);

  describe('trust (local default)', () => {
    let rt: TestRuntime;
    before(async () => {
      rt = await startTestRuntime();
    });
    after(async () => rt.stop());

    it('answers a 3.2 startup with NegotiateProtocolVersion 3.2 and the unknown _pq_ options, then serves', async () => {
      const s = net.connect(rt.port, rt.host);
      await new Promise((r) => s.once('connect', r));
      s.write(startupPacket(2, { user: 'postgres', database: 'postgres', '_pq_.made_up': 'x' }));
      const buf = await collect(s, (b) => b.includes(Buffer.from([0x5a, 0, 0, 0, 5, 0x49])));
      const t = types(buf);
      expect(t[0]).to.equal('v');
      expect(buf.readInt32BE(5)).to.equal((3 << 16) | 2);
      expect(buf.readInt32BE(9)).to.equal(1);
      expect(buf.toString('utf8', 13, buf.indexOf(0, 13))).to.equal('_pq_.made_up');
      expect(t).to.include.members(['R', 'S', 'K', 'Z']);
      s.destroy();
    });

    it('accepts any role over the Unix socket, as psql -h DIR does', async () => {
      const out = await runCommand('psql', ['-h', rt.socketDir, '-p', String(rt.port), '-U', 'postgres', '-Atc', 'SELECT current_user']);
      expect(out.stderr).to.equal('');
      expect(out.stdout.trim()).to.equal('postgres');
    });

    it('refuses a startup without a user name with 28000', async () => {
      const s = net.connect(rt.port, rt.host);
      await new Promise((r) => s.once('connect', r));
      s.write(startupPacket(0, { database: 'postgres' }));
      const buf = await collect(s, () => false);
      expect(buf.toString('latin1')).to.contain('C28000').and.to.contain('no PostgreSQL user name specified in startup packet');
    });

    it('passes PostgreSQL\'s own error for an unknown database (3D000) and an unknown role (28000)', async () => {
      const a = new pg.Client({ ...rt.connection('no_such_db') });
      const errA = await a.connect().then(() => null, (e: { code?: string; message: string }) => e);
      expect(errA?.code).to.equal('3D000');
      expect(errA?.message).to.equal('database "no_such_db" does not exist');
      const b = new pg.Client({ ...rt.connection('postgres', 'nobody_here') });
      const errB = await b.connect().then(() => null, (e: { code?: string; message: string }) => e);
      expect(errB?.code).to.equal('28000');
      expect(errB?.message).to.equal('role "nobody_here" does not exist');
    });
  });

  describe('scram', () => {
    let rt: TestRuntime;
    before(async () => {
      rt = await startTestRuntime({ auth: 'scram', users: [{ name: 'app', password: 'correct horse' }] });
    });
    after(async () => rt.stop());

    it('lets node-postgres and postgres.js in with the right password', async () => {
      const c = new pg.Client({ ...rt.connection('postgres', 'app'), password: 'correct horse' });
      await c.connect();
      const { rows } = await c.query('SELECT current_user AS u');
      expect(rows[0].u).to.equal('app');
      await c.end();
      const sql = postgres({ ...rt.connection('postgres', 'app'), password: 'correct horse', max: 1 });
      const [row] = await sql`SELECT current_user AS u`;
      expect(row!.u).to.equal('app');
      await sql.end();
    });

    it('lets psql in with PGPASSWORD', async () => {
      const out = await runCommand('psql', ['-Atc', 'SELECT 1'], { env: { ...rt.env('postgres', 'app'), PGPASSWORD: 'correct horse' } });
      expect(out.stderr).to.equal('');
      expect(out.stdout.trim()).to.equal('1');
    });

    it('refuses a wrong password with 28P01, worded as PostgreSQL words it', async () => {
      const c = new pg.Client({ ...rt.connection('postgres', 'app'), password: 'wrong' });
      const err = await c.connect().then(() => null, (e: { code?: string; message: string }) => e);
      expect(err?.code).to.equal('28P01');
      expect(err?.message).to.equal('password authentication failed for user "app"');
      const out = await runCommand('psql', ['-Atc', 'SELECT 1'], { env: { ...rt.env('postgres', 'app'), PGPASSWORD: 'wrong' } });
      expect(out.code).to.equal(2);
      expect(out.stderr).to.contain('FATAL:  password authentication failed for user "app"');
    });

    it('refuses an unknown user exactly like a wrong password', async () => {
      const c = new pg.Client({ ...rt.connection('postgres', 'ghost'), password: 'whatever' });
      const err = await c.connect().then(() => null, (e: { code?: string; message: string }) => e);
      expect(err?.code).to.equal('28P01');
      expect(err?.message).to.equal('password authentication failed for user "ghost"');
    });

    it('requires the password even on the Unix socket', async () => {
      const out = await runCommand('psql', ['-h', rt.socketDir, '-p', String(rt.port), '-U', 'app', '-w', '-Atc', 'SELECT 1']);
      expect(out.code).to.equal(2);
      expect(out.stderr).to.match(/password/);
    });
  });
});
