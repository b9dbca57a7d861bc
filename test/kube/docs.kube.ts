// docs/operator.md's "A first Branch, from a shell", run as written: each line of its sh block in bash
// with the real helm and kubectl (from the npm package the chart tests use) against the real API
// server, as the cluster admin. The operator runs in this process with a token of the ServiceAccount
// `helm install` made and the Role it bound (its Deployment's Pod cannot run on the test node: there
// is no image), so the chart as installed by helm is what grants it its requests.

import { expect } from 'chai';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import type { Operator } from '../../src/operator/operator.js';
import { tokenKubeconfig } from '../helpers/control-plane/pki.js';
import { kubeTools, root } from '../operator/kube-tools.js';
import { installCrds, plane } from './hooks.js';
import { forbidden, podApi, resolvedUrl, startOperator, statusOf, waitFor, type Cluster } from './harness.js';

const NS = 'pgx-system';

/** The first sh block under a heading of docs/operator.md, one command a line. */
function docCommands(heading = '## A first Branch, from a shell'): string[] {
  const md = fs.readFileSync(path.join(root, 'docs/operator.md'), 'utf8');
  const at = md.indexOf(heading);
  if (at < 0) throw new Error(`docs/operator.md has no section "${heading}"`);
  const block = /```sh\n([\s\S]*?)```/.exec(md.slice(at));
  if (!block) throw new Error('the section has no sh block');
  return block[1]!.split('\n').filter((l) => l.trim() !== '' && !l.startsWith('#'));
}

describe('docs/operator.md, its kubectl and helm commands as written, on the real API server', function () {
  this.timeout(600_000);
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'pgx-docs-'));
  let op: Operator | undefined;
  let c: Cluster | undefined;

  function bash(line: string): Promise<{ code: number; out: string }> {
    const tools = kubeTools();
    return new Promise((resolve) => {
      execFile('bash', ['--noprofile', '--norc', '-eo', 'pipefail', '-c', line], {
        cwd: root,
        timeout: 300_000,
        env: { PATH: `${path.dirname(tools.kubectl)}:${path.dirname(tools.helm)}:${process.env.PATH ?? ''}`, HOME: home, KUBECONFIG: plane().cp.adminKubeconfig },
      }, (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, out: `${stdout}${stderr}` }));
    });
  }

  /** The operator as the chart's ServiceAccount in NS, with a token from the TokenRequest API. */
  async function operatorFromChart(): Promise<Cluster> {
    const { cp } = plane();
    const kc = cp.kubeConfig();
    const core = kc.makeApiClient(CoreV1Api);
    const deploy = JSON.parse((await bash(`kubectl -n ${NS} get deploy -o json`)).out) as { items: { spec: { template: { spec: { serviceAccountName: string } } } }[] };
    const sa = deploy.items[0]?.spec.template.spec.serviceAccountName;
    if (!sa) throw new Error('helm install made no operator Deployment');
    const tr = await core.createNamespacedServiceAccountToken({ name: sa, namespace: NS, body: { spec: { audiences: [], expirationSeconds: 3600 } } });
    const operatorKc = new KubeConfig();
    operatorKc.loadFromString(tokenKubeconfig(cp.url, cp.pki, tr.status!.token!, NS));
    const operatorUser = `system:serviceaccount:${NS}:${sa}`;
    const requests = () => cp.requests().filter((r) => r.namespace === NS || r.user === operatorUser);
    return { ns: NS, kc, operatorKc, operatorUser, core, custom: kc.makeApiClient(CustomObjectsApi), requests, writes: () => [] };
  }

  after(async function () {
    await op?.stop();
    await bash(`helm uninstall pgx -n ${NS} --wait --timeout 120s`);
    // helm.sh/resource-policy: keep: the CRDs (and every object of our kinds) outlive the release.
    const kept = await bash('kubectl get crd runtimes.pgx.dev templates.pgx.dev branches.pgx.dev -o name');
    if (kept.code !== 0) installCrds(plane().cp);
    expect(kept, kept.out).to.include({ code: 0 });
    await bash(`kubectl delete ns ${NS} --wait=false`);
    fs.rmSync(home, { recursive: true, force: true });
    if (c) expect(forbidden(c), 'requests the chart refused the operator').to.deep.equal([]);
  });

  it('installs the chart, adds a Runtime with helm upgrade, and takes a Branch from apply to delete', async function () {
    // The suite applied the CRDs with kubectl (hooks.ts), as a cluster that ran a chart which shipped
    // them in crds/: the docs' "Upgrading" commands hand them to the release, or helm install refuses
    // to take over objects it does not own.
    for (const line of docCommands('## Upgrading')) {
      if (line.startsWith('helm ')) continue; // the upgrade itself: the flow below installs and upgrades
      const r = await bash(line);
      expect(r, `${line}\n${r.out}`).to.include({ code: 0 });
    }
    const lines = docCommands();
    expect(lines[0]).to.match(/^helm install /);
    let database = '';
    for (const line of lines) {
      const r = await bash(line);
      expect(r, `${line}\n${r.out}`).to.include({ code: 0 });
      if (line.startsWith('helm install ')) {
        expect(r.out).to.contain('STATUS: deployed');
        c = await operatorFromChart();
        op = await startOperator(c, { leaseNamespace: NS });
      } else if (line.startsWith('helm upgrade ')) {
        expect(r.out).to.contain('STATUS: deployed').and.contain('REVISION: 2');
      } else if (/wait --for=condition=Ready branch\//.test(line)) {
        expect(r.out).to.contain('branch.pgx.dev/pr-123 condition met');
      } else if (/get branches$/.test(line)) {
        const [header, row] = r.out.trim().split('\n');
        expect(header).to.match(/^NAME\s+PHASE\s+TEMPLATE\s+DATABASE\s+EXPIRES\s+AGE$/);
        const m = /^pr-123\s+Ready\s+app\s+(tdb_app__[0-9a-f]{12})\s+\S+\s+\S+$/.exec(row ?? '');
        expect(m, r.out).to.not.equal(null);
        database = m![1]!;
      } else if (/-o wide$/.test(line)) {
        expect(r.out.split('\n')[0]).to.match(/^NAME\s+PHASE\s+TEMPLATE\s+DATABASE\s+EXPIRES\s+POD\s+SECRET\s+AGE$/);
        expect(r.out).to.match(/main-0\s+pr-123-db/);
      } else if (line.includes(' describe ')) {
        expect(r.out).to.match(/^Name:\s+pr-123$/m).and.match(/^Kind:\s+Branch$/m);
        const events = r.out.slice(r.out.indexOf('Events:'));
        expect(events).to.match(/Normal\s+Ready\s+/);
      } else if (line.includes('DATABASE_URL')) {
        const client = new pg.Client({ connectionString: await resolvedUrl(r.out.trim()) });
        await client.connect();
        try {
          expect((await client.query<{ email: string }>('SELECT email FROM users')).rows).to.deep.equal([{ email: 'demo@example.invalid' }]);
        } finally {
          await client.end();
        }
      } else if (line.includes('--server-side')) {
        expect(r.out).to.contain('branch.pgx.dev/pr-123 serverside-applied');
        const b = (await c!.custom.getNamespacedCustomObject({ group: 'pgx.dev', version: 'v1alpha1', namespace: NS, plural: 'branches', name: 'pr-123' })) as { metadata: { managedFields: { manager: string; operation: string }[] } };
        expect(b.metadata.managedFields.map((f) => `${f.manager}/${f.operation}`)).to.include('kubectl/Apply');
        expect(statusOf<{ phase: string; database: string }>(b as never)).to.include({ phase: 'Ready', database });
      } else if (line.includes(' delete ')) {
        expect(r.out).to.contain('branch.pgx.dev "pr-123" deleted');
        const api = await podApi(c!, 'main', 'main-0');
        expect((await api.listDatabases()).map((d) => d.name)).to.not.include(database);
      }
    }
    expect(database).to.match(/^tdb_app__/);
    await waitFor('nothing refused', async () => (forbidden(c!).length === 0 ? true : null), 1_000).catch(() => undefined);
  });
});
