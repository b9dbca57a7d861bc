// Sealing and unsealing templates against a real runtime: what PostgreSQL shows afterwards, sessions on
// the template ended, who may do it, and names that are refused without changing anything.

import { expect } from 'chai';
import { PgxError } from '../../src/errors.js';
import { waitFor } from '../helpers/commands.js';
import { connectClient, createTemplateDatabase, rejection, startHarness, type Harness } from './databases-harness.js';

const AS_POSTGRES = { user: 'postgres', database: 'postgres' };

async function flags(h: Harness, name: string): Promise<{ isTemplate: boolean; allowConn: boolean }> {
  const { rows } = await h.admin.query(`SELECT datistemplate, datallowconn FROM pg_database WHERE datname = '${name}'`);
  return { isTemplate: rows[0]![0] === 't', allowConn: rows[0]![1] === 't' };
}

describe('runtime: templates', function () {
  this.timeout(60_000);
  let h: Harness;

  before(async function () {
    h = await startHarness({ settings: { poolSize: 0 } });
    await h.admin.query('CREATE ROLE bob LOGIN; CREATE ROLE carol LOGIN');
    await createTemplateDatabase(h, 'tpl_app');
    await createTemplateDatabase(h, 'tpl_carol', 'carol');
  });

  after(async function () {
    await h?.stop();
  });

  it('seals: frozen, IS_TEMPLATE true, ALLOW_CONNECTIONS false, sessions on it ended, recorded', async function () {
    const client = await connectClient(h, 'tpl_app');
    let ended: Error | undefined;
    client.on('error', (err) => (ended ??= err));
    await client.query("INSERT INTO users (email) VALUES ('seed@example.com')");

    expect(await h.dbs.control.call('seal_template', ['tpl_app'], AS_POSTGRES)).to.equal('tpl_app');

    expect(await flags(h, 'tpl_app')).to.deep.equal({ isTemplate: true, allowConn: false });
    expect(h.terminations.map((t) => t.database)).to.include('tpl_app');
    await waitFor('the session on the template to end', () => ended !== undefined);
    expect((ended as Error & { code?: string }).code).to.equal('57P01');
    const { rows } = await h.admin.query(`SELECT count(*) FROM pg_stat_activity WHERE datname = 'tpl_app'`);
    expect(rows[0]![0]).to.equal('0');
    const status = await h.dbs.operations.status();
    expect(status.databases.templates).to.equal(1);
    expect(status.pool).to.have.property('tpl_app');
  });

  it('reseals: a new generation, still sealed', async function () {
    const first = await h.dbs.operations.seal('tpl_app', 'postgres');
    const again = await h.dbs.operations.seal('tpl_app', 'postgres');
    expect(again.generation).to.equal(first.generation + 1);
    expect(again.sealed).to.equal(true);
    expect(await flags(h, 'tpl_app')).to.deep.equal({ isTemplate: true, allowConn: false });
  });

  it('unseals so the template can change, and seals it again', async function () {
    expect(await h.dbs.control.call('unseal_template', ['tpl_app'], AS_POSTGRES)).to.equal('tpl_app');
    expect(await flags(h, 'tpl_app')).to.deep.equal({ isTemplate: false, allowConn: true });
    const client = await connectClient(h, 'tpl_app');
    await client.query('ALTER TABLE users ADD COLUMN name text');
    await client.end();
    await h.dbs.operations.seal('tpl_app', 'postgres');
    expect(await flags(h, 'tpl_app')).to.deep.equal({ isTemplate: true, allowConn: false });
  });

  it('lets the owner seal and unseal, and refuses other roles with 42501 naming the function', async function () {
    const err = await rejection(h.dbs.control.call('seal_template', ['tpl_carol'], { user: 'bob', database: 'postgres' }));
    expect(err).to.be.instanceOf(PgxError);
    expect(err.sqlstate).to.equal('42501');
    expect(err.message).to.equal('permission denied for function pgx_seal_template');
    expect(err.hint).to.match(/superuser or the owner of database "tpl_carol"/);
    expect(await flags(h, 'tpl_carol')).to.deep.equal({ isTemplate: false, allowConn: true });

    await h.dbs.control.call('seal_template', ['tpl_carol'], { user: 'carol', database: 'postgres' });
    expect(await flags(h, 'tpl_carol')).to.deep.equal({ isTemplate: true, allowConn: false });
    const unseal = await rejection(h.dbs.control.call('unseal_template', ['tpl_carol'], { user: 'bob', database: 'postgres' }));
    expect(unseal.message).to.equal('permission denied for function pgx_unseal_template');
    await h.dbs.control.call('unseal_template', ['tpl_carol'], { user: 'carol', database: 'postgres' });
    expect(await flags(h, 'tpl_carol')).to.deep.equal({ isTemplate: false, allowConn: true });
  });

  describe('refuses, changing nothing', function () {
    before(async function () {
      for (const name of ['"Tpl_Upper"', 'tpl_bad_', 'tpl__two']) await h.admin.query(`CREATE DATABASE ${name}`);
    });

    const cases: [string, (string | null)[], string, RegExp][] = [
      ['an unknown database', ['no_such_db'], '3D000', /^database "no_such_db" does not exist$/],
      ['the control database', ['pgx_control'], '3D000', /^database "pgx_control" does not exist$/],
      ['a spare name', ['pgx_spare_1'], '3D000', /does not exist/],
      ['postgres', ['postgres'], '22023', /PGX and PostgreSQL rely on it/],
      ['template1', ['template1'], '22023', /rely on it/],
      ['an upper-case name', ['Tpl_Upper'], '22023', /lower-case/],
      ['a name ending in "_"', ['tpl_bad_'], '22023', /cannot end with "_"/],
      ['a name with "__"', ['tpl__two'], '22023', /cannot contain "__"/],
      ['NULL', [null], '22023', /takes one database name, not NULL/],
      ['two arguments', ['a', 'b'], '22023', /not 2 arguments/],
    ];
    for (const [what, args, sqlstate, message] of cases) {
      it(`${what}`, async function () {
        const before = await h.admin.query('SELECT datname, datistemplate, datallowconn FROM pg_database ORDER BY datname');
        const err = await rejection(h.dbs.control.call('seal_template', args, AS_POSTGRES));
        expect(err.sqlstate).to.equal(sqlstate);
        expect(err.message).to.match(message);
        const after = await h.admin.query('SELECT datname, datistemplate, datallowconn FROM pg_database ORDER BY datname');
        expect(after.rows).to.deep.equal(before.rows);
      });
    }

    it('the database the caller is connected to', async function () {
      const err = await rejection(h.dbs.control.call('seal_template', ['tpl_carol'], { user: 'postgres', database: 'tpl_carol' }));
      expect(err.sqlstate).to.equal('55006');
      expect(err.message).to.equal('cannot seal the currently open database "tpl_carol"');
    });

    it('a database PGX minted', async function () {
      await h.dbs.router.route({ user: 'postgres', database: 'tdb_tpl_app__minted' });
      const err = await rejection(h.dbs.operations.seal('tdb_tpl_app__minted', 'postgres'));
      expect(err.sqlstate).to.equal('22023');
      expect(err.message).to.match(/minted by PGX/);
    });
  });
});
