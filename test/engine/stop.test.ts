import { expect } from 'chai';
import pg from 'pg';
import { startTestRuntime } from '../helpers/runtime.js';

/** Counts of live handles by kind (TCPSocketWrap, PipeWrap, ProcessWrap, Timeout, ...). */
function resources(): Map<string, number> {
  const counts = new Map<string, number>();
  for (const r of process.getActiveResourcesInfo()) counts.set(r, (counts.get(r) ?? 0) + 1);
  return counts;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('runtime stop', function () {
  this.timeout(60000);

  it('closes every socket, timer and child it opened, and PostgreSQL exits', async () => {
    // Baseline after a turn, so mocha's own timer for this test (set once the test has begun) counts in it.
    await new Promise((r) => setImmediate(r));
    const before = resources();
    const rt = await startTestRuntime();
    const pgPid = rt.runtime.supervisor.pid!;
    // A pooled idle backend, and a session still open (it must be ended by the stop).
    const a = new pg.Client(rt.connection());
    await a.connect();
    await a.query('SELECT 1');
    await a.end();
    const b = new pg.Client(rt.connection());
    await b.connect();
    await b.query('SELECT 1');
    const ended = new Promise<Error | null>((resolve) => {
      b.on('error', (err) => resolve(err));
      b.on('end', () => resolve(null));
    });
    await rt.stop();
    const err = (await ended) as (Error & { code?: string }) | null;
    if (err) expect(err.code).to.equal('57P01');
    // Sockets finish closing asynchronously: give them a moment, then nothing may be left.
    let grown: string[] = [];
    for (let i = 0; i < 40; i++) {
      await new Promise((r) => setTimeout(r, 50));
      grown = [];
      for (const [kind, n] of resources()) if (n > (before.get(kind) ?? 0)) grown.push(`${kind}: ${before.get(kind) ?? 0} -> ${n}`);
      if (grown.length === 0) break;
    }
    expect(grown).to.deep.equal([]);
    expect(alive(pgPid)).to.equal(false);
  });
});
