// The tenant wall attacked as a tenant would (issue 18): real roles (a per-database credential from the
// control API, CREATEDB roles), real clients, a real race. Each case failed before its wall was built:
//   - names over 63 bytes: PostgreSQL truncates them, so `<63-byte credential>X` logged in as the
//     credential while the engine looked its wall up under the untruncated name, found none, and let it
//     into another tenant's database; a database name with a multibyte character at the cut;
//   - a minted database open to PUBLIC: any login role could connect to another tenant's database;
//   - name squatting: CREATE DATABASE (or RENAME) under the mint prefix, served to the next client;
//   - a minted name served to another tenant its owner granted CONNECT (into the owner's trap);
//   - another tenant's snapshot restored into one's own database, minted from, or open to PUBLIC;
//   - the restore race: a CREATE DATABASE of the restored name between DROP and RENAME;
//   - pgx_guard open to the credentials' group; a superuser held to a database's session cap.

import { expect } from 'chai';
import pg from 'pg';
import { ApiClient } from '../../src/api/client.js';
import { waitFor } from '../helpers/commands.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';

const TOKEN = 'test-token-walls-0123456789abcdef';
const ADMIN_PASSWORD = 'pw-walls-admin';
/** A template whose minted names are 57+ bytes, so their credentials' names are 63 bytes long. */
const TPL = 'tpl_walls_with_a_long_template_name';
const PREFIX = `tdb_${TPL}__`;
const bytes = (s: string): number => Buffer.byteLength(s, 'utf8');

interface PgErr {
  code?: string;
  message: string;
  detail?: string;
}

describe('runtime: tenant walls hold at every name length and under races', function () {
  this.timeout(120_000);
  let rt: TestRuntime;
  let api: ApiClient;
  const open: pg.Client[] = [];

  function as(database: string, user: string, password: string): pg.ClientConfig {
    return { ...rt.connection(database, user), password };
  }

  async function connect(opts: pg.ClientConfig): Promise<pg.Client> {
    const c = new pg.Client(opts);
    c.on('error', () => undefined);
    await c.connect();
    open.push(c);
    return c;
  }

  async function refused(opts: pg.ClientConfig): Promise<PgErr> {
    const c = new pg.Client(opts);
    c.on('error', () => undefined);
    const err = await c.connect().then(
      () => null,
      (e: unknown) => e as PgErr,
    );
    await c.end().catch(() => undefined);
    expect(err, `connecting to ${String(opts.database)} as ${String(opts.user)} should be refused`).to.not.equal(null);
    return err!;
  }

  const admin = (database = 'postgres'): pg.ClientConfig => as(database, 'postgres', ADMIN_PASSWORD);

  async function adminQuery(sql: string, database = 'postgres'): Promise<pg.QueryResult> {
    const c = await connect(admin(database));
    try {
      return await c.query(sql);
    } finally {
      await c.end();
    }
  }

  before(async function () {
    rt = await startTestRuntime({
      auth: 'scram',
      // The walls around tenants with CREATEDB (scram's own default is --mint-roles group).
      mintRoles: 'createdb',
      apiPort: 0,
      apiToken: TOKEN,
      poolSize: 1,
      users: [{ name: 'postgres', password: ADMIN_PASSWORD, superuser: true }],
    });
    api = new ApiClient({ url: `http://127.0.0.1:${rt.runtime.api!.port}`, token: TOKEN });
    await api.buildTemplate({ name: TPL, sql: "CREATE TABLE items (id int PRIMARY KEY, label text); INSERT INTO items VALUES (1, 'template')" });
    // Two tenants with CREATEDB (mint on connect), as a CI job or an agent would be given.
    await adminQuery("CREATE ROLE eve LOGIN CREATEDB PASSWORD 'pw-eve'; CREATE ROLE bob LOGIN CREATEDB PASSWORD 'pw-bob'");
  });

  afterEach(async function () {
    await Promise.all(open.splice(0).map((c) => c.end().catch(() => undefined)));
  });

  after(async function () {
    await rt?.stop();
  });

  describe('names over 63 bytes are the names PostgreSQL truncates them to', function () {
    it('a 63-byte credential logging in as <role>X is still held to its own database (42501)', async function () {
      const a = await api.createDatabase({ template: TPL, name: `${PREFIX}${'a'.repeat(20)}` });
      const b = await api.createDatabase({ template: TPL, name: `${PREFIX}${'b'.repeat(20)}` });
      expect(bytes(a.name)).to.be.at.least(57);
      const cred = await api.createCredential(a.name);
      expect(bytes(cred.user)).to.equal(63);
      // In its own database under the long name: PostgreSQL logs it in as the 63-byte role.
      const own = await connect(as(a.name, `${cred.user}X`, cred.password));
      expect((await own.query('SELECT current_user AS u')).rows).to.deep.equal([{ u: cred.user }]);
      // Another tenant's database: refused, whichever spelling of the role.
      for (const user of [cred.user, `${cred.user}X`, `${cred.user}${'é'.repeat(10)}`]) {
        const err = await refused(as(b.name, user, cred.password));
        expect(err.code, user).to.equal('42501');
        expect(err.message).to.equal(`permission denied for database "${b.name}"`);
      }
      // And B's rows are untouched.
      expect((await adminQuery('SELECT label FROM items ORDER BY id', b.name)).rows).to.deep.equal([{ label: 'template' }]);
    });

    it('a database name with a multibyte character at the cut counts against that database (53300)', async function () {
      // 62 ASCII bytes: the minted name; + 'é' (bytes 63-64) is cut whole by PostgreSQL.
      const name = `${PREFIX}${'m'.repeat(62 - bytes(PREFIX))}`;
      expect(bytes(name)).to.equal(62);
      await api.createDatabase({ template: TPL, name, connection_limit: 1 });
      const cred = await api.createCredential(name);
      const first = await connect(as(`${name}é`, `${cred.user}é`, cred.password));
      expect((await first.query('SELECT current_database() AS d, current_user AS u')).rows).to.deep.equal([{ d: name, u: cred.user }]);
      const err = await refused(as(`${name}ééé`, cred.user, cred.password));
      expect(err.code).to.equal('53300');
      expect(err.message).to.equal(`too many connections for database "${name}"`);
    });
  });

  it("a superuser gets past a database's session cap, as PostgreSQL lets it past connection_limit; a tenant does not", async function () {
    const created = await api.createDatabase({ template: TPL, name: `${PREFIX}capped`, connection_limit: 1 });
    const cred = await api.createCredential(created.name);
    await connect(as(created.name, cred.user, cred.password));
    const su = await connect(admin(created.name));
    expect((await su.query('SELECT current_database() AS d')).rows).to.deep.equal([{ d: created.name }]);
    const err = await refused(as(created.name, cred.user, cred.password));
    expect(err.code).to.equal('53300');
  });

  describe('PostgreSQL is the second wall', function () {
    it("a minted database is closed to PUBLIC: another tenant's role is refused by PostgreSQL itself (42501)", async function () {
      const created = await api.createDatabase({ template: TPL, name: `${PREFIX}closed` });
      const err = await refused(as(created.name, 'eve', 'pw-eve'));
      expect(err.code).to.equal('42501');
      expect(err.message).to.equal(`permission denied for database "${created.name}"`);
      // A database eve mints by connecting is hers; bob cannot reach it.
      const mine = await connect(as(`${PREFIX}eves`, 'eve', 'pw-eve'));
      expect((await mine.query('SELECT 1 AS one')).rows).to.deep.equal([{ one: 1 }]);
      expect((await refused(as(`${PREFIX}eves`, 'bob', 'pw-bob'))).code).to.equal('42501');
    });

    it('a member of the credentials group that is not a recorded credential cannot log in (28P01)', async function () {
      await adminQuery("CREATE ROLE sneaky LOGIN PASSWORD 'pw-sneaky'; GRANT pgx_credentials TO sneaky");
      const err = await refused(as('postgres', 'sneaky', 'pw-sneaky'));
      expect(err.code).to.equal('28P01');
    });

    it('a credential cannot create objects in pgx_guard (42501)', async function () {
      const created = await api.createDatabase({ template: TPL, name: `${PREFIX}guard` });
      const cred = await api.createCredential(created.name);
      const c = await connect(as(created.name, cred.user, cred.password));
      const err = await c.query('CREATE TABLE pgx_guard.mine (x int)').then(
        () => null,
        (e: unknown) => e as PgErr,
      );
      expect(err?.code).to.equal('42501');
      expect(err?.message).to.equal('permission denied for schema pgx_guard');
    });
  });

  describe('names under the mint prefix are PGX\'s', function () {
    it('a database a tenant creates under the prefix is never served: the next client gets 42P04, the API 409', async function () {
      const eve = await connect(as('postgres', 'eve', 'pw-eve'));
      await eve.query(`CREATE DATABASE ${PREFIX}pr123`);
      await eve.query('CREATE DATABASE evedb');
      await eve.query(`ALTER DATABASE evedb RENAME TO ${PREFIX}pr124`);
      for (const name of [`${PREFIX}pr123`, `${PREFIX}pr124`]) {
        for (const [user, password] of [
          ['bob', 'pw-bob'],
          ['postgres', ADMIN_PASSWORD],
          ['eve', 'pw-eve'],
        ] as const) {
          const err = await refused(as(name, user, password));
          expect(err.code, `${user} to ${name}`).to.equal('42P04');
          expect(err.message).to.equal(`database "${name}" exists but was not minted by PGX`);
        }
        const viaApi = await api.createDatabase({ template: TPL, name }).then(
          () => null,
          (e: unknown) => e as { status: number; body: { sqlstate: string } },
        );
        expect(viaApi?.status).to.equal(409);
      }
      // Reconcile (at start, and every --reconcile interval) does not adopt them either: run now.
      await (rt.runtime.disposableDatabases as unknown as { reconcile(): Promise<number> }).reconcile();
      expect(rt.runtime.databases.database(`${PREFIX}pr123`)).to.equal(null);
      expect((await refused(as(`${PREFIX}pr123`, 'bob', 'pw-bob'))).code).to.equal('42P04');
    });
  });

  describe('a minted name is its minter\'s', function () {
    it("another tenant is refused (42501) even with CONNECT granted by the owner, who could have put a schema named after it first in its search_path", async function () {
      const name = `${PREFIX}shared`;
      const eve = await connect(as(name, 'eve', 'pw-eve'));
      // The trap an owner can lay for whoever connects to its name next (an old URL, a CI job's name).
      await eve.query(
        `GRANT CONNECT, TEMPORARY ON DATABASE ${name} TO bob; CREATE SCHEMA bob; CREATE TABLE bob.items (id int, label text); ` +
          'GRANT USAGE ON SCHEMA bob TO bob; GRANT ALL ON bob.items TO bob',
      );
      const err = (await refused(as(name, 'bob', 'pw-bob'))) as PgErr & { hint?: string };
      expect(err.code).to.equal('42501');
      expect(err.message).to.equal(`permission denied for database "${name}"`);
      expect(err.hint).to.match(/minted by another role/);
      // Whom PostgreSQL counts as the owner is served: a member of the owning role, and a superuser.
      await adminQuery("CREATE ROLE eve_ci LOGIN PASSWORD 'pw-eve-ci'; GRANT eve TO eve_ci");
      const member = await connect(as(name, 'eve_ci', 'pw-eve-ci'));
      expect((await member.query('SELECT current_user AS u')).rows).to.deep.equal([{ u: 'eve_ci' }]);
      const admin_ = await connect(admin(name));
      expect((await admin_.query('SELECT count(*)::int AS n FROM bob.items')).rows).to.deep.equal([{ n: 0 }]);
    });
  });

  describe("a snapshot is its database's data", function () {
    it("another tenant can neither restore it, mint from it, nor connect to it unsealed (42501); its owner can", async function () {
      const evedata = `${PREFIX}evedata`;
      const eve = await connect(as(evedata, 'eve', 'pw-eve'));
      await eve.query("CREATE TABLE secrets (v text); INSERT INTO secrets VALUES ('eve-secret')");
      await eve.end();
      const eveOutside = await connect(as('postgres', 'eve', 'pw-eve'));
      await eveOutside.query(`SELECT pgx_snapshot_database('${evedata}', 'eve_snap')`);
      await connect(as(`${PREFIX}bobs`, 'bob', 'pw-bob'));
      const bob = await connect(as('postgres', 'bob', 'pw-bob'));
      const restored = await bob.query(`SELECT pgx_restore_database('${PREFIX}bobs', 'eve_snap', true)`).then(
        () => null,
        (e: unknown) => e as PgErr,
      );
      expect(restored?.code).to.equal('42501');
      expect(restored?.message).to.equal('permission denied to copy database "eve_snap"');
      const minted = await refused(as('tdb_eve_snap__bobs', 'bob', 'pw-bob'));
      expect(minted.code).to.equal('42501');
      expect(minted.message).to.equal('permission denied to copy database "eve_snap"');
      // Nor copied with PostgreSQL's own CREATEDB, as IS_TEMPLATE would allow (sealed again too, below).
      const copyRefused = async (): Promise<void> => {
        const copied = await bob.query('CREATE DATABASE bob_copy TEMPLATE eve_snap').then(
          () => null,
          (e: unknown) => e as PgErr,
        );
        expect(copied?.code).to.equal('42501');
        expect(copied?.message).to.equal('permission denied to copy database "eve_snap"');
      };
      await copyRefused();
      // Its owner mints from it and finds her data.
      const mine = await connect(as('tdb_eve_snap__eves', 'eve', 'pw-eve'));
      expect((await mine.query('SELECT v FROM secrets')).rows).to.deep.equal([{ v: 'eve-secret' }]);
      // Unsealed, it is closed to PUBLIC like the database it was taken of.
      await eveOutside.query("SELECT pgx_unseal_template('eve_snap')");
      expect((await refused(as('eve_snap', 'bob', 'pw-bob'))).code).to.equal('42501');
      await eveOutside.query("SELECT pgx_seal_template('eve_snap')");
      await copyRefused();
      const again = await connect(as('tdb_eve_snap__eves2', 'eve', 'pw-eve'));
      expect((await again.query('SELECT v FROM secrets')).rows).to.deep.equal([{ v: 'eve-secret' }]);
    });
  });

  describe('restore and rebuild are atomic', function () {
    it('a tenant looping CREATE DATABASE of a template being rebuilt never takes its name', async function () {
      await api.buildTemplate({ name: 'tpl_rebuilt', sql: 'CREATE TABLE v (n int); INSERT INTO v VALUES (0)' });
      const eve = await connect(as('postgres', 'eve', 'pw-eve'));
      let running = true;
      const won: number[] = [];
      const loop = (async () => {
        for (let i = 0; running; i++) {
          await eve.query('CREATE DATABASE tpl_rebuilt').then(
            () => won.push(i),
            (e: { code?: string }) => {
              if (e.code !== '42P04') throw e;
            },
          );
        }
      })();
      try {
        for (let round = 1; round <= 4; round++) {
          const t = await api.buildTemplate({ name: 'tpl_rebuilt', sql: `CREATE TABLE v (n int); INSERT INTO v VALUES (${round})`, replace: true });
          expect(t.sealed).to.equal(true);
        }
      } finally {
        running = false;
        await loop;
      }
      expect(won, 'the tenant created the template name').to.deep.equal([]);
      const minted = await connect(admin(`tdb_tpl_rebuilt__after`));
      expect((await minted.query('SELECT n FROM v')).rows).to.deep.equal([{ n: 4 }]);
    });

    it('a tenant looping CREATE DATABASE of the name while restores run never takes it; the data is the snapshot each time', async function () {
      const victim = await api.createDatabase({ template: TPL, name: `${PREFIX}victim` });
      const cred = await api.createCredential(victim.name);
      await adminQuery("INSERT INTO items VALUES (2, 'kept')", victim.name);
      await api.snapshot(victim.name, 'walls_snap');
      const eve = await connect(as('postgres', 'eve', 'pw-eve'));
      let running = true;
      let attempts = 0;
      const won: string[] = [];
      const loop = (async () => {
        while (running) {
          attempts++;
          await eve.query(`CREATE DATABASE ${victim.name}`).then(
            () => won.push(`round ${attempts}`),
            (e: { code?: string }) => {
              if (e.code !== '42P04') throw e;
            },
          );
        }
      })();
      try {
        for (let round = 0; round < 5; round++) {
          await adminQuery(`INSERT INTO items VALUES (${10 + round}, 'lost')`, victim.name);
          await api.restore(victim.name, 'walls_snap', true);
          const rows = (await adminQuery('SELECT id, label, (SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = current_database()) AS owner FROM items ORDER BY id', victim.name)).rows;
          expect(rows, `round ${round}`).to.deep.equal([
            { id: 1, label: 'template', owner: 'postgres' },
            { id: 2, label: 'kept', owner: 'postgres' },
          ]);
        }
      } finally {
        running = false;
        await loop;
      }
      expect(won, 'the tenant created the restored name').to.deep.equal([]);
      expect(attempts).to.be.greaterThan(5);
      // The credential opens the restored database, and eve still cannot.
      const c = await connect(as(victim.name, cred.user, cred.password));
      expect((await c.query('SELECT count(*)::int AS n FROM items')).rows).to.deep.equal([{ n: 2 }]);
      expect((await refused(as(victim.name, 'eve', 'pw-eve'))).code).to.equal('42501');
    });
  });
});

describe('runtime: --mint-roles group: minting without CREATEDB', function () {
  this.timeout(120_000);
  let rt: TestRuntime;
  const open: pg.Client[] = [];

  async function connect(database: string, user: string): Promise<pg.Client> {
    const c = new pg.Client({ ...rt.connection(database, user), password: `pw-${user}` });
    c.on('error', () => undefined);
    await c.connect();
    open.push(c);
    return c;
  }

  before(async function () {
    rt = await startTestRuntime({ auth: 'scram', apiPort: 0, apiToken: TOKEN, poolSize: 1, mintRoles: 'group', users: [{ name: 'postgres', password: ADMIN_PASSWORD, superuser: true }] });
    const api = new ApiClient({ url: `http://127.0.0.1:${rt.runtime.api!.port}`, token: TOKEN });
    await api.buildTemplate({ name: 'tpl_grp', sql: 'CREATE TABLE t (x int)' });
    const admin = new pg.Client({ ...rt.connection('postgres'), password: ADMIN_PASSWORD });
    await admin.connect();
    open.push(admin);
    await admin.query("CREATE ROLE carol LOGIN NOCREATEDB PASSWORD 'pw-carol'; CREATE ROLE dave LOGIN NOCREATEDB PASSWORD 'pw-dave'; GRANT pgx_minters TO carol");
  });

  after(async function () {
    await Promise.all(open.splice(0).map((c) => c.end().catch(() => undefined)));
    await rt?.stop();
  });

  /** Waits (bounded) until the pool holds a ready spare, so the next mint is a claim. */
  async function spareReady(): Promise<void> {
    for (let i = 0; i < 300; i++) {
      if (((await rt.runtime.databases.status()).pool.tpl_grp?.ready ?? 0) >= 1) return;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error('no spare became ready within 30 s');
  }

  it('a member of pgx_minters mints warm and cold, owns its databases, and cannot CREATE DATABASE itself (42501)', async function () {
    await spareReady();
    const warmBefore = (await rt.runtime.databases.status()).mints.warm;
    for (const token of ['warm', 'cold', 'third']) {
      const c = await connect(`tdb_tpl_grp__${token}`, 'carol');
      if (token === 'warm') expect((await rt.runtime.databases.status()).mints.warm).to.equal(warmBefore + 1);
      expect((await c.query('SELECT pg_get_userbyid(datdba) AS owner FROM pg_database WHERE datname = current_database()')).rows).to.deep.equal([{ owner: 'carol' }]);
    }
    const carol = await connect('postgres', 'carol');
    const err = await carol.query('CREATE DATABASE tdb_tpl_grp__squat').then(
      () => null,
      (e: unknown) => e as PgErr,
    );
    expect(err?.code).to.equal('42501');
    expect(err?.message).to.equal('permission denied to create database');
  });

  it('a role outside the group is refused the mint (3D000, hint naming --mint-roles), and no spare is lost', async function () {
    // With a spare ready the claim itself checks the membership (in its own transaction). The pool
    // full first, so no refill changes the count meanwhile (the loop above may have grown it).
    await spareReady();
    const full = async (): Promise<boolean> => {
      const pool = (await rt.runtime.databases.status()).pool.tpl_grp;
      return pool !== undefined && pool.ready === pool.size;
    };
    await waitFor('the pool to be full', full, 30_000);
    const status = await rt.runtime.databases.status();
    const before = status.mints;
    const readyBefore = status.pool.tpl_grp!.ready;
    const c = new pg.Client({ ...rt.connection('tdb_tpl_grp__dave', 'dave'), password: 'pw-dave' });
    c.on('error', () => undefined);
    const err = await c.connect().then(
      () => null,
      (e: unknown) => e as PgErr & { hint?: string },
    );
    await c.end().catch(() => undefined);
    expect(err?.code).to.equal('3D000');
    expect(err?.hint).to.match(/--mint-roles/);
    expect(rt.runtime.databases.database('tdb_tpl_grp__dave')).to.equal(null);
    const after = await rt.runtime.databases.status();
    expect(after.mints.warm + after.mints.cold).to.equal(before.warm + before.cold);
    expect(after.pool.tpl_grp?.ready).to.equal(readyBefore);
  });
});
