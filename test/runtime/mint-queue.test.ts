// The mint queue without PostgreSQL: jobs are promises the test settles, so ordering, the length bound,
// the wait timeout and stop() are checked exactly.

import { expect } from 'chai';
import { PgxError } from '../../src/errors.js';
import { MintQueue } from '../../src/runtime/databases/mint-queue.js';
import type { SqlClient } from '../../src/runtime/postgres/sql-client.js';

/** Stands in for a worker connection: the queue only hands it to the job and closes it at stop. */
function fakeClient(): SqlClient {
  const fake = { closed: new Promise<void>(() => {}), close: async () => {} };
  return fake as unknown as SqlClient;
}

function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

async function settled<T>(p: Promise<T>): Promise<PromiseSettledResult<T>> {
  return (await Promise.allSettled([p]))[0]!;
}

describe('runtime: mint queue', function () {
  it('runs jobs on its workers in arrival order', async function () {
    const q = new MintQueue({ workers: 2, maxQueued: 10, waitTimeoutMs: 10_000, connect: async () => fakeClient() });
    const started: number[] = [];
    const gates = [gate(), gate(), gate(), gate()];
    const jobs = gates.map((g, i) =>
      q.submit(`db${i}`, async () => {
        started.push(i);
        await g.promise;
        return i;
      }),
    );
    await new Promise((r) => setImmediate(r));
    expect(started).to.deep.equal([0, 1]);
    expect(q.pending).to.equal(4);
    expect(q.queued).to.equal(2);
    gates[1]!.open();
    await jobs[1];
    await new Promise((r) => setImmediate(r));
    expect(started).to.deep.equal([0, 1, 2]);
    for (const g of gates) g.open();
    expect(await Promise.all(jobs)).to.deep.equal([0, 1, 2, 3]);
    await q.stop();
  });

  it('closes the worker connections a burst opened beyond keepOpen once nothing waits', async function () {
    let opened = 0;
    let closed = 0;
    const connect = async (): Promise<SqlClient> => {
      opened++;
      return { closed: new Promise<void>(() => {}), close: async () => void closed++ } as unknown as SqlClient;
    };
    const q = new MintQueue({ workers: 4, keepOpen: 1, maxQueued: 10, waitTimeoutMs: 10_000, connect });
    const gates = [gate(), gate(), gate(), gate(), gate()];
    const jobs = gates.map((g, i) => q.submit(`db${i}`, () => g.promise.then(() => i)));
    await new Promise((r) => setImmediate(r));
    expect(opened, 'a worker connection per job in flight').to.equal(4);
    for (const g of gates) g.open();
    await Promise.all(jobs);
    await new Promise((r) => setImmediate(r));
    expect(closed, 'closed once the queue drained').to.equal(3);
    await q.stop();
    expect(closed, 'the kept one closes at stop').to.equal(4);
  });

  it('refuses with 57P03 past --mint-queue-size', async function () {
    const q = new MintQueue({ workers: 1, maxQueued: 1, waitTimeoutMs: 10_000, connect: async () => fakeClient() });
    const g = gate();
    const first = q.submit('a', () => g.promise);
    const second = q.submit('b', () => g.promise);
    const third = await settled(q.submit('c', () => g.promise));
    expect(third.status).to.equal('rejected');
    const err = (third as PromiseRejectedResult).reason as PgxError;
    expect(err.sqlstate).to.equal('57P03');
    expect(err.message).to.equal('cannot create database "c" now: the mint queue is full (1 waiting)');
    expect(err.hint).to.match(/--mint-queue-size \(1\)/);
    g.open();
    await Promise.all([first, second]);
    await q.stop();
  });

  it('refuses with 57P03 a job that waited --mint-timeout with no job finishing; a started job runs to its end', async function () {
    const q = new MintQueue({ workers: 1, maxQueued: 10, waitTimeoutMs: 30, connect: async () => fakeClient() });
    const g = gate();
    const running = q.submit('slow', async () => {
      await g.promise;
      return 'done';
    });
    const waiting = await settled(q.submit('late', async () => 'never'));
    expect(waiting.status).to.equal('rejected');
    const err = (waiting as PromiseRejectedResult).reason as PgxError;
    expect(err.sqlstate).to.equal('57P03');
    expect(err.message).to.match(/^timed out waiting to create database "late": no database was created for \d+ ms$/);
    expect(err.hint).to.match(/--mint-timeout seconds \(0.03\)/);
    g.open();
    expect(await running).to.equal('done');
    await q.stop();
  });

  it('keeps a job waiting past --mint-timeout in all while jobs ahead of it finish', async function () {
    // One job finishes every 300 ms, well inside the 1 s timeout; the last of five waits 1.2 s in all.
    const q = new MintQueue({ workers: 1, maxQueued: 10, waitTimeoutMs: 1000, connect: async () => fakeClient() });
    const gates = Array.from({ length: 5 }, () => gate());
    const jobs = gates.map((g, i) => q.submit(`db${i}`, async () => {
      await g.promise;
      return i;
    }));
    for (const g of gates) {
      await new Promise((r) => setTimeout(r, 300));
      g.open();
    }
    const results = await Promise.allSettled(jobs);
    expect(results.map((r) => r.status)).to.deep.equal(Array(5).fill('fulfilled'));
    await q.stop();
  });

  it('passes a job\'s own error through and keeps going', async function () {
    const q = new MintQueue({ workers: 1, maxQueued: 10, waitTimeoutMs: 10_000, connect: async () => fakeClient() });
    const failed = await settled(q.submit('bad', async () => Promise.reject(new Error('boom'))));
    expect((failed as PromiseRejectedResult).reason).to.have.property('message', 'boom');
    expect(await q.submit('good', async () => 1)).to.equal(1);
    await q.stop();
  });

  it('stop() refuses what waits, lets the running job finish, then refuses new jobs', async function () {
    const q = new MintQueue({ workers: 1, maxQueued: 10, waitTimeoutMs: 10_000, connect: async () => fakeClient() });
    const g = gate();
    const running = q.submit('running', async () => {
      await g.promise;
      return 'finished';
    });
    const waiting = q.submit('waiting', async () => 'never');
    await new Promise((r) => setImmediate(r));
    const stopping = q.stop();
    const refused = await settled(waiting);
    expect((refused as PromiseRejectedResult).reason).to.have.property('message').that.matches(/shutting down/);
    g.open();
    expect(await running).to.equal('finished');
    await stopping;
    const after = await settled(q.submit('after', async () => 1));
    expect((after as PromiseRejectedResult).reason).to.be.instanceOf(PgxError);
  });
});
