// The status document and the control-function surface: field names pinned (a rename fails here),
// values observed, who may ask, and functions not there yet.

import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { processTree } from '../../src/runtime/postgres/memory.js';
import { PINNED_STATUS_KEYS, keyPaths } from '../helpers/status-keys.js';
import { createTemplateDatabase, rejection, startHarness, type Harness } from './databases-harness.js';


describe('runtime: status and control functions', function () {
  this.timeout(60_000);
  let h: Harness;

  before(async function () {
    h = await startHarness({ settings: { poolSize: 1 } });
    await h.admin.query('CREATE ROLE alice LOGIN CREATEDB; CREATE ROLE bob LOGIN');
    await createTemplateDatabase(h, 'tpl_app');
    await h.dbs.operations.seal('tpl_app', 'postgres');
    await h.dbs.router.route({ user: 'alice', database: 'tdb_tpl_app__alice' });
  });

  after(async function () {
    await h?.stop();
  });

  it('keeps its field names', async function () {
    const status = JSON.parse(await h.dbs.control.call('runtime_status', [], { user: 'postgres', database: 'postgres' }));
    expect(keyPaths(status).sort()).to.deep.equal([...PINNED_STATUS_KEYS].sort());
  });

  it('reports observed values', async function () {
    const status = await h.dbs.operations.status();
    expect(status.runtime.pid).to.equal(process.pid);
    expect(status.runtime.postgres_pid).to.equal(h.rt.runtime.supervisor.pid);
    expect(status.runtime.postgres_version).to.match(/^18\./);
    // The tree is this process, the postmaster and its children (at least the checkpointer, the
    // background writer, the walwriter, autovacuum launcher and our own admin sessions).
    expect(status.memory.processes).to.be.at.least(5);
    expect(status.memory.pss_mb).to.be.greaterThan(10);
    expect(status.memory.rss_mb).to.be.at.least(status.memory.pss_mb);
    expect(status.databases.ephemeral).to.equal(1);
    expect(status.databases.templates).to.equal(1);
    expect(status.pool.tpl_app!.size).to.equal(1);
    expect(status.mints.warm + status.mints.cold).to.equal(1);
    expect(status.mints.latency_ms.mean).to.be.greaterThan(0);
    expect(status.mints.latency_ms.p99).to.be.at.least(status.mints.latency_ms.mean);
  });

  it('answers the owner of the caller\'s database and superusers; others get 42501', async function () {
    await h.dbs.control.call('runtime_status', [], { user: 'alice', database: 'tdb_tpl_app__alice' });
    const err = await rejection(h.dbs.control.call('runtime_status', [], { user: 'bob', database: 'postgres' }));
    expect(err.sqlstate).to.equal('42501');
    expect(err.message).to.equal('permission denied for function pgx_runtime_status');
  });

  it('answers snapshot and restore of a database that does not exist with 3D000 (snapshots.test.ts has the rest)', async function () {
    for (const fn of ['snapshot_database', 'restore_database'] as const) {
      const err = await rejection(h.dbs.control.call(fn, ['tdb_tpl_app__nobody', 'snap'], { user: 'postgres', database: 'postgres' }));
      expect(err.sqlstate).to.equal('3D000');
      expect(err.message).to.equal('database "tdb_tpl_app__nobody" does not exist');
    }
  });
});

describe('runtime/memory processTree', function () {
  it('finds children and grandchildren, and nothing outside the tree', async function () {
    // sh forks a sleep and waits: node -> sh -> sleep.
    const sh = spawn('sh', ['-c', 'sleep 30 & echo $!; wait'], { stdio: ['ignore', 'pipe', 'ignore'] });
    let grandchild = 0;
    try {
      grandchild = Number(await new Promise<string>((resolve) => sh.stdout!.once('data', (d: Buffer) => resolve(d.toString().trim()))));
      const tree = await processTree(process.pid);
      expect(tree[0]).to.equal(process.pid);
      expect(tree).to.include(sh.pid);
      expect(tree).to.include(grandchild);
      expect(tree).not.to.include(1);
      expect(await processTree(sh.pid!)).to.have.members([sh.pid!, grandchild]);
    } finally {
      if (grandchild > 0) process.kill(grandchild, 'SIGKILL');
      sh.kill('SIGKILL');
    }
  });
});
