// pgbench (the real PostgreSQL 15 client from Debian) through the engine: initialisation (COPY and
// DDL), then select-only, TPC-B, prepared statements and connect-per-transaction runs. Every run must
// finish with exit code 0 and no failed transactions. Throughput is the benchmarks' business, not this
// file's: runs use a fixed number of transactions.

import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { runCommand, type CommandResult } from '../helpers/commands.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';
import { scratchDir } from '../helpers/scratch.js';

describe('engine: pgbench through the engine', function () {
  this.timeout(60_000);
  let rt: TestRuntime;

  before(async function () {
    rt = await startTestRuntime();
  });

  after(async function () {
    await rt?.stop();
  });

  const pgbench = (args: string[]): Promise<CommandResult> => runCommand('pgbench', ['--no-vacuum', ...args], { env: rt.env(), timeoutMs: 50_000 });

  /** Checks a run's summary: exit 0, every transaction processed, none failed. */
  function expectClean(r: CommandResult, transactions: number): void {
    const output = `${r.stdout}\n${r.stderr}`;
    expect(r.code, `pgbench failed:\n${output}`).to.equal(0);
    expect(r.stdout, output).to.contain(`number of transactions actually processed: ${transactions}/${transactions}`);
    expect(r.stdout, output).to.match(/number of failed transactions: 0 \(0\.000%\)/);
    expect(r.stderr, output).not.to.match(/error|FATAL/i);
  }

  it('initialises a scale-2 database (-i -s 2)', async function () {
    const r = await runCommand('pgbench', ['-i', '-s', '2', '-q'], { env: rt.env(), timeoutMs: 50_000 });
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stderr).to.contain('done in');
    const count = await runCommand('psql', ['-X', '-At', '-c', 'SELECT count(*) FROM pgbench_accounts'], { env: rt.env() });
    expect(count.stdout).to.equal('200000\n');
  });

  it('select-only (-S), 4 clients', async function () {
    expectClean(await pgbench(['-S', '-c', '4', '-j', '2', '-t', '1500']), 6000);
  });

  it('TPC-B (the default script), 4 clients', async function () {
    expectClean(await pgbench(['-c', '4', '-j', '2', '-t', '150']), 600);
    // The history table saw every transaction: nothing was lost or doubled on the way.
    const history = await runCommand('psql', ['-X', '-At', '-c', 'SELECT count(*) FROM pgbench_history'], { env: rt.env() });
    expect(history.stdout).to.equal('600\n');
  });

  it('prepared statements (-M prepared), select-only and TPC-B', async function () {
    expectClean(await pgbench(['-M', 'prepared', '-S', '-c', '4', '-j', '2', '-t', '1500']), 6000);
    expectClean(await pgbench(['-M', 'prepared', '-c', '4', '-j', '2', '-t', '150']), 600);
  });

  it('extended protocol without prepared statements (-M extended)', async function () {
    expectClean(await pgbench(['-M', 'extended', '-S', '-c', '4', '-j', '2', '-t', '1000']), 4000);
  });

  it('a new connection per transaction (-C), select-only and TPC-B', async function () {
    expectClean(await pgbench(['-C', '-S', '-c', '4', '-j', '2', '-t', '250']), 1000);
    expectClean(await pgbench(['-C', '-M', 'prepared', '-c', '4', '-j', '2', '-t', '100']), 400);
  });

  it('pipelined statements (\\startpipeline) in a custom script', async function () {
    const script = [
      '\\set aid random(1, 200000)',
      '\\startpipeline',
      'SELECT abalance FROM pgbench_accounts WHERE aid = :aid;',
      'SELECT count(*) FROM pgbench_branches;',
      'SELECT :aid;',
      '\\endpipeline',
      '',
    ].join('\n');
    const dir = scratchDir('pgx-pgbench-');
    try {
      const file = path.join(dir, 'pipeline.sql');
      fs.writeFileSync(file, script);
      expectClean(await pgbench(['-M', 'extended', '-f', file, '-c', '2', '-t', '500']), 1000);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('leaves the engine serving with no open transactions behind', async function () {
    const r = await runCommand(
      'psql',
      ['-X', '-At', '-c', "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND state LIKE 'idle in transaction%'"],
      { env: rt.env() },
    );
    expect(r.stdout).to.equal('0\n');
  });
});
