// One credential's idle sessions must not take every backend (docs/limits.md, "What a tenant can and
// cannot do"). A tenant role floods the engine with idle sessions (each holds a backend in session
// pooling); beside it another tenant and the admin must still connect, promptly: the flood is refused
// past its share with 53300 naming the option, and the admin has reserved backends.

import { expect } from 'chai';
import pg from 'pg';
import { directConnection } from '../helpers/commands.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';

/** Generous: a connect that has to wait for a backend would take the whole --backend-wait-timeout. */
const CONNECT_TIMEOUT_MS = 20_000;

describe('engine: each role and database holds only its share of the backends', function () {
  this.timeout(120_000);
  let rt: TestRuntime;
  const open: pg.Client[] = [];

  before(async function () {
    // 12 backends, 3 of them reserved for the admin: each role or database may hold 4.
    rt = await startTestRuntime({ maxBackends: 12, backendWaitTimeout: 30 });
    const admin = new pg.Client(directConnection(rt));
    admin.on('error', () => {});
    await admin.connect();
    await admin.query('CREATE ROLE flood LOGIN; CREATE ROLE other LOGIN; CREATE ROLE third LOGIN; CREATE ROLE fourth LOGIN; CREATE ROLE cotenant LOGIN');
    // Each tenant has its own database, as credentials do; `shared` has two.
    for (const db of ['shared', 'flood', 'other', 'third', 'fourth']) await admin.query(`CREATE DATABASE ${db}`);
    await admin.end();
  });

  afterEach(async function () {
    await Promise.allSettled(open.splice(0).map((c) => c.end()));
  });

  after(async function () {
    await rt?.stop();
  });

  /** Connects (over TCP, as a tenant would) and keeps the session open; a refusal is returned. */
  async function connect(user: string, database = user, host?: string): Promise<pg.Client | pg.DatabaseError> {
    const client = new pg.Client({ ...rt.connection(database, user), ...(host ? { host } : {}), connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
    client.on('error', () => {});
    try {
      await client.connect();
    } catch (err) {
      return err as pg.DatabaseError;
    }
    open.push(client);
    await client.query('SELECT 1');
    return client;
  }

  it('refuses a flood of one role past its share (53300), while another tenant and the admin connect', async function () {
    const flood = await Promise.all(Array.from({ length: 30 }, () => connect('flood')));
    const admitted = flood.filter((c) => c instanceof pg.Client);
    const refused = flood.filter((c): c is pg.DatabaseError => !(c instanceof pg.Client));
    expect(admitted).to.have.length(4);
    expect(refused).to.have.length(26);
    for (const e of refused) {
      expect(e.code).to.equal('53300');
      expect(e.severity).to.equal('FATAL');
      expect(e.message).to.equal('too many connections for role "flood": it holds its share of 4 backends');
      expect(e.hint).to.include('--max-backends-per-role');
    }
    // Beside the flood: another tenant, and the admin over TCP and over the Unix socket.
    expect(await connect('other')).to.be.instanceOf(pg.Client);
    expect(await connect('postgres')).to.be.instanceOf(pg.Client);
    expect(await connect('postgres', 'postgres', rt.socketDir)).to.be.instanceOf(pg.Client);
  });

  it('caps one database across its roles (53300 naming --max-backends-per-db)', async function () {
    const a = await Promise.all(Array.from({ length: 3 }, () => connect('cotenant', 'shared')));
    expect(a.every((c) => c instanceof pg.Client)).to.equal(true);
    expect(await connect('other', 'shared')).to.be.instanceOf(pg.Client);
    const over = await connect('third', 'shared');
    expect(over).to.not.be.instanceOf(pg.Client);
    expect((over as pg.DatabaseError).code).to.equal('53300');
    expect((over as pg.DatabaseError).message).to.equal('too many connections for database "shared": it holds its share of 4 backends');
    expect((over as pg.DatabaseError).hint).to.include('--max-backends-per-db');
  });

  it('keeps reserved backends for the admin when tenants hold all the others', async function () {
    // 9 unreserved backends: flood 4 + other 4 + third 1.
    for (const [user, n] of [['flood', 4], ['other', 4], ['third', 1]] as const) {
      const got = await Promise.all(Array.from({ length: n }, () => connect(user)));
      expect(got.every((c) => c instanceof pg.Client), user).to.equal(true);
    }
    // A fourth tenant now waits for a backend (until --backend-wait-timeout); the admin does not.
    const waiting = connect('fourth');
    const admins = await Promise.all([connect('postgres'), connect('postgres', 'postgres', rt.socketDir), connect('postgres')]);
    expect(admins.every((c) => c instanceof pg.Client)).to.equal(true);
    // Once the admin's sessions and one tenant's have left, the waiting tenant gets a backend. (While the
    // admin uses reserved backends, tenants have fewer, as with PostgreSQL's reserved connections.)
    for (const c of admins) await (c as pg.Client).end();
    await open.shift()!.end();
    expect(await waiting).to.be.instanceOf(pg.Client);
  });
});
