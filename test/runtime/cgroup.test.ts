// The runtime in a real memory cgroup (root only; cgroup v1 or v2, whichever holds the memory
// controller here): the limit is read from the kernel's own files, nested cgroups included; the
// runtime limit derived from it (75%) answers 53200 before the kernel's OOM killer acts; and when the
// kernel does act (a runtime limit set above the cgroup's), it takes a backend, never the postmaster
// or node, and after PostgreSQL's crash restart the runtime serves every tenant again by itself.
// v2 layouts without a v2 memory hierarchy are covered by the fixture files in memory-limits.test.ts.

import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { createCgroup, memoryHierarchy, type TestCgroup } from '../helpers/cgroup.js';
import { freePort, processAlive, runCommand, waitFor } from '../helpers/commands.js';
import { copySeed } from '../helpers/runtime.js';
import { diskTmpDir, scratchDir } from '../helpers/scratch.js';

const PROJECT_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const MB = 2 ** 20;
/** Builds a tuplestore and a sort in memory until stopped: about 1.5 GB if nothing stops it. */
const RUNAWAY = "SELECT count(*) FROM (SELECT g, repeat('x', 20) AS pad FROM generate_series(1, 20000000) g ORDER BY g DESC) s";

interface Failure {
  code?: string;
  message: string;
}

interface Runtime {
  child: ChildProcess;
  port: number;
  /** The runtime's JSON log lines so far. */
  log(): Array<Record<string, unknown>>;
  stop(): Promise<void>;
}

/** CAP_SYS_RESOURCE (bit 24) in our effective capabilities: needed to lower an oom_score_adj. */
function mayLowerOomScore(): boolean {
  const m = /^CapEff:\s+([0-9a-f]+)$/m.exec(fs.readFileSync('/proc/self/status', 'utf8'));
  return m !== null && (BigInt(`0x${m[1]}`) & (1n << 24n)) !== 0n;
}

const OVER_RUNTIME_OR_CGROUP =
  /^53200 canceling statement due to memory limit: (the runtime's sessions used \d+ MB, over the runtime limit of 384 MB|the runtime's cgroup held \d+ MB it cannot reclaim, over 460 MB \(90% of its limit of 512 MB\))$/;

/** Anonymous and shared memory charged to a cgroup (what reclaim cannot free), MB. */
function unreclaimableMb(cg: TestCgroup): number {
  const stat = fs.readFileSync(path.join(cg.dir, 'memory.stat'), 'utf8');
  const keys = cg.version === 1 ? ['total_rss', 'total_shmem'] : ['anon', 'shmem'];
  return keys.reduce((sum, k) => sum + Number(new RegExp(`^${k} (\\d+)$`, 'm').exec(stat)?.[1] ?? 0), 0) / MB;
}

const score = (pid: number): number => Number(fs.readFileSync(`/proc/${pid}/oom_score_adj`, 'utf8').trim());

describe('runtime: in a real memory cgroup', function () {
  this.timeout(240_000);
  const cleanups: Array<() => Promise<void>> = [];
  const clients: pg.Client[] = [];

  before(function () {
    if (process.getuid?.() !== 0 || memoryHierarchy() === null) this.skip(); // needs root and a memory controller
  });

  afterEach(async function () {
    await Promise.all(clients.splice(0).map((c) => c.end().catch(() => undefined)));
    // Runtimes first (they are inside the cgroups), then the cgroups, even when the test failed.
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch((err: unknown) => console.error('cleanup failed:', err));
  });

  function cgroup(limitBytes: number): TestCgroup {
    const cg = createCgroup(limitBytes);
    cleanups.push(() => cg.remove());
    return cg;
  }

  /** `pgx start` as a child process moved into `cg` before it execs node, so PostgreSQL starts inside. */
  async function startIn(cg: TestCgroup, extra: string[] = []): Promise<Runtime> {
    // On disk: files on a tmpfs would count against the cgroup as its memory.
    const base = scratchDir('pgx-cgroup-', diskTmpDir());
    const dataDir = path.join(base, 'data');
    copySeed(dataDir);
    const port = await freePort();
    const argv = [process.execPath, 'bin/pgx.js', 'start', '--data-dir', dataDir, '--port', String(port), '--socket-dir', base, '--log-format', 'json', '--pool-size', '0', ...extra];
    const [cmd, ...args] = cg.wrap(argv);
    const child = spawn(cmd!, args, { cwd: PROJECT_ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, PGX_CONTAINER: '' } });
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    const lines: string[] = [];
    createInterface({ input: child.stderr! }).on('line', (l) => lines.push(l));
    const runtime: Runtime = {
      child,
      port,
      log: () => lines.flatMap((l) => {
        try {
          return [JSON.parse(l) as Record<string, unknown>];
        } catch {
          return [];
        }
      }),
      async stop() {
        if (child.exitCode === null && child.signalCode === null) {
          child.kill('SIGINT');
          const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
          await exited;
          clearTimeout(timer);
        }
        fs.rmSync(base, { recursive: true, force: true });
      },
    };
    cleanups.push(() => runtime.stop());
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`pgx start printed no ready line in 60 s:\n${lines.join('\n')}`)), 60_000);
      createInterface({ input: child.stdout! }).on('line', (line) => {
        if (line.startsWith('PGX ready')) {
          clearTimeout(timer);
          resolve();
        }
      });
      void exited.then(() => {
        clearTimeout(timer);
        reject(new Error(`pgx start exited before it was ready:\n${lines.join('\n')}`));
      });
    });
    return runtime;
  }

  async function connect(rt: Runtime, database: string, onError?: (e: Failure) => void): Promise<pg.Client> {
    const client = new pg.Client({ host: '127.0.0.1', port: rt.port, user: 'postgres', database });
    client.on('error', (e: Failure) => onError?.(e));
    await client.connect();
    clients.push(client);
    return client;
  }

  async function status(rt: Runtime): Promise<{ runtime: { postgres_pid: number }; limits: { memory: Record<string, unknown> } }> {
    const c = await connect(rt, 'postgres');
    const { rows } = await c.query('SELECT pgx_runtime_status() AS s');
    await c.end();
    return JSON.parse(rows[0].s as string);
  }

  /** A sealed template tenants mint their databases from by connecting to tdb_tpl_cg__NAME. */
  async function template(rt: Runtime): Promise<void> {
    const admin = await connect(rt, 'postgres');
    await admin.query('CREATE DATABASE tpl_cg');
    const tpl = await connect(rt, 'tpl_cg');
    await tpl.query("CREATE TABLE t (v text); INSERT INTO t VALUES ('kept')");
    await tpl.end();
    await admin.query("SELECT pgx_seal_template('tpl_cg')");
    await admin.end();
  }

  it('reads the limit from the kernel: its own cgroup, and the tightest ancestor from a nested one', async function () {
    const cg = cgroup(512 * MB);
    const inner = cg.child('inner'); // no limit of its own: the parent's 512 MB is the one that holds
    // The kernel flushes a cgroup's memory.stat lazily (up to every 2 s): the child reads it until its
    // buffer shows, for 5 s at most (CI read 34 of its 64 MB at once, 2026-12-04).
    const read =
      "const m = await import(process.argv[1]); const l = await m.cgroupLimit(); const big = Buffer.alloc(64 * 2 ** 20, 1);" +
      'let u = await m.unreclaimableBytes(l); for (let i = 0; i < 50 && u < big.length; i++) { await new Promise((r) => setTimeout(r, 100)); u = await m.unreclaimableBytes(l); }' +
      "console.log(JSON.stringify([await m.cgroupMemoryLimit(), l.dir, u, big.length, (await import('node:fs')).readFileSync('/proc/self/cgroup', 'utf8')]))";
    const module = path.join(PROJECT_ROOT, 'dist/src/runtime/postgres/cgroup.js');
    for (const [group, want] of [[cg, 512 * MB], [inner, 512 * MB]] as const) {
      const [cmd, ...args] = group.wrap([process.execPath, '--input-type=module', '-e', read, module]);
      const result = await runCommand(cmd!, args, { timeoutMs: 30_000 });
      expect(result.code, result.stderr).to.equal(0);
      const [limit, dir, unreclaimable, , membership] = JSON.parse(result.stdout) as [number | null, string, number, number, string];
      expect(membership, 'the child ran inside the cgroup').to.contain(group.cgroupPath);
      expect(limit).to.equal(want);
      expect(dir, 'the limit is the outer cgroup’s').to.equal(cg.dir);
      // The child's own 64 MB buffer (anonymous memory) is charged there and counted.
      expect(unreclaimable).to.be.within(64 * MB, 256 * MB);
    }
    // `pgx doctor` run inside the nested cgroup reports the limit that holds there.
    const [cmd, ...args] = inner.wrap([process.execPath, 'bin/pgx.js', 'doctor', '--json']);
    const doctor = await runCommand(cmd!, args, { cwd: PROJECT_ROOT, timeoutMs: 60_000 });
    const checks = (JSON.parse(doctor.stdout) as { checks: Array<{ name: string; detail: string }> }).checks;
    expect(checks.find((c) => c.name === 'memory')?.detail).to.equal(`cgroup memory limit 512 MB (cgroup v${cg.version}, ${cg.dir})`);
  });

  it('the runtime limit derived from the cgroup answers 53200 before the kernel acts', async function () {
    const cg = cgroup(512 * MB);
    const rt = await startIn(cg);
    const s = await status(rt);
    expect(s.limits.memory.cgroup_mb).to.equal(512);
    expect(s.limits.memory.runtime_mb, '75% of the cgroup limit').to.equal(384);
    expect(s.limits.memory.cgroup_guard_mb, '90% of the cgroup limit').to.equal(460);
    const postmaster = s.runtime.postgres_pid;
    expect(cg.pids(), 'node and PostgreSQL run inside the cgroup').to.include.members([rt.child.pid!, postmaster]);
    await template(rt);

    // Four tenants each sort about 125 MB at once: 500 MB of backends, past the 384 MB runtime limit
    // and, with node and shared buffers, past the cgroup's 512 MB.
    const tenants = await Promise.all(['a', 'b', 'c', 'd'].map((t) => connect(rt, `tdb_tpl_cg__${t}`)));
    await Promise.all(tenants.map((c) => c.query("SET work_mem = '1GB'")));
    const results = await Promise.allSettled(
      tenants.map((c) => c.query('SELECT count(*), pg_sleep(2) FROM (SELECT g FROM generate_series(1, 2000000) g ORDER BY g DESC) s')),
    );
    const rejected = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected').map((r) => r.reason as Failure);
    expect(rejected.length, 'the runtime limit canceled a statement').to.be.greaterThan(0);
    for (const e of rejected) expect(`${e.code} ${e.message}`).to.match(OVER_RUNTIME_OR_CGROUP);
    expect(cg.oomKills(), "the kernel's OOM killer did not act").to.equal(0);
    for (const c of tenants) expect((await c.query('SELECT v FROM t')).rows).to.deep.equal([{ v: 'kept' }]);
    expect((await status(rt)).runtime.postgres_pid, 'the same postmaster').to.equal(postmaster);
  });

  it('the cgroup guard answers 53200 where shared buffers leave tenants less than the runtime limit', async function () {
    const cg = cgroup(512 * MB);
    // 192 MB of shared buffers, filled: with 384 MB of tenant backends on top, the kernel would kill.
    const rt = await startIn(cg, ['-c', 'shared_buffers=192MB']);
    await template(rt);
    const filler = await connect(rt, 'tdb_tpl_cg__filler');
    // A plain INSERT goes through shared buffers (COPY and CREATE TABLE AS would use a small ring).
    await filler.query("CREATE TABLE fill (pad text); INSERT INTO fill SELECT repeat('x', 1500) FROM generate_series(1, 110000)");
    const held = unreclaimableMb(cg);
    expect(held, 'shared buffers filled, charged to the cgroup').to.be.greaterThan(192);
    const tenants = await Promise.all(['a', 'b', 'c', 'd'].map((t) => connect(rt, `tdb_tpl_cg__${t}`)));
    await Promise.all(tenants.map((c) => c.query("SET work_mem = '1GB'")));
    const results = await Promise.allSettled(
      tenants.map((c) => c.query('SELECT count(*), pg_sleep(2) FROM (SELECT g FROM generate_series(1, 2000000) g ORDER BY g DESC) s')),
    );
    const rejected = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected').map((r) => r.reason as Failure);
    expect(rejected.some((e) => /the runtime's cgroup held \d+ MB it cannot reclaim, over 460 MB \(90% of its limit of 512 MB\)$/.test(e.message)), `the guard canceled: ${rejected.map((e) => e.message).join('; ')}`).to.equal(true);
    for (const e of rejected) expect(`${e.code} ${e.message}`).to.match(OVER_RUNTIME_OR_CGROUP);
    expect(cg.oomKills(), "the kernel's OOM killer did not act").to.equal(0);
    for (const c of tenants) expect((await c.query('SELECT 1 AS one')).rows).to.deep.equal([{ one: 1 }]);
    expect(((await status(rt)).limits.memory.canceled as { cgroup: number }).cgroup).to.be.greaterThan(0);
  });

  it("when the kernel's OOM killer acts it takes a backend, not the postmaster or node; the runtime comes back by itself", async function () {
    const cg = cgroup(512 * MB);
    // A runtime limit above the cgroup's (the runtime warns): nothing stops the runaway but the kernel.
    const rt = await startIn(cg, ['--runtime-memory-limit', '100000']);
    expect(rt.log().some((l) => l.message === 'runtime-memory-limit-near-cgroup-limit')).to.equal(true);
    const postmaster = (await status(rt)).runtime.postgres_pid;
    await template(rt);
    const privileged = mayLowerOomScore();
    // Where the runtime may lower scores: postmaster -1000, node -999, backends 0. Where it may not
    // (this sandbox lacks CAP_SYS_RESOURCE): node and postmaster keep ours, backends raise to 1000.
    const inherited = score(process.pid);
    expect(score(postmaster)).to.equal(privileged ? -1000 : inherited);
    expect(score(rt.child.pid!)).to.equal(privileged ? -999 : inherited);

    // A neighbour tenant inside a transaction, another whose backend waits idle in the pool.
    const notices: string[] = [];
    const neighbour = await connect(rt, 'tdb_tpl_cg__neighbour');
    neighbour.on('notice', (n: { code?: string; message?: string }) => void notices.push(`${n.code} ${n.message}`));
    await neighbour.query("BEGIN; INSERT INTO t VALUES ('in flight')");
    const pooled = await connect(rt, 'tdb_tpl_cg__pooled');
    await pooled.query("INSERT INTO t VALUES ('committed')");
    await pooled.end();

    const hog = await connect(rt, 'tdb_tpl_cg__hog');
    const hogPid = (await hog.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number;
    expect(score(hogPid)).to.equal(privileged ? 0 : 1000);
    await hog.query("SET work_mem = '4GB'");
    const err = await hog.query(RUNAWAY).then(() => null, (e: Failure) => e);
    expect(err, 'the runaway did not finish').to.not.equal(null);

    // The kernel killed the runaway's backend, and only it.
    expect(cg.oomKills(), "the kernel's OOM killer acted").to.equal(1);
    await waitFor('PostgreSQL to log the killed backend', () => rt.log().some((l) => String(l.text).includes('terminated by signal 9')));
    const killed = rt.log().find((l) => String(l.text).includes('terminated by signal 9'))!;
    expect(killed.text).to.equal(`client backend (PID ${hogPid}) was terminated by signal 9: Killed`);
    expect(await processAlive(postmaster), 'the postmaster lives').to.equal(true);
    expect(rt.child.exitCode, 'node lives').to.equal(null);
    expect(await processAlive(rt.child.pid!)).to.equal(true);

    // PostgreSQL's crash restart ends every session: the neighbour is told 57P02 and its open
    // transaction is rolled back. The runtime comes back by itself: the same postmaster accepts
    // connections again once recovery is done, for every tenant, minting included.
    const neighbourErr = await neighbour.query('SELECT 1').then(() => null, (e: Failure) => e);
    expect(neighbourErr, 'the neighbour session was cut by the crash restart').to.not.equal(null);
    expect(notices.join('; ')).to.contain('57P02 terminating connection because of crash of another server process');
    await waitFor('the runtime to serve again', async () => {
      const c = new pg.Client({ host: '127.0.0.1', port: rt.port, user: 'postgres', database: 'tdb_tpl_cg__neighbour' });
      c.on('error', () => undefined);
      try {
        await c.connect();
        await c.query('SELECT 1');
        return true;
      } catch {
        return false;
      } finally {
        await c.end().catch(() => undefined);
      }
    }, 60_000);
    const again = await connect(rt, 'tdb_tpl_cg__neighbour');
    expect((await again.query('SELECT v FROM t ORDER BY v')).rows, 'the uncommitted row is gone').to.deep.equal([{ v: 'kept' }]);
    const pooledAgain = await connect(rt, 'tdb_tpl_cg__pooled');
    expect((await pooledAgain.query('SELECT v FROM t ORDER BY v')).rows).to.deep.equal([{ v: 'committed' }, { v: 'kept' }]);
    const minted = await connect(rt, 'tdb_tpl_cg__after_crash');
    expect((await minted.query('SELECT v FROM t')).rows).to.deep.equal([{ v: 'kept' }]);
    const hogAgain = await connect(rt, 'tdb_tpl_cg__hog');
    expect((await hogAgain.query('SELECT 1 AS one')).rows).to.deep.equal([{ one: 1 }]);
    expect((await status(rt)).runtime.postgres_pid, 'the same postmaster, restarted in place').to.equal(postmaster);
    expect(cg.oomKills(), 'one OOM kill in all').to.equal(1);
  });
});
