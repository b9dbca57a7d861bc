// Framework lifecycles (test/compat/lifecycles/), each run twice in this one file: on the runtime's
// PostgreSQL 18 directly (its private socket, a database made with CREATE DATABASE ... TEMPLATE) and
// through the engine (a database minted by connecting to a fresh tdb_ name), from one sealed template.
// Each run asserts what its framework must do (the expected errors among it); a third test then
// requires what the two runs observed (rows, schema, errors with their SQLSTATEs, notices, CLI output)
// to be identical. Per-phase times go to stdout, one line per run; PGX_COMPAT_DUMP=DIR writes each
// run's transcript and times there as JSON. Prisma is not covered: every command of its CLI, migrate
// included, needs Prisma's native schema engine from binaries.prisma.sh, which this environment cannot
// download (docs/compatibility.md, "Prisma: not covered").

import { expect } from 'chai';
import { rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { directConnection } from '../helpers/commands.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';
import { LIFECYCLES } from './lifecycles/index.js';
import { formatTimes, runLifecycle, type RunResult } from './lifecycles/lifecycle.js';
import { firstDifference } from './lifecycles/compare.js';
import { buildTemplate, directTarget, engineTarget, type Target, type TargetName } from './lifecycles/targets.js';
import { scratchDir } from '../helpers/scratch.js';

describe('compat: framework lifecycles on direct PostgreSQL 18 and through the engine', function () {
  this.timeout(120_000);
  let rt: TestRuntime;
  let parent: string;
  const targets = {} as Record<TargetName, Target>;

  before(async function () {
    // A long grace: the janitor must not drop a lifecycle's database while it runs; each run drops its own.
    rt = await startTestRuntime({ grace: 600 });
    const { host, port, user } = rt.connection();
    await buildTemplate({ host, port, user });
    const direct = directConnection(rt);
    targets.direct = directTarget({ host: direct.host, port: direct.port, user: direct.user });
    targets.pgx = engineTarget({ host, port, user });
    parent = scratchDir('pgx-compat-');
  });

  after(async function () {
    await rt?.stop();
    if (parent) rmSync(parent, { recursive: true, force: true });
  });

  for (const lifecycle of LIFECYCLES) {
    describe(`${lifecycle.name}: ${lifecycle.about}`, function () {
      let projectDir: string;
      const results: Partial<Record<TargetName, RunResult>> = {};

      before(async function () {
        projectDir = await lifecycle.prepare(parent);
      });

      for (const name of ['direct', 'pgx'] as const) {
        it(`migrate, fixtures, model tests, second migration, model tests, down, drop: ${name === 'pgx' ? 'through the engine' : 'direct PostgreSQL 18'}`, async function () {
          const r = await runLifecycle(lifecycle, targets[name], projectDir);
          console.log(`      ${formatTimes(lifecycle.name, r)}`);
          results[name] = r;
          if (process.env.PGX_COMPAT_DUMP) writeFileSync(path.join(process.env.PGX_COMPAT_DUMP, `${lifecycle.name}-${name}.json`), JSON.stringify(r, null, 1));
          expect(r.entries.filter((e) => 'error' in e), 'every lifecycle meets at least one expected error').to.not.be.empty;
        });
      }

      it('observes the same rows, schema, errors and notices on both', function () {
        const { direct, pgx } = results;
        if (!direct || !pgx) expect.fail(`a run failed (direct: ${direct ? 'ok' : 'failed'}, engine: ${pgx ? 'ok' : 'failed'}), nothing to compare`);
        const diff = firstDifference(direct.entries, pgx.entries);
        if (diff) expect.fail(`${lifecycle.name}: the engine's run differs from direct PostgreSQL's\n${diff}`);
        expect(pgx.entries).to.deep.equal(direct.entries);
      });
    });
  }
});
