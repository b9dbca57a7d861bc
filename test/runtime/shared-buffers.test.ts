// The runtime's own copies keep out of PostgreSQL's shared buffers, which are the tenants' cache and,
// once a buffer has been used, part of the runtime's memory for good (density counts every one):
// spares, cold mints and pgx_control (from template0, at a new runtime's first start) are all made
// with FILE_COPY, which copies files past the buffers (WAL_LOG copied each block through them).

import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import type { SqlClient } from '../../src/runtime/postgres/sql-client.js';
import { waitFor } from '../helpers/commands.js';
import { startTestRuntime } from '../helpers/runtime.js';
import { connectClient, createTemplateDatabase, startHarness } from './databases-harness.js';
import { scratchDir } from '../helpers/scratch.js';

/** Shared buffers holding pages of each database whose name matches `like`, by name. */
async function buffersOf(admin: SqlClient, like: string): Promise<Map<string, number>> {
  await admin.query('CREATE EXTENSION IF NOT EXISTS pg_buffercache');
  const { rows } = await admin.query(
    `SELECT d.datname, count(*) FROM pg_buffercache b JOIN pg_database d ON d.oid = b.reldatabase WHERE d.datname LIKE '${like}' GROUP BY 1`,
  );
  return new Map(rows.map((r) => [String(r[0]), Number(r[1])]));
}

/** The database's size in 8 kB blocks. */
async function blocksOf(admin: SqlClient, database: string): Promise<number> {
  const { rows } = await admin.query(`SELECT pg_catalog.pg_database_size('${database}') / 8192`);
  return Number(rows[0]![0]);
}

describe('runtime: its own copies leave shared buffers to the tenants', function () {
  this.timeout(120_000);

  it('makes spares without copying their blocks through shared buffers', async () => {
    const h = await startHarness({ settings: { poolSize: 2 } });
    try {
      await createTemplateDatabase(h, 'tpl_buffers');
      await h.dbs.operations.seal('tpl_buffers', 'postgres');
      await waitFor('2 spares', async () => (await h.dbs.operations.status()).pool.tpl_buffers?.ready === 2, 60_000);
      const templateBlocks = await blocksOf(h.admin, 'tpl_buffers');
      const spares = await buffersOf(h.admin, 'pgx_spare_%');
      // Copied through the buffers, each spare held every block of it (987 of a template1 copy);
      // what is left is the catalog pages its warm-up connect read.
      expect([...spares.values()]).to.have.length.at.most(2);
      for (const [spare, n] of spares) expect(n, `${spare}: ${n} buffers of a ${templateBlocks}-block template`).to.be.below(templateBlocks / 5);
    } finally {
      await h.stop();
    }
  });

  it('mints cold without copying the template through shared buffers', async () => {
    const h = await startHarness({ settings: { poolSize: 0 }, wire: true });
    try {
      await createTemplateDatabase(h, 'tpl_cold_buffers');
      await h.dbs.operations.seal('tpl_cold_buffers', 'postgres');
      const templateBlocks = await blocksOf(h.admin, 'tpl_cold_buffers');
      const c = await connectClient(h, 'tdb_tpl_cold_buffers__one');
      await c.end();
      expect((await h.dbs.operations.status()).mints.cold).to.equal(1);
      // With WAL_LOG the copy held 981 buffers of this 1,000-block template; its first session reads a few dozen.
      const n = (await buffersOf(h.admin, 'tdb_tpl_cold_buffers__one')).get('tdb_tpl_cold_buffers__one') ?? 0;
      expect(n, `${n} buffers of a ${templateBlocks}-block template`).to.be.below(templateBlocks / 5);
    } finally {
      await h.stop();
    }
  });

  it('creates pgx_control at a new runtime\'s first start without reading template0 through them', async () => {
    const dir = scratchDir('pgx-buffers-');
    const rt = await startTestRuntime({ dataDir: path.join(dir, 'data') });
    try {
      const admin = await rt.runtime.supervisor.connect('postgres', 'postgres');
      try {
        // With WAL_LOG, 794 of template0's blocks stayed in the buffers.
        expect((await buffersOf(admin, 'template0')).get('template0') ?? 0).to.equal(0);
      } finally {
        await admin.close();
      }
    } finally {
      await rt.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
