// Copy-on-write databases on real filesystems: an XFS image with reflink and a btrfs image,
// loop-mounted (this needs root, as CI runs), each holding a runtime's data directory. The runtime must find that it can clone, seal
// templates with FILE_COPY, and mint databases that share their template's blocks: a branch of a
// 200 MB template must cost at most 5 MB; where spares cost no disk the default pool keeps 8 of them.
// The same runtime code on ext4 (the test machine's /tmp) must find that it cannot clone, copy
// templates with FILE_COPY all the same (a plain copy of the files), and keep a pool of 2.

import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { ApiClient } from '../../src/api/client.js';
import { probeStorage } from '../../src/runtime/postgres/storage-probe.js';
import { runCommand, waitFor } from '../helpers/commands.js';
import { queryOnce } from '../helpers/pg-once.js';
import { freshDataDir, startTestRuntime, type TestRuntime } from '../helpers/runtime.js';
import { diskTmpDir, scratchDir } from '../helpers/scratch.js';

const TOKEN = 'test-token-cow-0123456789abcdef';
const MB = 1024 * 1024;
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../..');

async function usedBytes(dir: string): Promise<number> {
  execFileSync('sync');
  const s = await fs.promises.statfs(dir);
  return (s.blocks - s.bfree) * s.bsize;
}

/** The filesystems that clone, as loop-mounted images made the way docs/storage.md says. */
const CLONING_FILESYSTEMS = [
  { name: 'xfs', label: 'XFS with reflink', mkfs: ['mkfs.xfs', '-q', '-m', 'reflink=1'] },
  { name: 'btrfs', label: 'btrfs', mkfs: ['mkfs.btrfs', '-q'] },
];

for (const filesystem of CLONING_FILESYSTEMS) describe(`runtime: copy-on-write databases on ${filesystem.label}`, function () {
  this.timeout(180_000);
  let work: string;
  let mountPoint: string;
  let rt: TestRuntime | undefined;
  let api: ApiClient;
  const branches: string[] = [];
  /** Used space before the first branch. */
  let emptyBefore = 0;

  /**
   * Used bytes once PostgreSQL has written its dirty buffers (CHECKPOINT) and the kernel its pages,
   * without the WAL: PostgreSQL keeps 16 MB segments around for reuse whatever the databases hold, so
   * they would swamp the few MB measured here. WAL files are never clones, so their size is their cost.
   */
  async function settledUsed(): Promise<number> {
    await queryOnce(rt!.connection('postgres'), 'CHECKPOINT');
    const wal = path.join(mountPoint, 'data', 'pg_wal');
    let walBytes = 0;
    for (const f of fs.readdirSync(wal)) walBytes += fs.statSync(path.join(wal, f)).blocks * 512;
    return (await usedBytes(mountPoint)) - walBytes;
  }

  before(async function () {
    if (process.getuid?.() !== 0) {
      // Reported as pending, never as a pass: CI runs as root and runs it.
      console.log(`    (needs root to loop-mount a ${filesystem.name} image)`);
      this.skip();
    }
    work = scratchDir('pgx-cow-');
    const image = path.join(work, `${filesystem.name}.img`);
    mountPoint = path.join(work, 'mnt');
    fs.mkdirSync(mountPoint);
    execFileSync('truncate', ['-s', '2G', image]);
    execFileSync(filesystem.mkfs[0]!, [...filesystem.mkfs.slice(1), image]);
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
    expect(status.storage).to.include({ filesystem: filesystem.name, clone: true });
    expect(status.storage.detail).to.include('copy-on-write');
    const doctor = await runCommand(process.execPath, [path.join(root, 'bin/pgx.js'), 'doctor', '--json', '--data-dir', path.join(mountPoint, 'data')], { cwd: root });
    const storage = (JSON.parse(doctor.stdout) as { checks: { name: string; verdict: string; detail: string }[] }).checks.find((c) => c.name === 'storage');
    expect(storage?.verdict).to.equal('ok');
    expect(storage?.detail).to.include(`${filesystem.name} clones files copy-on-write`);
  });

  it('still finds clones when another writer takes space between its readings of free space', async function () {
    // The other writer, made exact: the first reading after a clone sees 8 MB less free space than the
    // filesystem has (a second runtime's initdb beside the probe); the later readings are the
    // filesystem's own. One try would call that clone a full copy.
    let readings = 0;
    const free = async (dir: string): Promise<number> => {
      const s = await fs.promises.statfs(dir);
      readings++;
      return s.bfree * s.bsize - (readings === 2 ? 8 * MB : 0);
    };
    expect(await probeStorage(mountPoint, free)).to.include({ filesystem: filesystem.name, clone: true });
    expect(readings).to.equal(4);
  });

  // The bar: a branch of a 200 MB template adds <= 5 MB of used space (df after a checkpoint
  // and sync); a full copy would add 200 MB.
  it('seals a 200 MB template with FILE_COPY; each branch adds <= 5 MB of used space', async function () {
    const t = await api.buildTemplate({
      name: 'tpl_big',
      sql: "CREATE TABLE rows (id int PRIMARY KEY, pad text); INSERT INTO rows SELECT g, repeat(md5(g::text), 4) FROM generate_series(1, 1100000) g;",
    });
    expect(t.strategy).to.equal('FILE_COPY');
    const { rows: size } = await queryOnce(rt!.connection('postgres'), "SELECT pg_database_size('tpl_big')::int8 AS bytes");
    const templateBytes = Number(size[0].bytes);
    expect(templateBytes).to.be.greaterThan(200 * 1000 * 1000);

    emptyBefore = await settledUsed();
    for (let i = 0; i < 3; i++) {
      const before = await settledUsed();
      branches.push((await api.createDatabase({ template: 'tpl_big', pinned: true })).name);
      const grown = (await settledUsed()) - before;
      expect(grown, `branch ${i + 1}: ${(grown / MB).toFixed(1)} MB for a ${(templateBytes / MB).toFixed(0)} MB template`).to.be.at.most(5 * MB);
    }
    for (const db of branches) {
      const { rows } = await queryOnce(rt!.connection(db), 'SELECT count(*)::int AS n, sum(length(pad))::int8 AS bytes FROM rows');
      expect(rows, db).to.deep.equal([{ n: 1100000, bytes: '140800000' }]);
    }
  });

  it('writing to a branch grows only that branch; the template and the other branches are unchanged', async function () {
    const [a, b] = branches;
    const before = await settledUsed();
    await queryOnce(rt!.connection(a!), "UPDATE rows SET pad = 'changed' WHERE id % 100 = 0; DELETE FROM rows WHERE id > 1090000");
    // Scattered updates unshare the blocks they touch: the branch grows by those blocks (and WAL).
    expect((await settledUsed()) - before).to.be.greaterThan(1 * MB);
    const count = async (db: string): Promise<unknown> =>
      (await queryOnce(rt!.connection(db), "SELECT count(*)::int AS n, count(*) FILTER (WHERE pad = 'changed')::int AS changed FROM rows")).rows[0];
    expect(await count(a!)).to.deep.equal({ n: 1090000, changed: 10900 });
    expect(await count(b!)).to.deep.equal({ n: 1100000, changed: 0 });
    const fresh = (await api.createDatabase({ template: 'tpl_big', pinned: true })).name;
    branches.push(fresh);
    expect(await count(fresh)).to.deep.equal({ n: 1100000, changed: 0 });
  });

  it('dropping the branches gives the space back', async function () {
    for (const db of branches.splice(0)) await api.dropDatabase(db);
    // XFS frees the blocks of unlinked files in the background (deferred inode inactivation), btrfs
    // at its next transaction commit.
    let left = Infinity;
    await waitFor('the space to come back', async () => (left = (await settledUsed()) - emptyBefore) <= 5 * MB, 30_000).catch(() => undefined);
    expect(left, `${(left / MB).toFixed(1)} MB left after dropping every branch`).to.be.at.most(5 * MB);
  });

  it('a snapshot and a restore of a 200 MB database are clones too', async function () {
    const db = (await api.createDatabase({ template: 'tpl_big', pinned: true })).name;
    const before = await settledUsed();
    const snap = await api.snapshot(db, 'big_snap');
    expect(snap.strategy).to.equal('FILE_COPY');
    await queryOnce(rt!.connection(db), 'DROP TABLE rows; CREATE TABLE rows (id int)');
    await api.restore(db, 'big_snap');
    const grown = (await settledUsed()) - before;
    expect(grown, `${(grown / MB).toFixed(1)} MB for a snapshot and a restore`).to.be.at.most(10 * MB);
    const { rows } = await queryOnce(rt!.connection(db), 'SELECT count(*)::int AS n FROM rows');
    expect(rows).to.deep.equal([{ n: 1100000 }]);
  });

  it('lists the template and the snapshot with their size, and the blocks they share with their clones', async function () {
    execFileSync('sync');
    const items = await api.listTemplates();
    for (const name of ['tpl_big', 'big_snap']) {
      const disk = items.find((t) => t.name === name)?.disk;
      expect(disk, name).to.not.equal(undefined);
      expect(disk!.apparent_bytes, name).to.be.greaterThan(200 * 1000 * 1000);
      // The database restored from big_snap is a clone of it, and big_snap one of tpl_big: nearly
      // every block of each is shared (a full copy would share none).
      expect(disk!.shared_bytes, `${name}: ${JSON.stringify(disk)}`).to.be.greaterThan(150 * MB);
      expect(disk!.shared_bytes!).to.be.at.most(disk!.allocated_bytes);
    }
    const usage = (await api.status(true)).disk_usage!;
    expect(usage.clones_share_blocks).to.equal(true);
    // Counted as PostgreSQL counts them, the three 200 MB databases add up to more than the
    // filesystem holds of them: what the status says in clones_share_blocks.
    expect(usage.templates_mb + usage.snapshots_mb + usage.databases_mb).to.be.greaterThan(usage.used_mb);
  });

  it('keeps a deeper warm pool by default, as spares here cost no disk (--pool-size auto: 8), and reads their catalogs into the page cache once it rests', async function () {
    // A runtime of its own with the default --pool-size, on the same filesystem: the one above keeps
    // none, so the space it measures is its databases' alone.
    const dataDir = path.join(mountPoint, 'data-auto');
    const auto = await startTestRuntime({ dataDir, apiPort: 0, apiToken: TOKEN });
    try {
      const autoApi = new ApiClient({ url: `http://127.0.0.1:${auto.runtime.api!.port}`, token: TOKEN });
      await autoApi.buildTemplate({ name: 'tpl_auto', sql: 'CREATE TABLE t (x int)' });
      expect((await autoApi.status()).pool.tpl_auto!.size).to.equal(8);
      await waitFor('8 spares of tpl_auto ready', async () => (await autoApi.status()).pool.tpl_auto!.ready === 8, 60_000);
      // A clone's page cache starts empty here (it is the file's, not the shared blocks'): unread, a
      // spare's first client would read its catalogs from disk (catalog-prefetch.ts). Cached: each
      // catalog file (system catalogs, file numbers below 16384) in full, up to 1 MB.
      const { rows } = await queryOnce(auto.connection('postgres'), "SELECT oid FROM pg_catalog.pg_database WHERE datname LIKE 'pgx\\_spare\\_%'");
      expect(rows).to.have.length(8);
      const cachedShare = (): number => {
        let cached = 0;
        let wanted = 0;
        for (const { oid } of rows as { oid: number }[]) {
          const dir = path.join(dataDir, 'base', String(oid));
          const files = fs.readdirSync(dir).filter((f) => Number(/^([0-9]+)(_fsm)?$/.exec(f)?.[1] ?? Infinity) < 16384);
          // fincore -b -n -r: resident bytes, pages, size, file; one line per file.
          for (const line of execFileSync('fincore', ['-b', '-n', '-r', ...files], { cwd: dir }).toString().trim().split('\n')) {
            const [res, , size] = line.split(' ').map(Number);
            cached += res!;
            wanted += Math.min(size!, MB);
          }
        }
        return cached / wanted;
      };
      await waitFor("the spares' catalogs in the page cache", async () => cachedShare() >= 0.95, 30_000);
    } finally {
      await auto.stop();
      fs.rmSync(path.join(mountPoint, 'data-auto'), { recursive: true, force: true });
    }
  });
});

describe('runtime: no clones on ext4', function () {
  this.timeout(60_000);
  let rt: TestRuntime;
  let dataDir: string | undefined;

  before(async function () {
    const fsType = (await fs.promises.statfs(diskTmpDir())).type;
    // The test machine's /tmp is ext4 (0xef53); elsewhere this describe checks nothing it can know.
    if (fsType !== 0xef53) {
      console.log(`    (${diskTmpDir()} is not ext4)`);
      this.skip();
    }
    // On disk, not the tmpfs npm test keeps its other runtimes on.
    dataDir = await freshDataDir(diskTmpDir());
    // The default --pool-size (auto), which keeps 2 spares where files are copied.
    rt = await startTestRuntime({ apiPort: 0, apiToken: TOKEN, dataDir });
  });

  after(async function () {
    await rt?.stop();
    if (dataDir) fs.rmSync(path.dirname(dataDir), { recursive: true, force: true });
  });

  it('reports that it cannot clone, and copies small templates with FILE_COPY all the same', async function () {
    const api = new ApiClient({ url: `http://127.0.0.1:${rt.runtime.api!.port}`, token: TOKEN });
    const status = await api.status();
    expect(status.storage).to.include({ filesystem: 'ext4', clone: false });
    expect(status.storage.detail).to.match(/cannot clone files here \(FICLONE: E\w+\)/);
    expect(status.storage.detail).to.include('reflink=1');
    const t = await api.buildTemplate({ name: 'tpl_small', sql: 'CREATE TABLE t (x int)' });
    expect(t.strategy).to.equal('FILE_COPY');
    expect((await api.status()).pool.tpl_small!.size, '--pool-size auto where files are copied').to.equal(2);
    // Nothing is shared where nothing clones: unknown (null), never a guessed 0.
    const listed = (await api.listTemplates()).find((x) => x.name === 'tpl_small')!;
    expect(listed.disk!.apparent_bytes).to.be.greaterThan(1_000_000);
    expect(listed.disk!.shared_bytes).to.equal(null);
  });
});
