// Per-database credentials end to end: a real runtime with --auth scram and the API, credentials
// created through HTTP, node-postgres connecting with them through the engine.

import fs from 'node:fs';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { expect } from 'chai';
import pg from 'pg';
import { PATHS, pathFor } from '../../src/api/paths.js';
import { createLogger } from '../../src/log.js';
import { queryOnce } from '../helpers/pg-once.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';

const TOKEN = 'test-token-credentials-0123456789';
const ADMIN_PASSWORD = 'pw-postgres';

describe('api: per-database credentials', function () {
  this.timeout(60_000);
  let rt: TestRuntime;
  let base: string;
  const logged: string[] = [];
  let a = '';
  let b = '';
  /** Left by the restart test: the first runtime's directories. */
  const leftovers: string[] = [];
  const overrides = { auth: 'scram', apiPort: 0, apiToken: TOKEN, poolSize: 0, users: [{ name: 'postgres', password: ADMIN_PASSWORD, superuser: true }] };
  const stream = new PassThrough();
  stream.on('data', (chunk: Buffer) => logged.push(chunk.toString('utf8')));
  const logger = createLogger({ format: 'json', level: 'debug', stream });

  async function call(method: string, path: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
    const headers: Record<string, string> = { authorization: `Bearer ${TOKEN}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(`${base}${path}`, { method, headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
    const text = await res.text();
    return { status: res.status, body: text.length > 0 ? (JSON.parse(text) as Record<string, unknown>) : {} };
  }

  function admin(database: string): pg.Client {
    return new pg.Client({ ...rt.connection(database), password: ADMIN_PASSWORD });
  }

  /** Runs `work` on a superuser connection to `database`, closed after. */
  async function asAdmin<T>(database: string, work: (c: pg.Client) => Promise<T>): Promise<T> {
    const c = admin(database);
    await c.connect();
    try {
      return await work(c);
    } finally {
      await c.end();
    }
  }

  async function connectError(opts: pg.ClientConfig): Promise<pg.DatabaseError> {
    const client = new pg.Client(opts);
    try {
      await client.connect();
    } catch (err) {
      return err as pg.DatabaseError;
    } finally {
      await client.end().catch(() => undefined);
    }
    throw new Error(`connected to ${String(opts.database)} as ${String(opts.user)}; expected a refusal`);
  }

  before(async function () {
    rt = await startTestRuntime(overrides, logger);
    base = `http://127.0.0.1:${rt.runtime.api!.port}`;
    const c = admin('postgres');
    await c.connect();
    await c.query('CREATE DATABASE tpl_cred');
    await c.end();
    const t = admin('tpl_cred');
    await t.connect();
    await t.query("CREATE TABLE items (id int PRIMARY KEY, label text); INSERT INTO items VALUES (1, 'one')");
    await t.end();
    expect((await call('POST', pathFor(PATHS.templateSeal, { name: 'tpl_cred' }))).status).to.equal(200);
    const ra = await call('POST', PATHS.databases, { template: 'tpl_cred', name: 'tdb_tpl_cred__a' });
    const rb = await call('POST', PATHS.databases, { template: 'tpl_cred', name: 'tdb_tpl_cred__b' });
    expect([ra.status, rb.status]).to.deep.equal([201, 201]);
    a = ra.body.name as string;
    b = rb.body.name as string;
  });

  after(async function () {
    await rt?.stop();
    for (const dir of leftovers) fs.rmSync(dir, { recursive: true, force: true });
  });

  let user = '';
  let password = '';
  let url = '';

  it('creates a credential for A: 201 {user, password, url}; it connects to A and reads and writes', async function () {
    const res = await call('POST', pathFor(PATHS.databaseCredentials, { name: a }));
    expect(res.status).to.equal(201);
    expect(Object.keys(res.body).sort()).to.deep.equal(['password', 'url', 'user']);
    user = res.body.user as string;
    password = res.body.password as string;
    url = res.body.url as string;
    expect(user).to.match(/^tdb_tpl_cred__a_u[0-9a-f]{4}$/);
    expect(password).to.match(/^[A-Za-z0-9_-]{32}$/);
    const parsed = new URL(url);
    expect(decodeURIComponent(parsed.username)).to.equal(user);
    expect(decodeURIComponent(parsed.password)).to.equal(password);
    expect(parsed.pathname).to.equal(`/${a}`);
    expect((await queryOnce(url, 'SELECT current_user AS u')).rows).to.deep.equal([{ u: user }]);
    await queryOnce(url, "INSERT INTO items VALUES (2, 'two')");
    expect((await queryOnce(url, 'SELECT id FROM items ORDER BY id')).rows).to.deep.equal([{ id: 1 }, { id: 2 }]);
    await queryOnce(url, 'CREATE TABLE mine (x int); INSERT INTO mine VALUES (1)');
  });

  it('refuses the credential on any other database exactly as PostgreSQL does without CONNECT', async function () {
    for (const database of [b, 'postgres', 'tpl_cred', 'tdb_tpl_cred__never_minted']) {
      const err = await connectError({ ...rt.connection(database, user), password });
      expect(err.code, database).to.equal('42501');
      expect(err.severity).to.equal('FATAL');
      expect(err.message).to.equal(`permission denied for database "${database}"`);
      expect(err.detail).to.equal('User does not have CONNECT privilege.');
    }
    // Refused before routing: the name was not minted.
    expect((await call('GET', pathFor(PATHS.database, { name: 'tdb_tpl_cred__never_minted' }))).status).to.equal(404);
  });

  it('inherits its rights from the NOLOGIN group pgx_credentials: no SET ROLE, no ADMIN, never superuser', async function () {
    await asAdmin('postgres', async (c) => {
      const { rows } = await c.query(
        `SELECT r.rolsuper, r.rolcreaterole, r.rolcreatedb, r.rolbypassrls, g.rolcanlogin AS group_login, g.rolsuper AS group_super,
                m.inherit_option, m.set_option, m.admin_option
           FROM pg_roles r JOIN pg_auth_members m ON m.member = r.oid JOIN pg_roles g ON g.oid = m.roleid
          WHERE r.rolname = $1`,
        [user],
      );
      expect(rows).to.deep.equal([
        { rolsuper: false, rolcreaterole: false, rolcreatedb: false, rolbypassrls: false, group_login: false, group_super: false, inherit_option: true, set_option: false, admin_option: false },
      ]);
    });
    const err = await queryOnce(url, 'SET ROLE pgx_credentials').then(
      () => null,
      (e: unknown) => e as pg.DatabaseError,
    );
    expect(err?.code).to.equal('42501');
    // The database is a copy of a template sealed with the group's grants: nothing was done inside it.
    const line = logged
      .join('')
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .find((l) => l.message === 'credential-created' && l.role === user);
    expect(line?.prepared).to.equal(true);
  });

  it('sees what the owner creates in A later (default privileges)', async function () {
    await asAdmin(a, async (c) => {
      await c.query('CREATE TABLE later (x int); INSERT INTO later VALUES (7)');
    });
    expect((await queryOnce(url, 'SELECT x FROM later')).rows).to.deep.equal([{ x: 7 }]);
  });

  it('answers a wrong password with 28P01', async function () {
    const err = await connectError({ ...rt.connection(a, user), password: `${password}x` });
    expect(err.code).to.equal('28P01');
  });

  it('A no longer accepts other roles without CONNECT at the PostgreSQL level', async function () {
    await asAdmin('postgres', async (c) => {
      const { rows } = await c.query<{ acl: string }>(`SELECT datacl::text AS acl FROM pg_database WHERE datname = $1`, [a]);
      expect(rows[0]!.acl).to.include(`${user}=Tc/`);
      expect(rows[0]!.acl).to.not.match(/(^|[{,])=[A-Za-z]*c/);
    });
  });

  it('revokes: 204, the next connect is 28P01, a second revoke is 204 too', async function () {
    const open = new pg.Client({ connectionString: url });
    await open.connect();
    const ended = new Promise<void>((resolve) => open.on('error', () => resolve()));
    const res = await call('DELETE', pathFor(PATHS.databaseCredential, { name: a, user }));
    expect(res.status).to.equal(204);
    await ended;
    await open.end().catch(() => undefined);
    const err = await connectError({ connectionString: url });
    expect(err.code).to.equal('28P01');
    expect((await call('DELETE', pathFor(PATHS.databaseCredential, { name: a, user }))).status).to.equal(204);
    // What it created stays, handed to the credentials' group: the owner is a superuser, and what a
    // tenant wrote must never run as one (database-credentials.ts).
    await asAdmin(a, async (c) => {
      expect((await c.query(`SELECT tableowner FROM pg_tables WHERE tablename = 'mine'`)).rows).to.deep.equal([{ tableowner: 'pgx_credentials' }]);
      expect((await c.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [user])).rowCount).to.equal(0);
    });
  });

  it('revokes every credential of a database at once: 200 {revoked}, each refused after; 0 when none is left', async function () {
    const made = await Promise.all([1, 2].map(async () => (await call('POST', pathFor(PATHS.databaseCredentials, { name: a }), {})).body as { url: string }));
    const res = await call('DELETE', pathFor(PATHS.databaseCredentials, { name: a }));
    expect([res.status, res.body]).to.deep.equal([200, { revoked: 2 }]);
    for (const c of made) expect((await connectError({ connectionString: c.url })).code).to.equal('28P01');
    expect((await call('DELETE', pathFor(PATHS.databaseCredentials, { name: a }))).body).to.deep.equal({ revoked: 0 });
  });

  it('creates a database and its credential in one call; a repeat of the request answers without the password', async function () {
    const body = { template: 'tpl_cred', name: 'tdb_tpl_cred__onecall', pinned: true, credential: { connection_limit: 3 }, request_id: 'one-call-1' };
    const res = await call('POST', PATHS.databases, body);
    expect(res.status).to.equal(201);
    expect(res.body).to.include({ name: 'tdb_tpl_cred__onecall', template: 'tpl_cred', owner: 'postgres', pinned: true });
    const credential = res.body.credential as { user: string; password: string; url: string };
    expect(Object.keys(credential).sort()).to.deep.equal(['password', 'url', 'user']);
    expect(credential.user).to.match(/^tdb_tpl_cred__onecall_u[0-9a-f]{4}$/);
    expect((await queryOnce(credential.url, 'SELECT count(*)::int AS n FROM items')).rows).to.deep.equal([{ n: 1 }]);
    const err = await connectError({ ...rt.connection(a, credential.user), password: credential.password });
    expect(err.code).to.equal('42501');
    await asAdmin('postgres', async (c) => {
      expect((await c.query('SELECT rolconnlimit FROM pg_roles WHERE rolname = $1', [credential.user])).rows).to.deep.equal([{ rolconnlimit: 3 }]);
    });
    // The same request again: the same database, and no password (it was handed out once).
    const again = await call('POST', PATHS.databases, body);
    expect(again.status).to.equal(201);
    expect(again.body.credential).to.equal(null);
    expect({ ...again.body, credential: undefined }).to.deep.equal({ ...res.body, credential: undefined });
    expect(JSON.stringify(again.body)).to.not.include(credential.password);
    expect(logged.join('')).to.not.include(credential.password);
    // Without the field the answer has none, as before.
    const plain = await call('POST', PATHS.databases, { template: 'tpl_cred', name: 'tdb_tpl_cred__plain' });
    expect(plain.status).to.equal(201);
    expect(plain.body).to.not.have.property('credential');
    // A bad credential body is refused before anything is made.
    const bad = await call('POST', PATHS.databases, { template: 'tpl_cred', name: 'tdb_tpl_cred__bad', credential: { connection_limit: -2 } });
    expect(bad.status).to.equal(400);
    expect(bad.body.message).to.match(/credential\.connection_limit/);
    expect((await call('GET', pathFor(PATHS.database, { name: 'tdb_tpl_cred__bad' }))).status).to.equal(404);
  });

  it('a credential for a database that is not minted is 404; dropping a database drops its credentials', async function () {
    expect((await call('POST', pathFor(PATHS.databaseCredentials, { name: 'tdb_tpl_cred__nope' }))).status).to.equal(404);
    const res = await call('POST', pathFor(PATHS.databaseCredentials, { name: b }));
    expect(res.status).to.equal(201);
    const other = res.body.user as string;
    expect((await call('DELETE', pathFor(PATHS.database, { name: b }))).status).to.equal(204);
    await asAdmin('postgres', async (c) => {
      expect((await c.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [other])).rowCount).to.equal(0);
    });
  });

  it('a database whose content lacks the group grants (a snapshot of one) gets them over a connection at its first credential', async function () {
    const made = await call('POST', PATHS.databases, { template: 'tpl_cred', name: 'tdb_tpl_cred__bare' });
    expect(made.status).to.equal(201);
    await asAdmin('tdb_tpl_cred__bare', async (c) => {
      await c.query('DROP OWNED BY pgx_credentials');
    });
    expect((await call('POST', pathFor(PATHS.databaseSnapshots, { name: 'tdb_tpl_cred__bare' }), { name: 'snap_bare' })).status).to.equal(201);
    const minted = await call('POST', PATHS.databases, { template: 'snap_bare', name: 'tdb_snap_bare__one' });
    expect(minted.status).to.equal(201);
    const res = await call('POST', pathFor(PATHS.databaseCredentials, { name: 'tdb_snap_bare__one' }));
    expect(res.status).to.equal(201);
    expect((await queryOnce(res.body.url as string, 'SELECT count(*)::int AS n FROM items')).rows).to.deep.equal([{ n: 1 }]);
    // A restore to that snapshot replaces A's content: its credentials still read and write it.
    const ours = await call('POST', pathFor(PATHS.databaseCredentials, { name: a }));
    expect(ours.status).to.equal(201);
    expect((await call('POST', pathFor(PATHS.databaseRestore, { name: a }), { snapshot: 'snap_bare', force: true })).status).to.equal(200);
    expect((await queryOnce(ours.body.url as string, 'SELECT count(*)::int AS n FROM items')).rows).to.deep.equal([{ n: 1 }]);
    await queryOnce(ours.body.url as string, "INSERT INTO items VALUES (2, 'two')");
    // ... and a credential made after the restore needs nothing more.
    const after = await call('POST', pathFor(PATHS.databaseCredentials, { name: a }));
    expect((await queryOnce(after.body.url as string, 'SELECT count(*)::int AS n FROM items')).rows).to.deep.equal([{ n: 2 }]);
  });

  it('an unsealed template holds no rights for the group; sealing it grants them again', async function () {
    const has = async (): Promise<boolean> => {
      return asAdmin('tpl_cred', async (c) => {
        return (await c.query<{ ok: boolean }>(`SELECT has_table_privilege('pgx_credentials', 'items', 'SELECT') AS ok`)).rows[0]!.ok;
      });
    };
    expect((await call('POST', pathFor(PATHS.templateUnseal, { name: 'tpl_cred' }))).status).to.equal(200);
    expect(await has()).to.equal(false);
    expect((await call('POST', pathFor(PATHS.templateSeal, { name: 'tpl_cred' }))).status).to.equal(200);
    expect((await call('POST', pathFor(PATHS.templateUnseal, { name: 'tpl_cred' }))).status).to.equal(200);
    // Sealed again the template had them (its copies carry them); unsealed, it has none.
    expect(await has()).to.equal(false);
    await asAdmin('tpl_cred', async (c) => {
      await c.query('GRANT SELECT ON items TO pgx_credentials');
    });
    expect(await has()).to.equal(true);
    expect((await call('POST', pathFor(PATHS.templateSeal, { name: 'tpl_cred' }))).status).to.equal(200);
    const made = await call('POST', PATHS.databases, { template: 'tpl_cred', name: 'tdb_tpl_cred__resealed' });
    const res = await call('POST', pathFor(PATHS.databaseCredentials, { name: made.body.name as string }));
    expect((await queryOnce(res.body.url as string, 'SELECT count(*)::int AS n FROM items')).rows).to.deep.equal([{ n: 1 }]);
  });

  it('keeps credentials across a restart (recorded in pgx_control)', async function () {
    const res = await call('POST', pathFor(PATHS.databaseCredentials, { name: a }));
    expect(res.status).to.equal(201);
    const kept = { user: res.body.user as string, password: res.body.password as string };
    // A role made a member of the group behind PGX's back loses the membership at the next start.
    await asAdmin('postgres', async (c) => {
      await c.query('CREATE ROLE intruder LOGIN; GRANT pgx_credentials TO intruder');
    });
    const { dataDir, socketDir } = rt;
    await rt.runtime.stop();
    leftovers.push(path.dirname(dataDir), socketDir);
    rt = await startTestRuntime({ ...overrides, dataDir }, logger);
    base = `http://127.0.0.1:${rt.runtime.api!.port}`;
    const err = await connectError({ ...rt.connection('postgres', kept.user), password: kept.password });
    expect(err.code).to.equal('42501');
    const c = new pg.Client({ ...rt.connection(a, kept.user), password: kept.password });
    await c.connect();
    try {
      expect((await c.query('SELECT count(*)::int AS n FROM items')).rows).to.deep.equal([{ n: 2 }]);
    } finally {
      await c.end();
    }
    expect(logged.join('')).to.not.include(kept.password);
    await asAdmin('postgres', async (c) => {
      expect((await c.query(`SELECT 1 FROM pg_auth_members WHERE member = 'intruder'::regrole`)).rowCount).to.equal(0);
    });
    expect(logged.join('')).to.include('credentials-group-member-revoked');
  });

  it('never logs a password', async function () {
    expect(password).to.have.length.greaterThan(0);
    const all = logged.join('');
    expect(all).to.include('credential-created');
    expect(all).to.not.include(password);
  });
});
