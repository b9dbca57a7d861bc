// A CREATE DATABASE copies the template's files into base/<oid> before its catalog row commits; a
// PostgreSQL that dies in between (a PANIC on a full disk, a kill) leaves the files and no database.
// The runtime removes such directories at start, before it creates anything; a database's own
// directory is never touched.

import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { queryOnce } from '../helpers/pg-once.js';
import { startTestRuntime } from '../helpers/runtime.js';

describe('runtime: database files with no database', function () {
  this.timeout(60_000);

  it('are removed at start; every database keeps its own', async function () {
    let rt = await startTestRuntime();
    const dataDir = rt.dataDir;
    try {
      await queryOnce(rt.connection(), 'CREATE DATABASE kept');
      await queryOnce(rt.connection('kept'), "CREATE TABLE t AS SELECT 'still here' AS v");
      const { rows } = await queryOnce(rt.connection(), "SELECT oid::text AS oid FROM pg_database WHERE datname = 'kept'");
      const keptDir = path.join(dataDir, 'base', rows[0].oid as string);
      await rt.runtime.stop();
      fs.rmSync(rt.socketDir, { recursive: true, force: true });
      // What a CREATE DATABASE that PostgreSQL did not survive leaves: a copy of a database's files
      // under an oid no pg_database row names.
      const orphan = path.join(dataDir, 'base', '987654');
      execFileSync('cp', ['-a', keptDir, orphan]);
      expect(fs.readdirSync(orphan).length).to.be.greaterThan(0);

      rt = await startTestRuntime({ dataDir });
      expect(fs.existsSync(orphan), 'the orphaned directory').to.equal(false);
      expect(fs.existsSync(keptDir), "a database's own directory").to.equal(true);
      expect((await queryOnce(rt.connection('kept'), 'SELECT v FROM t')).rows).to.deep.equal([{ v: 'still here' }]);
    } finally {
      await rt.runtime.stop();
      fs.rmSync(rt.socketDir, { recursive: true, force: true });
      fs.rmSync(path.dirname(dataDir), { recursive: true, force: true });
    }
  });
});
