// The memory watchdog's cost when idle, counted through its injected readers: with no tenant session
// on a backend a pass reads no /proc file, and outside a cgroup nothing (no wake-up through libuv's
// threadpool); in a cgroup it keeps reading the cgroup's usage, so the guard's growth rate spans the
// moment tenants start. The first pass once a session has a backend reads and enforces as before: a
// runaway over the session limit and the cgroup guard are paid on that very pass. The limits
// themselves against real backends: test/runtime/memory-limits.test.ts and cgroup.test.ts.

import { expect } from 'chai';
import { MemoryWatchdog } from '../../src/engine/memory-watchdog.js';
import type { MemoryLimits } from '../../src/engine/ports.js';
import type { EngineSession } from '../../src/engine/session-types.js';
import { silentLogger } from '../../src/log.js';

/** A session as the watchdog sees it; records what the watchdog did to it. */
function session(database: string): EngineSession & { backendPid: number | null; busy: boolean; canceled: string[]; ended: string[] } {
  return {
    state: 'active',
    user: 'alice',
    database,
    backendPid: null,
    busy: false,
    canceled: [],
    ended: [],
    cancelBackend() {},
    cancelStatement(error: Buffer) {
      this.canceled.push(error.toString('latin1'));
    },
    endClosingBackend(error) {
      this.ended.push(error.message);
    },
    terminate() {},
  };
}

function watchdog(limits: Partial<MemoryLimits>, sessions: EngineSession[], kbOf: Map<number, number>) {
  const reads = { proc: 0, cgroup: 0 };
  let cgroupMb = 100;
  const w = new MemoryWatchdog(
    {
      sessionMb: null,
      databaseMb: null,
      runtimeMb: null,
      intervalMs: 100,
      ...limits,
      ...(limits.cgroup ? { cgroup: { limitMb: limits.cgroup.limitMb, usedMb: async () => (reads.cgroup++, cgroupMb) } } : {}),
    },
    () => sessions,
    silentLogger,
    async (pid) => (reads.proc++, kbOf.get(pid) ?? null),
  );
  return { w, reads, setCgroupMb: (mb: number) => void (cgroupMb = mb) };
}

describe('engine: memory watchdog when idle (reads counted)', function () {
  it('reads nothing outside a cgroup while no tenant session has a backend, then reads and enforces on the first pass one has', async function () {
    const s = session('tdb_a');
    const kb = new Map<number, number>([[4242, 300 * 1024]]);
    const { w, reads } = watchdog({ sessionMb: 150, runtimeMb: 1000 }, [s], kb);
    for (let i = 0; i < 50; i++) await w.check();
    expect(reads, 'reads by 50 passes with no backend').to.deep.equal({ proc: 0, cgroup: 0 });
    expect(w.idlePasses).to.equal(50);

    // A backend and a runaway statement: the very next pass reads it and cancels it with 53200.
    s.backendPid = 4242;
    s.busy = true;
    await w.check();
    expect(reads).to.deep.equal({ proc: 1, cgroup: 0 });
    expect(s.canceled).to.have.length(1);
    expect(s.canceled[0]).to.contain('53200').and.contain('over its limit of 150 MB');
    expect(w.cancels.session).to.equal(1);

    // The session leaves its backend: reading stops again.
    s.backendPid = null;
    s.busy = false;
    for (let i = 0; i < 20; i++) await w.check();
    expect(reads).to.deep.equal({ proc: 1, cgroup: 0 });
  });

  it('in a cgroup, reads only the cgroup while idle, and the growth across the start of the tenants counts on their first pass', async function () {
    const hog = session('tdb_hog');
    const kb = new Map<number, number>([[7, 400 * 1024]]);
    const { w, reads, setCgroupMb } = watchdog({ runtimeMb: 1500, cgroup: { limitMb: 1000, usedMb: async () => null } }, [hog], kb);
    for (let i = 0; i < 10; i++) await w.check();
    expect(reads).to.deep.equal({ proc: 0, cgroup: 10 });
    // 100 -> 850 MB in one pass: under the guard's 900 MB, but two more passes at that rate are not.
    setCgroupMb(850);
    hog.backendPid = 7;
    hog.busy = true;
    await w.check();
    expect(w.cancels.cgroup).to.equal(1);
  });

  it('the cgroup guard pays on the first pass after an idle spell', async function () {
    const hog = session('tdb_hog');
    const kb = new Map<number, number>([[7, 400 * 1024]]);
    const { w, reads, setCgroupMb } = watchdog({ runtimeMb: 1500, cgroup: { limitMb: 1000, usedMb: async () => null } }, [hog], kb);
    for (let i = 0; i < 10; i++) await w.check();
    expect(reads.cgroup).to.equal(10);
    setCgroupMb(950); // over 90% of 1000 MB
    hog.backendPid = 7;
    hog.busy = true;
    await w.check();
    expect(reads).to.deep.equal({ proc: 1, cgroup: 11 });
    expect(w.cancels.cgroup).to.equal(1);
    expect(hog.canceled[0]).to.contain("the runtime's cgroup held 950 MB it cannot reclaim");
  });

  it('an idle session on a backend is still watched: its memory is reread every tenth pass, the cgroup every pass', async function () {
    const s = session('tdb_idle');
    s.backendPid = 11;
    const { w, reads } = watchdog({ runtimeMb: 1000, cgroup: { limitMb: 2000, usedMb: async () => null } }, [s], new Map([[11, 10 * 1024]]));
    for (let i = 0; i < 20; i++) await w.check();
    expect(reads).to.deep.equal({ proc: 2, cgroup: 20 });
    expect(w.idlePasses).to.equal(0);
  });
});
