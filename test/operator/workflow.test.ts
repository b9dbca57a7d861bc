// The GitHub Actions example (manifests/examples/branch-per-pr.yml) run for real: its `run` steps, as
// written, in bash with the real kubectl against the Kubernetes API double, the operator, and a real
// runtime pod holding the example Template. Only what needs GitHub is stood in for: the `${{ }}`
// expressions get a pull request number and attempt, the kubeconfig step is replaced by KUBECONFIG,
// and `npm ci` / `npm test` by a step that records DATABASE_URL so the test can connect with it.

import { expect } from 'chai';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { parse as parseYaml } from 'yaml';
import type { Operator } from '../../src/operator/operator.js';
import type { TestRuntime } from '../helpers/runtime.js';
import { apiOf, makeRuntime, read, startCluster, stopCluster, startOperator, startRuntimes, statusOf, waitFor, waitForCondition, waitForGone, type Cluster } from './harness.js';
import { kubeTools, root } from './kube-tools.js';
import { scratchDir } from '../helpers/scratch.js';

interface Step {
  name?: string;
  uses?: string;
  run?: string;
}

const PR = '123';
const RUN = '9001';
const ATTEMPT = '1';

describe('the GitHub Actions example, run against the API double and the operator', function () {
  this.timeout(180_000);
  let c: Cluster;
  let runtimes: TestRuntime[] = [];
  let op: Operator;
  const home = scratchDir('pgx-workflow-');

  /** bash -eo pipefail, as GitHub runs a `run` step, with kubectl on PATH and the double's kubeconfig. */
  function bash(script: string, env: Record<string, string>): Promise<{ code: number; out: string }> {
    const kubectlDir = path.dirname(kubeTools().kubectl);
    return new Promise((resolve) => {
      execFile(
        'bash',
        ['--noprofile', '--norc', '-eo', 'pipefail', '-c', script],
        { cwd: home, timeout: 150_000, env: { PATH: `${kubectlDir}:${process.env.PATH ?? ''}`, HOME: home, KUBECONFIG: c.api.kubeconfigPath, ...env } },
        (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, out: `${stdout}${stderr}` }),
      );
    });
  }

  before(async function () {
    c = await startCluster();
    runtimes = await startRuntimes(1);
    await makeRuntime(c, 'main', runtimes);
    op = await startOperator(c);
    await waitFor('leadership', async () => (op.isLeader ? true : null));
  });

  after(async function () {
    await op?.stop();
    await Promise.all(runtimes.map((r) => r.stop()));
    await stopCluster(c);
    fs.rmSync(home, { recursive: true, force: true });
  });

  it('applies the example Template with kubectl, then runs the workflow: Branch Ready, DATABASE_URL connects, Branch and database gone', async function () {
    const applied = await bash(`kubectl apply -f ${path.join(root, 'manifests/examples/template.yaml')}`, {});
    expect(applied, applied.out).to.include({ code: 0 });
    await waitForCondition(c, 'templates', 'app', 'Ready', 'Sealed');

    const workflow = parseYaml(fs.readFileSync(path.join(root, 'manifests/examples/branch-per-pr.yml'), 'utf8')) as {
      concurrency: { group: string; 'cancel-in-progress': boolean };
      jobs: { test: { env: Record<string, string>; steps: Step[] }; cleanup: { env: Record<string, string>; steps: Step[] } };
    };
    const job = workflow.jobs.test;
    const expr = (s: string, run = RUN): string => s.replaceAll('${{ github.event.pull_request.number }}', PR).replaceAll('${{ github.run_id }}', run).replaceAll('${{ github.run_attempt }}', ATTEMPT);
    const env = Object.fromEntries(Object.entries(job.env).map(([k, v]) => [k, expr(v)]));
    const branch = env.BRANCH!;
    // A Branch per run (two pushes to one PR never share one), one run per PR at a time.
    expect(branch).to.equal(`pr-${PR}-${RUN}-${ATTEMPT}`);
    expect(Object.fromEntries(Object.entries(job.env).map(([k, v]) => [k, expr(v, '9002')])).BRANCH).to.not.equal(branch);
    expect(expr(workflow.concurrency.group)).to.equal(`pr-database-${PR}`);
    expect(workflow.concurrency['cancel-in-progress']).to.equal(true);
    const urlFile = path.join(home, 'database-url');

    const ran: string[] = [];
    for (const step of job.steps) {
      if (step.run === undefined || step.name === 'kubeconfig') continue;
      let script = expr(step.run);
      if (/npm (ci|test)/.test(script)) script = script.replace(/^npm ci$/m, '').replace(/^npm test$/m, `printf '%s' "$DATABASE_URL" > ${urlFile}`);
      expect(script, `step "${step.name}" still has a GitHub expression`).to.not.contain('${{');
      const r = await bash(script, env);
      expect(r, `step "${step.name}": ${r.out}`).to.include({ code: 0 });
      ran.push(step.name ?? '');
      if (step.name === 'create the Branch') {
        // kubectl wait returned: the Branch is Ready, on the runtime pod.
        const obj = await read(c, 'branches', branch);
        expect(statusOf<{ phase: string }>(obj).phase).to.equal('Ready');
        expect(r.out).to.contain(`branch.pgx.dev/${branch} created`).and.contain('condition met');
      }
      if (step.name === 'test') {
        const client = new pg.Client({ connectionString: fs.readFileSync(urlFile, 'utf8') });
        await client.connect();
        try {
          expect((await client.query<{ email: string }>('SELECT email FROM users')).rows).to.deep.equal([{ email: 'demo@example.invalid' }]);
        } finally {
          await client.end();
        }
      }
    }
    expect(ran).to.deep.equal(['create the Branch', 'test', 'delete the Branch']);
    await waitForGone(c, 'branches', branch);
    const databases = (await apiOf(runtimes[0]!).listDatabases()).map((d) => d.name);
    expect(databases.filter((d) => d.startsWith('tdb_app__'))).to.deep.equal([]);
    // Deleting again (a re-run of the `always()` step) is fine: --ignore-not-found.
    const again = await bash(expr(job.steps.find((s) => s.name === 'delete the Branch')!.run!), env);
    expect(again, again.out).to.include({ code: 0 });

    // A run cancelled before its delete step left a Branch: closing the PR deletes it, by label.
    const leftover = await bash(expr(job.steps.find((s) => s.name === 'create the Branch')!.run!, '9003'), { ...env, BRANCH: `pr-${PR}-9003-1` });
    expect(leftover, leftover.out).to.include({ code: 0 });
    const cleanupEnv = Object.fromEntries(Object.entries(workflow.jobs.cleanup.env).map(([k, v]) => [k, expr(v)]));
    const cleanup = await bash(expr(workflow.jobs.cleanup.steps.find((s) => s.name === "delete the pull request's Branches")!.run!), cleanupEnv);
    expect(cleanup, cleanup.out).to.include({ code: 0 });
    expect(cleanup.out).to.contain(`branch.pgx.dev "pr-${PR}-9003-1" deleted`);
    await waitForGone(c, 'branches', `pr-${PR}-9003-1`);
  });
});
