// An explicit create (the HTTP API's POST /v1/databases) is one runtime operation: the database, its
// settings and, when asked, a credential for it, all or nothing.

import { expect } from 'chai';
import { createTemplateDatabase, databaseExists, rejection, startHarness, type Harness } from './databases-harness.js';

const AS_POSTGRES = { user: 'postgres', database: 'postgres' };

describe('runtime: an explicit create, all or nothing', function () {
  this.timeout(60_000);
  let h: Harness;

  before(async function () {
    h = await startHarness({ settings: { poolSize: 0 } });
    await createTemplateDatabase(h, 'tpl_app');
    await h.dbs.control.call('seal_template', ['tpl_app'], AS_POSTGRES);
  });

  after(async function () {
    await h?.stop();
  });

  it('makes the database with its settings and the credential asked for', async function () {
    const created = await h.dbs.operations.create('tpl_app', { name: 'tdb_tpl_app__with_cred', user: 'postgres', settings: { pinned: true }, credential: { connectionLimit: 2 } });
    expect(created.name).to.equal('tdb_tpl_app__with_cred');
    expect(created.credential?.user).to.be.a('string');
    expect(created.credential?.password).to.be.a('string');
    expect(h.dbs.operations.database(created.name)?.pinned).to.equal(true);
    const { rows } = await h.admin.query(`SELECT rolconnlimit FROM pg_roles WHERE rolname = '${created.credential!.user}'`);
    expect(rows).to.deep.equal([['2']]);
  });

  it('answers credential null when none was asked for', async function () {
    const created = await h.dbs.operations.create('tpl_app', { name: 'tdb_tpl_app__no_cred', user: 'postgres' });
    expect(created.credential).to.equal(null);
    expect(await databaseExists(h, created.name)).to.equal(true);
  });

  it('drops the database again when its credential cannot be made, and the name can be asked for again', async function () {
    const err = await rejection(h.dbs.operations.create('tpl_app', { name: 'tdb_tpl_app__cred_fails', user: 'postgres', credential: { connectionLimit: -5 } }));
    expect(err.sqlstate).to.equal('22023');
    expect(await databaseExists(h, 'tdb_tpl_app__cred_fails')).to.equal(false);
    expect(h.dbs.operations.database('tdb_tpl_app__cred_fails')).to.equal(null);
    // A retry of the request creates both.
    const again = await h.dbs.operations.create('tpl_app', { name: 'tdb_tpl_app__cred_fails', user: 'postgres', credential: {} });
    expect(again.credential).to.not.equal(null);
    expect(await databaseExists(h, 'tdb_tpl_app__cred_fails')).to.equal(true);
  });
});
