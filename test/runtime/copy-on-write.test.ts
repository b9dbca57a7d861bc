// Copy-on-write databases on a real filesystem: an XFS image with reflink, loop-mounted (this needs
// root, as CI runs), holds the runtime's data directory. The runtime must find that it can clone, seal
// templates with FILE_COPY, and mint databases that share their template's blocks: minting five
// copies of a 64 MB template must cost a few MB, not 320. The same runtime code on ext4 (the test
// machine's /tmp) must find that it cannot clone and copy small templates with WAL_LOG.

import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ApiClient } from '../../src/api/client.js';
import { runCommand } from '../helpers/commands.js';
import { queryOnce } from '../helpers/pg-once.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';

const TOKEN = 'test-token-cow-0123456789abcdef';
const MB = 1024 * 1024;
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../..');

async function usedBytes(dir: string): Promise<number> {
  execFileSync('sync');
  const s = await fs.promises.statfs(dir);
  return (s.blocks - s.bfree) * s.bsize;
}

describe('runtime: copy-on-write databases on XFS with reflink', function () {
  this.timeout(180_000);
  let work: string;
  let mountPoint: string;
  let rt: TestRuntime | undefined;
  let api: ApiClient;

  before(async function () {
    if (process.getuid?.() !== 0) {
      // Reported as pending, never as a pass: CI runs as root and runs it.
      console.log('    (needs root to loop-mount an XFS image)');
      this.skip();
    }
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'pgx-cow-'));
    fs.chmodSync(work, 0o755);
    const image = path.join(work, 'xfs.img');
    mountPoint = path.join(work, 'mnt');
    fs.mkdirSync(mountPoint);
    execFileSync('truncate', ['-s', '2G', image]);
    execFileSync('mkfs.xfs', ['-q', '-m', 'reflink=1', image]);
    execFileSync('mount', ['-o', 'loop', image, mountPoint]);
    fs.chmodSync(mountPoint, 0o755);
    rt = await startTestRuntime({ dataDir: path.join(mountPoint, 'data'), apiPort: 0, apiToken: TOKEN, poolSize: 0 });
    api = new ApiClient({ url: `http://127.0.0.1:${rt.runtime.api!.port}`, token: TOKEN });
  });

  after(async function () {
    await rt?.stop();
    if (mountPoint && fs.existsSync(mountPoint)) execFileSync('umount', [mountPoint]);
    if (work) fs.rmSync(work, { recursive: true, force: true });
  });

  it('finds at start that the data directory clones, and says so in the status', async function () {
    const status = await api.status();
    expect(status.storage).to.include({ filesystem: 'xfs', clone: true });
    expect(status.storage.detail).to.include('copy-on-write');
    const doctor = await runCommand(process.execPath, [path.join(root, 'bin/pgx.js'), 'doctor', '--json', '--data-dir', path.join(mountPoint, 'data')], { cwd: root });
    const storage = (JSON.parse(doctor.stdout) as { checks: { name: string; verdict: string; detail: string }[] }).checks.find((c) => c.name === 'storage');
    expect(storage?.verdict).to.equal('ok');
    expect(storage?.detail).to.include('xfs clones files copy-on-write');
  });

  it('seals a template with FILE_COPY and mints five copies of 64 MB for a few MB', async function () {
    const t = await api.buildTemplate({
      name: 'tpl_big',
      sql: "CREATE TABLE rows (id int PRIMARY KEY, pad text); INSERT INTO rows SELECT g, repeat(md5(g::text), 4) FROM generate_series(1, 300000) g;",
    });
    expect(t.strategy).to.equal('FILE_COPY');
    const { rows: size } = await queryOnce(rt!.connection('postgres'), "SELECT pg_database_size('tpl_big')::int8 AS bytes");
    const templateBytes = Number(size[0].bytes);
    expect(templateBytes).to.be.greaterThan(60 * MB);

    const before = await usedBytes(mountPoint);
    const names: string[] = [];
    for (let i = 0; i < 5; i++) names.push((await api.createDatabase({ template: 'tpl_big', pinned: true })).name);
    const grown = (await usedBytes(mountPoint)) - before;
    // A full copy each would be 5 x the template; clones share its blocks (WAL and catalog writes aside).
    expect(grown, `${(grown / MB).toFixed(1)} MB used by 5 copies of ${(templateBytes / MB).toFixed(0)} MB`).to.be.lessThan(templateBytes / 2);

    const { rows } = await queryOnce(rt!.connection(names[0]!), 'SELECT count(*)::int AS n, sum(length(pad))::int8 AS bytes FROM rows');
    expect(rows).to.deep.equal([{ n: 300000, bytes: '38400000' }]);
  });

  it('a clone written to diverges from its template and its siblings (copy on write, not shared writes)', async function () {
    const [a, b] = (await api.listDatabases()).filter((d) => d.template === 'tpl_big').map((d) => d.name);
    await queryOnce(rt!.connection(a!), "UPDATE rows SET pad = 'changed' WHERE id <= 1000; DELETE FROM rows WHERE id > 299000");
    const count = async (db: string): Promise<unknown> =>
      (await queryOnce(rt!.connection(db), "SELECT count(*)::int AS n, count(*) FILTER (WHERE pad = 'changed')::int AS changed FROM rows")).rows[0];
    expect(await count(a!)).to.deep.equal({ n: 299000, changed: 1000 });
    expect(await count(b!)).to.deep.equal({ n: 300000, changed: 0 });
    const fresh = (await api.createDatabase({ template: 'tpl_big' })).name;
    expect(await count(fresh)).to.deep.equal({ n: 300000, changed: 0 });
  });

  it('a snapshot and a restore of a 64 MB database are clones too', async function () {
    const db = (await api.listDatabases()).find((d) => d.template === 'tpl_big')!.name;
    const before = await usedBytes(mountPoint);
    const snap = await api.snapshot(db, 'big_snap');
    expect(snap.strategy).to.equal('FILE_COPY');
    await queryOnce(rt!.connection(db), 'DELETE FROM rows WHERE id > 1000');
    await api.restore(db, 'big_snap');
    const grown = (await usedBytes(mountPoint)) - before;
    expect(grown, `${(grown / MB).toFixed(1)} MB for a snapshot and a restore`).to.be.lessThan(32 * MB);
    const { rows } = await queryOnce(rt!.connection(db), 'SELECT count(*)::int AS n FROM rows');
    expect(rows[0].n).to.be.greaterThan(290_000);
  });
});

describe('runtime: no clones on ext4', function () {
  this.timeout(60_000);
  let rt: TestRuntime;

  before(async function () {
    const fsType = (await fs.promises.statfs(os.tmpdir())).type;
    // The test machine's /tmp is ext4 (0xef53); elsewhere this describe checks nothing it can know.
    if (fsType !== 0xef53) {
      console.log(`    (${os.tmpdir()} is not ext4)`);
      this.skip();
    }
    rt = await startTestRuntime({ apiPort: 0, apiToken: TOKEN, poolSize: 0 });
  });

  after(async function () {
    await rt?.stop();
  });

  it('reports that it cannot clone, and copies small templates with WAL_LOG', async function () {
    const api = new ApiClient({ url: `http://127.0.0.1:${rt.runtime.api!.port}`, token: TOKEN });
    const status = await api.status();
    expect(status.storage).to.include({ filesystem: 'ext4', clone: false });
    expect(status.storage.detail).to.match(/cannot clone files here \(FICLONE: E\w+\)/);
    expect(status.storage.detail).to.include('reflink=1');
    const t = await api.buildTemplate({ name: 'tpl_small', sql: 'CREATE TABLE t (x int)' });
    expect(t.strategy).to.equal('WAL_LOG');
  });
});
