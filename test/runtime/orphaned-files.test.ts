// A CREATE DATABASE copies the template's files into base/<oid> before its catalog row commits; a
// PostgreSQL that dies in between (a PANIC on a full disk, a kill) leaves the files and no database.
// The runtime removes such directories at start, before it creates anything; a database's own
// directory is never touched. The data directory is PostgreSQL's OS user's and the runtime may run as
// root: a base/ or base/<oid> that is a symlink leads the removal nowhere outside, and the removal
// runs with the OS user's rights.

import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from '../../src/log.js';
import { removeOrphanedDatabaseFiles } from '../../src/runtime/postgres/orphaned-files.js';
import type { SqlClient } from '../../src/runtime/postgres/sql-client.js';
import { queryOnce } from '../helpers/pg-once.js';
import { startTestRuntime } from '../helpers/runtime.js';
import { scratchDir } from '../helpers/scratch.js';

/** A catalog with only database oid 1, and the warnings logged. */
function fakes(): { client: SqlClient; logger: Logger; warnings: { event: string; dir: unknown }[] } {
  const warnings: { event: string; dir: unknown }[] = [];
  const client = { query: async () => ({ rows: [['1']], fields: ['oid'], command: 'SELECT 1' }) } as unknown as SqlClient;
  const logger: Logger = { error: () => {}, warn: (event, fields) => void warnings.push({ event, dir: fields?.dir }), info: () => {}, debug: () => {}, child: () => logger };
  return { client, logger, warnings };
}

/** The removal as the runtime's own user: the unit tests' stand-in for Supervisor.removeAsOsUser. */
const asRuntime = (dir: string) => fs.promises.rm(dir, { recursive: true, force: true });

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

  it("as root, removes only what PostgreSQL's OS user could remove itself", async function () {
    // The checks before a removal cannot pin its path (the OS user can swap a directory for a symlink
    // in between), so the removal runs with that user's rights. Here a root-owned directory inside an
    // orphan stands for whatever the OS user could not delete: it stays, the rest goes.
    if (process.getuid?.() !== 0) this.skip(); // the runtime switches to an OS user only as root
    let rt = await startTestRuntime();
    const dataDir = rt.dataDir;
    try {
      await queryOnce(rt.connection(), 'CREATE DATABASE kept');
      const { rows } = await queryOnce(rt.connection(), "SELECT oid::text AS oid FROM pg_database WHERE datname = 'kept'");
      const keptDir = path.join(dataDir, 'base', rows[0].oid as string);
      await rt.runtime.stop();
      fs.rmSync(rt.socketDir, { recursive: true, force: true });
      const orphan = path.join(dataDir, 'base', '987655');
      execFileSync('cp', ['-a', keptDir, orphan]); // the OS user's files, as PostgreSQL left them
      fs.mkdirSync(path.join(orphan, 'root-owned'), { mode: 0o755 });
      fs.writeFileSync(path.join(orphan, 'root-owned', 'file'), 'x');

      rt = await startTestRuntime({ dataDir });
      expect(fs.readdirSync(orphan), "what is left of the orphan: only root's").to.deep.equal(['root-owned']);
      expect(fs.readFileSync(path.join(orphan, 'root-owned', 'file'), 'utf8')).to.equal('x');
      expect(fs.existsSync(keptDir), "a database's own directory").to.equal(true);
    } finally {
      await rt.runtime.stop();
      fs.rmSync(rt.socketDir, { recursive: true, force: true });
      fs.rmSync(path.dirname(dataDir), { recursive: true, force: true });
    }
  });

  it('a base/ that is a symlink: the directory it points at is not touched', async () => {
    const dataDir = scratchDir('pgx-orphans-data-');
    const elsewhere = scratchDir('pgx-orphans-elsewhere-');
    try {
      fs.mkdirSync(path.join(elsewhere, '4242'));
      fs.writeFileSync(path.join(elsewhere, '4242', 'precious'), 'x');
      fs.symlinkSync(elsewhere, path.join(dataDir, 'base'));
      const { client, logger, warnings } = fakes();
      const removed = await removeOrphanedDatabaseFiles(dataDir, client, logger, asRuntime);
      expect(fs.existsSync(path.join(elsewhere, '4242', 'precious')), 'the directory base/ points at').to.equal(true);
      expect(removed).to.equal(0);
      expect(warnings).to.deep.equal([{ event: 'orphaned-database-files-skipped', dir: path.join(dataDir, 'base') }]);
    } finally {
      fs.rmSync(dataDir, { recursive: true, force: true });
      fs.rmSync(elsewhere, { recursive: true, force: true });
    }
  });

  it('a base/<oid> that is a symlink or a file is left alone; a real orphaned directory beside it goes', async () => {
    const dataDir = scratchDir('pgx-orphans-data-');
    const elsewhere = scratchDir('pgx-orphans-elsewhere-');
    try {
      const base = path.join(dataDir, 'base');
      fs.mkdirSync(path.join(base, '1'), { recursive: true });
      fs.mkdirSync(path.join(base, '5000'));
      fs.writeFileSync(path.join(elsewhere, 'precious'), 'x');
      fs.symlinkSync(elsewhere, path.join(base, '5001'));
      fs.writeFileSync(path.join(base, '5002'), 'not a directory');
      const { client, logger, warnings } = fakes();
      const removed = await removeOrphanedDatabaseFiles(dataDir, client, logger, asRuntime);
      expect(fs.readFileSync(path.join(elsewhere, 'precious'), 'utf8')).to.equal('x');
      expect(fs.readdirSync(base).sort()).to.deep.equal(['1', '5001', '5002']);
      expect(removed).to.equal(1);
      expect(warnings.map((w) => `${w.event} ${path.basename(String(w.dir))}`).sort()).to.deep.equal([
        'orphaned-database-files-removed 5000',
        'orphaned-database-files-skipped 5001',
        'orphaned-database-files-skipped 5002',
      ]);
    } finally {
      fs.rmSync(dataDir, { recursive: true, force: true });
      fs.rmSync(elsewhere, { recursive: true, force: true });
    }
  });
});
