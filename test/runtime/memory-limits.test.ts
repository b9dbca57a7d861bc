// Memory limits (engine/memory-watchdog.ts): a runaway statement past the session, database or runtime
// limit is canceled and its client gets 53200 naming the limit and the amount, not PostgreSQL's 57014;
// the same session runs its next statement; a neighbour database with a steady workload sees no error.
// Over the runtime limit the largest tenant pays, idle sessions included: two tenants with their own
// roles, one hoarding memory in idle sessions, the other's query runs to its end. Also: the cgroup
// limit and memory.stat in v1 and v2 layouts (fixture files; cgroup.test.ts uses a real cgroup), and
// the OOM killer scores.

import { expect } from 'chai';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { ApiClient } from '../../src/api/client.js';
import { cgroupLimit, cgroupMemoryLimit, unreclaimableBytes } from '../../src/runtime/postgres/cgroup.js';
import { spawnProtected } from '../../src/runtime/postgres/oom.js';
import type { Logger } from '../../src/log.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';
import { scratchDir } from '../helpers/scratch.js';

const TOKEN = 'test-token-memory-0123456789abcdef';

/** Builds a tuplestore and a sort in memory until canceled: about 1.5 GB if nothing stops it. */
const RUNAWAY = "SELECT count(*) FROM (SELECT g, repeat('x', 20) AS pad FROM generate_series(1, 20000000) g ORDER BY g DESC) s";

interface Failure {
  code?: string;
  message: string;
  detail?: string;
  hint?: string;
}

async function failureOf(client: pg.Client, sql: string): Promise<Failure> {
  const err = await client.query(sql).then(
    () => null,
    (e: unknown) => e as Failure,
  );
  expect(err, `${sql} should fail`).to.not.equal(null);
  return err!;
}

/** Runs point queries on `client` until stopped; counts queries and errors. */
function steadyWorkload(client: pg.Client): { stop(): Promise<{ queries: number; errors: string[] }> } {
  let running = true;
  let queries = 0;
  const errors: string[] = [];
  const loop = (async () => {
    while (running) {
      try {
        const { rows } = await client.query('SELECT count(*)::int AS n FROM t WHERE x <= $1', [50]);
        if (rows[0].n !== 50 && errors.length < 5) errors.push(`wrong answer ${rows[0].n}`);
        queries++;
      } catch (e) {
        if (errors.length < 5) errors.push((e as Error).message);
      }
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return { queries, errors };
    },
  };
}

describe('runtime: memory limits', function () {
  this.timeout(120_000);
  let rt: TestRuntime;
  let api: ApiClient;
  const open: pg.Client[] = [];

  async function connect(database: string): Promise<pg.Client> {
    const client = new pg.Client(rt.connection(database));
    await client.connect();
    open.push(client);
    return client;
  }

  /** The runaway on `database` while a neighbour runs point queries; returns the runaway's error. */
  async function runawayBesideNeighbour(database: string, neighbour: string): Promise<Failure> {
    const victim = await connect(neighbour);
    const load = steadyWorkload(victim);
    const client = await connect(database);
    await client.query("SET work_mem = '4GB'");
    const err = await failureOf(client, RUNAWAY);
    // The same session goes on.
    expect((await client.query('SELECT 41 + 1 AS answer')).rows).to.deep.equal([{ answer: 42 }]);
    const seen = await load.stop();
    expect(seen.errors.join('; '), 'the neighbour database saw errors').to.equal('');
    expect(seen.queries).to.be.greaterThan(0);
    return err;
  }

  before(async function () {
    rt = await startTestRuntime({ apiPort: 0, apiToken: TOKEN, poolSize: 0, sessionMemoryLimit: 150, runtimeMemoryLimit: 250 });
    api = new ApiClient({ url: `http://127.0.0.1:${rt.runtime.api!.port}`, token: TOKEN });
    await api.buildTemplate({ name: 'tpl_mem', sql: 'CREATE TABLE t (x int PRIMARY KEY); INSERT INTO t SELECT generate_series(1, 1000)' });
  });

  afterEach(async function () {
    await Promise.all(open.splice(0).map((c) => c.end().catch(() => undefined)));
  });

  after(async function () {
    await rt?.stop();
  });

  it('the session limit: 53200 naming the limit and the amount, the session goes on, the neighbour sees nothing', async function () {
    const err = await runawayBesideNeighbour('tdb_tpl_mem__runaway', 'tdb_tpl_mem__neighbour');
    expect(err.code).to.equal('53200');
    expect(err.message).to.match(/^canceling statement due to memory limit: the session used (\d+) MB, over its limit of 150 MB$/);
    expect(Number(/used (\d+) MB/.exec(err.message)![1])).to.be.greaterThan(150);
    expect(err.hint).to.contain('--session-memory-limit');
    const status = await api.status();
    expect(status.limits.memory.session_mb).to.equal(150);
    expect(status.limits.memory.canceled.session).to.be.greaterThan(0);
  });

  it("a database's own limit (API) cancels at it, whatever the session limit", async function () {
    await connect('tdb_tpl_mem__capped');
    const body = await api.setMemoryLimit('tdb_tpl_mem__capped', 60);
    expect(body.memory_limit_mb).to.equal(60);
    const err = await runawayBesideNeighbour('tdb_tpl_mem__capped', 'tdb_tpl_mem__neighbour2');
    expect(err.code).to.equal('53200');
    expect(err.message).to.match(/^canceling statement due to memory limit: database "tdb_tpl_mem__capped" used \d+ MB, over its limit of 60 MB$/);
    expect((await api.getDatabase('tdb_tpl_mem__capped')).memory_limit_mb).to.equal(60);
  });

  it('the runtime limit: the largest running statement over all databases is canceled', async function () {
    // Three sessions of about 100 MB each stay under the session limit (150) but not under the runtime's (250).
    const clients = await Promise.all(['a', 'b', 'c'].map((t) => connect(`tdb_tpl_mem__rt_${t}`)));
    await Promise.all(clients.map((c) => c.query("SET work_mem = '4GB'")));
    // Each sort of 1.6M rows peaks near 100 MB and is held while pg_sleep runs after it (the aggregate's
    // output): together they cross 250 MB; without the largest they are under it.
    const results = await Promise.allSettled(
      clients.map((c) => c.query('SELECT count(*), pg_sleep(3) FROM (SELECT g FROM generate_series(1, 1600000) g ORDER BY g DESC) s')),
    );
    const rejected = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected').map((r) => r.reason as Failure);
    expect(rejected.length, 'at least one statement canceled').to.be.greaterThan(0);
    expect(rejected.length, 'not every statement canceled: a cancel frees room for the rest').to.be.lessThan(clients.length);
    for (const e of rejected) {
      expect(e.code).to.equal('53200');
      expect(e.message).to.match(/^canceling statement due to memory limit: the runtime's sessions used \d+ MB, over the runtime limit of 250 MB$/);
    }
    for (const c of clients) expect((await c.query('SELECT 1 AS one')).rows).to.deep.equal([{ one: 1 }]);
  });

  it('protects the postmaster from the OOM killer where it may (CAP_SYS_RESOURCE), and says which', async function () {
    const pid = rt.runtime.supervisor.pid!;
    const client = await connect('tdb_tpl_mem__oom');
    const { rows } = await client.query('SELECT pg_backend_pid() AS pid');
    const score = (p: number): string => fs.readFileSync(`/proc/${p}/oom_score_adj`, 'utf8').trim();
    const reported = (await api.status()).limits.memory.postmaster_oom_protected;
    if (mayLowerOomScore()) {
      expect(score(pid)).to.equal('-1000');
      expect(reported).to.equal(true);
    } else {
      // A container without CAP_SYS_RESOURCE (this sandbox): the status must not claim it.
      expect(score(pid)).to.not.equal('-1000');
      expect(reported).to.equal(false);
    }
    // Backends stay candidates either way: at 0 under a protected postmaster, else raised to 1000 so
    // that the killer takes one of them before the postmaster or node; ours is back to what it was.
    expect(score(rows[0].pid)).to.equal(mayLowerOomScore() ? '0' : '1000');
    expect(fs.readFileSync('/proc/self/oom_score_adj', 'utf8').trim()).to.not.equal('-1000');
  });

  it('spawnProtected: the score is -1000 while the child is spawned, then what it was', function () {
    const file = path.join(os.tmpdir(), `pgx-oom-${process.pid}`);
    fs.writeFileSync(file, '0\n');
    try {
      const { child, protectedChild } = spawnProtected((env) => [fs.readFileSync(file, 'utf8'), env.PG_OOM_ADJUST_VALUE], file);
      expect(child).to.deep.equal(['-1000', '0']);
      expect(protectedChild).to.equal(true);
      expect(fs.readFileSync(file, 'utf8')).to.equal('0');
    } finally {
      fs.rmSync(file, { force: true });
    }
  });

  it('spawnProtected where the score cannot be lowered: the children raise theirs to 1000', function () {
    const { child, protectedChild } = spawnProtected((env) => env, path.join(os.tmpdir(), 'no-such-dir', 'oom_score_adj'));
    expect(protectedChild).to.equal(false);
    expect(child).to.deep.equal({ PG_OOM_ADJUST_FILE: '/proc/self/oom_score_adj', PG_OOM_ADJUST_VALUE: '1000' });
  });
});

/** A logger that keeps what it is given, to read the runtime's log lines. */
function recordingLogger(): Logger & { lines: Array<{ event: string; fields: Record<string, unknown> }> } {
  const lines: Array<{ event: string; fields: Record<string, unknown> }> = [];
  const logger = {
    lines,
    error: (event: string, fields: Record<string, unknown> = {}) => void lines.push({ event, fields }),
    warn: (event: string, fields: Record<string, unknown> = {}) => void lines.push({ event, fields }),
    info: (event: string, fields: Record<string, unknown> = {}) => void lines.push({ event, fields }),
    debug: () => {},
    child: () => logger,
  };
  return logger;
}

/** RssAnon of a process, MB. */
function anonMb(pid: number): number {
  const m = /^RssAnon:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : 0;
}

describe('runtime: over the runtime memory limit, the largest tenant pays', function () {
  this.timeout(120_000);
  let rt: TestRuntime;
  let api: ApiClient;
  const logger = recordingLogger();
  const open: pg.Client[] = [];
  const fatal = new Map<pg.Client, Failure>();

  before(async function () {
    rt = await startTestRuntime({ apiPort: 0, apiToken: TOKEN, poolSize: 0, runtimeMemoryLimit: 250 }, logger);
    api = new ApiClient({ url: `http://127.0.0.1:${rt.runtime.api!.port}`, token: TOKEN });
    await api.buildTemplate({ name: 'tpl_hog', sql: 'CREATE TABLE t (x int)' });
  });

  after(async function () {
    await Promise.all(open.splice(0).map((c) => c.end().catch(() => undefined)));
    await rt?.stop();
  });

  it('says what is missing when it cannot protect the postmaster from the OOM killer (root without CAP_SYS_RESOURCE: the capability)', function () {
    const warning = logger.lines.find((l) => l.event === 'postmaster-not-oom-protected');
    if (mayLowerOomScore()) {
      expect(warning, 'protected, so no warning').to.equal(undefined);
      return;
    }
    expect(warning, 'the warning').to.not.equal(undefined);
    if (process.getuid?.() === 0) {
      // This sandbox: root in a container that dropped the capability. "Run as root" would be no help.
      expect(warning!.fields.reason).to.contain('lacks CAP_SYS_RESOURCE');
      expect(warning!.fields.hint).to.contain('--cap-add SYS_RESOURCE').and.not.contain('as root');
    } else {
      expect(warning!.fields.hint).to.contain('as root with CAP_SYS_RESOURCE');
    }
  });

  /** A tenant: its own database and its own credential (a role that reaches only that database). */
  async function tenant(name: string): Promise<() => Promise<pg.Client>> {
    await api.createDatabase({ template: 'tpl_hog', name });
    const credential = await api.createCredential(name);
    return async () => {
      const client = new pg.Client({ ...rt.connection(name, credential.user), password: credential.password });
      // A session the runtime ends: node-postgres reports the FATAL here, outside any query (then
      // "Connection terminated unexpectedly": the first error is the one the server sent).
      client.on('error', (e: Failure) => void (fatal.has(client) || fatal.set(client, e)));
      await client.connect();
      open.push(client);
      return client;
    };
  }

  it("a tenant's idle sessions holding memory are ended (FATAL 53200); another tenant's running query is not canceled", async function () {
    const hoarder = await tenant('tdb_tpl_hog__hoarder');
    const worker = await tenant('tdb_tpl_hog__worker');
    // The hoarder: two sessions, each left idle holding about 90 MB in a WITH HOLD cursor's result
    // (kept in memory up to work_mem after its transaction ends). 180 MB is under the limit (250).
    const idle = [await hoarder(), await hoarder()];
    const pids: number[] = [];
    for (const c of idle) {
      await c.query("SET work_mem = '1GB'");
      await c.query("DECLARE hoard CURSOR WITH HOLD FOR SELECT g, repeat('x', 100) AS pad FROM generate_series(1, 700000) g");
      pids.push((await c.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number);
    }
    const held = pids.map(anonMb);
    for (const mb of held) expect(mb, 'each idle hoarder session holds memory').to.be.within(60, 140);
    expect(held[0]! + held[1]!, 'the hoarder is under the limit on its own').to.be.lessThan(250);
    // The worker's sort (about 100 MB, held while pg_sleep runs after it) takes the sum over 250 MB;
    // ending one idle hoarder session brings it back under.
    const work = await worker();
    await work.query("SET work_mem = '1GB'");
    const { rows } = await work.query('SELECT count(*)::int AS n, pg_sleep(3) FROM (SELECT g FROM generate_series(1, 1600000) g ORDER BY g DESC) s');
    expect(rows[0].n, "the worker's query ran to its end").to.equal(1600000);

    // The hoarder paid: a session ended with FATAL 53200 naming the limit, the database and the amounts.
    const outcomes = await Promise.all(idle.map((c) => c.query('FETCH 1 FROM hoard').then(() => null, (e: Failure) => e)));
    const ended = idle.filter((_, i) => outcomes[i] !== null);
    expect(ended.length, 'one hoarder session ended').to.be.greaterThan(0);
    for (const c of ended) {
      const e = fatal.get(c);
      expect(e?.code, `FATAL 53200 on the ended session, not ${String(e)}`).to.equal('53200');
      expect(e!.message).to.match(/^terminating connection due to memory limit: the runtime's sessions used \d+ MB, over the runtime limit of 250 MB$/);
      expect(e!.detail).to.match(/^Database "tdb_tpl_hog__hoarder" held the most of any database \(\d+ MB\); this session's backend held \d+ MB between statements/);
      expect(e!.hint).to.contain('--runtime-memory-limit');
    }
    const line = logger.lines.find((l) => l.event === 'memory-limit');
    expect(line, 'a memory-limit log line').to.not.equal(undefined);
    expect(line!.fields).to.include({ scope: 'runtime', action: 'end-session', database: 'tdb_tpl_hog__hoarder', limitMb: 250 });
    expect(line!.fields.user).to.match(/^tdb_tpl_hog__hoarder/);
    expect(pids).to.include(line!.fields.pid);
    expect(line!.fields.rule).to.contain('largest');
    expect(line!.fields.databaseMb as number).to.be.greaterThan(line!.fields.backendMb as number);
    expect(line!.fields.usedMb as number).to.be.greaterThan(250);
    expect(logger.lines.filter((l) => l.event === 'memory-limit' && l.fields.database !== 'tdb_tpl_hog__hoarder'), 'nobody else paid').to.deep.equal([]);
    expect((await api.status()).limits.memory.sessions_ended).to.equal(ended.length);
    // The worker's session goes on, and so does the hoarder's other session if it was spared.
    expect((await work.query('SELECT 1 AS one')).rows).to.deep.equal([{ one: 1 }]);
  });
});

/** CAP_SYS_RESOURCE (bit 24) in our effective capabilities: needed to lower an oom_score_adj. */
function mayLowerOomScore(): boolean {
  const m = /^CapEff:\s+([0-9a-f]+)$/m.exec(fs.readFileSync('/proc/self/status', 'utf8'));
  return m !== null && (BigInt(`0x${m[1]}`) & (1n << 24n)) !== 0n;
}

describe('runtime: the cgroup memory limit', function () {
  let dir: string;
  beforeEach(() => {
    dir = scratchDir('pgx-cgroup-');
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  function write(rel: string, text: string): void {
    fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    fs.writeFileSync(path.join(dir, rel), text);
  }

  it('v2: the tightest memory.max from the cgroup up to the root; "max" is none', async function () {
    write('proc-cgroup', '0::/kubepods/pod1/ctr\n');
    write('fs/kubepods/memory.max', '8589934592\n');
    write('fs/kubepods/pod1/memory.max', '1073741824\n');
    write('fs/kubepods/pod1/ctr/memory.max', 'max\n');
    expect(await cgroupMemoryLimit({ membership: path.join(dir, 'proc-cgroup'), root: path.join(dir, 'fs') })).to.equal(1073741824);
    write('fs/kubepods/pod1/memory.max', 'max\n');
    write('fs/kubepods/memory.max', 'max\n');
    expect(await cgroupMemoryLimit({ membership: path.join(dir, 'proc-cgroup'), root: path.join(dir, 'fs') })).to.equal(null);
  });

  it('v2 in a cgroup namespace: the path is / and the limit sits at the mount root', async function () {
    write('proc-cgroup', '0::/\n');
    write('fs/memory.max', '536870912\n');
    expect(await cgroupMemoryLimit({ membership: path.join(dir, 'proc-cgroup'), root: path.join(dir, 'fs') })).to.equal(536870912);
  });

  it("v1: memory.limit_in_bytes of the memory controller's cgroup; the huge 'unlimited' value is none", async function () {
    write('proc-cgroup', '5:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n0::/\n');
    write('fs/memory/memory.limit_in_bytes', '9223372036854771712\n');
    write('fs/memory/docker/abc/memory.limit_in_bytes', '2147483648\n');
    expect(await cgroupMemoryLimit({ membership: path.join(dir, 'proc-cgroup'), root: path.join(dir, 'fs') })).to.equal(2147483648);
    write('fs/memory/docker/abc/memory.limit_in_bytes', '9223372036854771712\n');
    expect(await cgroupMemoryLimit({ membership: path.join(dir, 'proc-cgroup'), root: path.join(dir, 'fs') })).to.equal(null);
  });

  it('v2: the memory the guard counts is anon + shmem of the cgroup holding the tightest limit', async function () {
    write('proc-cgroup', '0::/kubepods/pod1/ctr\n');
    write('fs/kubepods/pod1/memory.max', '1073741824\n');
    write('fs/kubepods/pod1/ctr/memory.max', 'max\n');
    write('fs/kubepods/pod1/memory.stat', 'anon 104857600\nfile 999999999\nkernel 1000\nshmem 52428800\n');
    const limit = await cgroupLimit({ membership: path.join(dir, 'proc-cgroup'), root: path.join(dir, 'fs') });
    expect(limit).to.deep.equal({ version: 2, bytes: 1073741824, dir: path.join(dir, 'fs/kubepods/pod1') });
    expect(await unreclaimableBytes(limit!)).to.equal(157286400);
  });

  it('v1: the memory the guard counts is total_rss + total_shmem (descendants included); no stat file: null', async function () {
    write('proc-cgroup', '4:memory:/docker/abc\n');
    write('fs/memory/docker/abc/memory.limit_in_bytes', '2147483648\n');
    write('fs/memory/docker/abc/memory.stat', 'cache 5\nrss 1\nshmem 2\ntotal_cache 999999\ntotal_rss 300000000\ntotal_shmem 40000000\n');
    const limit = await cgroupLimit({ membership: path.join(dir, 'proc-cgroup'), root: path.join(dir, 'fs') });
    expect(limit).to.deep.equal({ version: 1, bytes: 2147483648, dir: path.join(dir, 'fs/memory/docker/abc') });
    expect(await unreclaimableBytes(limit!)).to.equal(340000000);
    fs.rmSync(path.join(dir, 'fs/memory/docker/abc/memory.stat'));
    expect(await unreclaimableBytes(limit!)).to.equal(null);
  });

  it('no cgroup file: no limit', async function () {
    expect(await cgroupMemoryLimit({ membership: path.join(dir, 'missing'), root: dir })).to.equal(null);
  });
});
