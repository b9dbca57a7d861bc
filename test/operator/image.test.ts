// The Dockerfile cannot be built here (no Docker engine), so this holds it to what the operator renders:
// the Dockerfile is parsed, and its last stage's user, exposed ports, entrypoint, data volume, PostgreSQL
// binaries and health check are compared with the Runtime controller's StatefulSet and with the
// operator Deployment of the Helm chart and the kustomize base; the build stages and .dockerignore are
// checked to ship what the compiled code needs at run time.

import type { V1Container, V1PodSpec } from '@kubernetes/client-node';
import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { DATA_DIR, IMAGE_PG_BIN, statefulSet } from '../../src/operator/controllers/runtime-objects.js';
import { parseObject, runtime as runtimeSchema } from '../../src/operator/crds/index.js';
import { DEFAULT_POD_NETWORK } from '../../src/operator/pods.js';
import { PG_MAJOR } from '../../src/runtime/postgres/pg-binaries.js';
import type { JsonObject } from '../helpers/kube-api/patch.js';
import { helm, kustomize, root, yamlObjects } from './kube-tools.js';

interface Instruction {
  op: string;
  /** The arguments as written (after ARG substitution). */
  text: string;
  /** Exec form (a JSON array), when written so. */
  exec: string[] | null;
}

interface Stage {
  from: string;
  name: string | null;
  body: Instruction[];
}

/** Instructions by stage: comments and blank lines dropped, `\` continuations joined, global ARGs substituted. */
function parseDockerfile(text: string): Stage[] {
  const lines: string[] = [];
  let pending = '';
  for (const raw of text.split('\n')) {
    if (pending === '' && /^\s*(#|$)/.test(raw)) continue;
    if (raw.endsWith('\\')) {
      pending += `${raw.slice(0, -1)} `;
      continue;
    }
    lines.push(pending + raw);
    pending = '';
  }
  const args = new Map<string, string>();
  const stages: Stage[] = [];
  for (const line of lines) {
    const m = /^\s*([A-Za-z]+)\s+(.*)$/.exec(line);
    if (!m) throw new Error(`not an instruction: ${line}`);
    const op = m[1]!.toUpperCase();
    const text = m[2]!.trim().replace(/\$\{(\w+)\}|\$(\w+)/g, (all, a: string | undefined, b: string | undefined) => args.get(a ?? b ?? '') ?? all);
    let exec: string[] | null = null;
    if (text.startsWith('[')) {
      try {
        exec = JSON.parse(text) as string[];
      } catch {
        exec = null;
      }
    }
    if (op === 'ARG' && stages.length === 0) {
      const [k, v] = text.split('=');
      args.set(k!, v ?? '');
      continue;
    }
    if (op === 'FROM') {
      const f = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(text)!;
      stages.push({ from: f[1]!, name: f[2] ?? null, body: [] });
      continue;
    }
    if (stages.length === 0) throw new Error(`${op} before the first FROM`);
    stages[stages.length - 1]!.body.push({ op, text, exec });
  }
  return stages;
}

describe('the Dockerfile, against what the operator renders', function () {
  this.timeout(60_000);
  const stages = parseDockerfile(fs.readFileSync(path.join(root, 'Dockerfile'), 'utf8'));
  const final = stages[stages.length - 1]!;
  const all = (op: string, stage: Stage = final): Instruction[] => stage.body.filter((i) => i.op === op);
  const one = (op: string): Instruction => {
    const found = all(op);
    expect(found, op).to.have.length(1);
    return found[0]!;
  };
  const workdir = (): string => all('WORKDIR').at(-1)!.text;

  const parsed = parseObject(runtimeSchema, { apiVersion: 'pgx.dev/v1alpha1', kind: 'Runtime', metadata: { name: 'main', namespace: 'previews', uid: 'u-1' }, spec: { image: 'ghcr.io/pgx/pgx:0.1.0' } });
  if (!parsed.ok) throw new Error(parsed.message);
  const sts = statefulSet(parsed.value, DEFAULT_POD_NETWORK);
  const pod = sts.spec!.template.spec!;
  const runtimeContainer = pod.containers[0]!;
  const arg = (name: string): string => {
    const i = runtimeContainer.args!.indexOf(name);
    expect(i, `${name} in the StatefulSet's args`).to.be.greaterThan(-1);
    return runtimeContainer.args![i + 1]!;
  };
  const operatorDeployments = (): { source: string; pod: V1PodSpec }[] =>
    [
      ['helm template (defaults)', helm('template', 'pgx', 'charts/pgx', '--namespace', 'pgx-system')],
      ['kubectl kustomize manifests/base', kustomize('manifests/base')],
    ].map(([source, text]) => {
      const d = yamlObjects(text!).find((o) => o.kind === 'Deployment') as JsonObject;
      return { source: source!, pod: ((d.spec as JsonObject).template as JsonObject).spec as unknown as V1PodSpec };
    });

  it('runs as the user, and with the group, of the pods it becomes', () => {
    const user = one('USER').text;
    expect(user).to.match(/^\d+:\d+$/, 'numeric, so runAsNonRoot can be checked without a passwd lookup');
    const sc = pod.securityContext!;
    expect(user).to.equal(`${sc.runAsUser}:${sc.runAsGroup}`);
    expect(sc.fsGroup).to.equal(sc.runAsGroup);
    for (const d of operatorDeployments()) expect(`${d.pod.securityContext?.runAsUser}:${d.pod.securityContext?.runAsGroup}`, d.source).to.equal(user);
  });

  it('exposes exactly the ports the runtime pods and the operator listen on', () => {
    const exposed = one('EXPOSE').text.split(/\s+/).map(Number).sort((a, b) => a - b);
    const ports = new Set(runtimeContainer.ports!.map((p) => p.containerPort));
    expect(Number(arg('--port'))).to.be.oneOf([...ports]);
    expect(Number(arg('--api-port'))).to.be.oneOf([...ports]);
    for (const d of operatorDeployments()) for (const p of d.pod.containers[0]!.ports ?? []) ports.add(p.containerPort);
    expect(exposed).to.deep.equal([...ports].sort((a, b) => a - b));
  });

  it('has the entrypoint the pods rely on: they set args only, `start` for a runtime and `operator` for the operator', () => {
    const entry = one('ENTRYPOINT').exec;
    expect(entry).to.deep.equal(['node', `${workdir()}/bin/pgx.js`]);
    // bin/pgx.js loads ../dist/src/cli/main.js: both must be in the image, under the WORKDIR.
    expect(fs.readFileSync(path.join(root, 'bin/pgx.js'), 'utf8')).to.contain("import('../dist/src/cli/main.js')");
    const copies = all('COPY').map((c) => c.text);
    expect(copies).to.include('bin ./bin').and.include('package.json ./');
    expect(copies.some((c) => /^--from=\S+ \S+\/dist\/src \.\/dist\/src$/.test(c))).to.equal(true);
    expect(runtimeContainer.command).to.equal(undefined);
    expect(runtimeContainer.args![0]).to.equal('start');
    for (const d of operatorDeployments()) {
      const c: V1Container = d.pod.containers[0]!;
      expect(c.command, d.source).to.equal(undefined);
      expect(c.args![0], d.source).to.equal('operator');
    }
  });

  it("keeps PostgreSQL's data on the volume the StatefulSet mounts, owned by the pod's user", () => {
    const mount = runtimeContainer.volumeMounts!.find((m) => m.name === sts.spec!.volumeClaimTemplates![0]!.metadata!.name)!;
    expect(mount.mountPath).to.equal(DATA_DIR);
    expect(one('VOLUME').exec).to.deep.equal([DATA_DIR]);
    expect(arg('--data-dir').startsWith(`${DATA_DIR}/`)).to.equal(true);
    const [uid, gid] = one('USER').text.split(':');
    expect(all('RUN').map((r) => r.text)).to.include(`install -d -o ${uid} -g ${gid} -m 0750 ${DATA_DIR}`);
  });

  it("uses the base image's PostgreSQL 18 through --pg-bin, checked at build time", () => {
    expect(final.from).to.match(new RegExp(`^postgres:${PG_MAJOR}(-|$)`));
    expect(arg('--pg-bin')).to.equal(IMAGE_PG_BIN);
    expect(IMAGE_PG_BIN).to.equal(`/usr/lib/postgresql/${PG_MAJOR}/bin`);
    expect(all('RUN').map((r) => r.exec)).to.deep.include([`${IMAGE_PG_BIN}/postgres`, '--version']);
    expect(all('RUN').map((r) => r.exec)).to.deep.include(['node', '--version']);
    expect(arg('--auth')).to.equal('scram');
    expect(all('ENV').map((e) => e.text).join(' ')).to.match(/\bPGX_CONTAINER=1\b/);
  });

  it('checks health where the liveness probe does; readiness is /readyz on the same port', () => {
    const live = runtimeContainer.livenessProbe!.httpGet!;
    const ready = runtimeContainer.readinessProbe!.httpGet!;
    expect([live.path, ready.path]).to.deep.equal(['/healthz', '/readyz']);
    expect(ready.port).to.equal(live.port);
    expect(String(live.port)).to.equal(arg('--api-port'));
    expect(one('HEALTHCHECK').text).to.contain(`'http://127.0.0.1:${live.port}${live.path}'`);
    expect(one('STOPSIGNAL').text).to.equal('SIGTERM');
  });

  it('builds in stages: npm ci and npm run build, then production dependencies only, on a Node.js the package supports', () => {
    const runs = (s: Stage): string => all('RUN', s).map((r) => r.text).join('\n');
    const build = stages.find((s) => /npm ci\b(?!.*--omit=dev)/.test(runs(s)) && /npm run build/.test(runs(s)));
    const deps = stages.find((s) => /npm ci .*--omit=dev/.test(runs(s)));
    expect(build, 'a stage with npm ci && npm run build').to.not.equal(undefined);
    expect(deps, 'a stage with npm ci --omit=dev').to.not.equal(undefined);
    expect(runs(final)).to.not.contain('npm');
    const copies = all('COPY').map((c) => c.text);
    expect(copies).to.include(`--from=${deps!.name} /app/node_modules ./node_modules`);
    expect(copies).to.include(`--from=${build!.name} /src/dist/src ./dist/src`);
    const node = stages.find((s) => /^node:/.test(s.from))!;
    const nodeMajor = Number(/^node:(\d+)/.exec(node.from)?.[1]);
    const engines = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { engines: { node: string } };
    expect(nodeMajor).to.be.at.least(Number(/(\d+)/.exec(engines.engines.node)![1]));
    expect(copies).to.include(`--from=${node.name} /usr/local/bin/node /usr/local/bin/node`);
  });

  it('ships every file under src/ the compiled code reads at run time, and .dockerignore lets in what COPY needs', () => {
    const copies = all('COPY').filter((c) => !c.text.startsWith('--from=')).map((c) => c.text.split(/\s+/)[0]!);
    const walk = (dir: string): string[] => fs.readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(`${dir}/${e.name}`) : [`${dir}/${e.name}`]));
    const assets = walk('src').filter((f) => !f.endsWith('.ts'));
    expect(assets.length).to.be.greaterThan(0);
    for (const f of assets) expect(copies.some((c) => f === c || f.startsWith(`${c.replace(/\/$/, '')}/`)), f).to.equal(true);

    // .dockerignore: last matching line wins; a directory pattern covers what is inside.
    const rules = fs.readFileSync(path.join(root, '.dockerignore'), 'utf8').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
    const included = (p: string): boolean => {
      let inc = true;
      for (const r of rules) {
        const negate = r.startsWith('!');
        const pat = (negate ? r.slice(1) : r).replace(/\/$/, '');
        const re = new RegExp(`^${pat.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*')}(/|$)`);
        if (re.test(p)) inc = negate;
      }
      return inc;
    };
    const stageCopies = stages.flatMap((s) => s.body.filter((i) => i.op === 'COPY' && !i.text.startsWith('--from=')).flatMap((i) => i.text.split(/\s+/).slice(0, -1)));
    for (const src of stageCopies) expect(included(src), `${src} is in the build context`).to.equal(true);
    for (const out of ['node_modules', 'dist', '.git', 'test', 'benchmarks', '.pgx']) expect(included(out), `${out} stays out`).to.equal(false);
  });

  it('builds the image the chart and the manifests name', () => {
    const values = yamlObjects(fs.readFileSync(path.join(root, 'charts/pgx/values.yaml'), 'utf8'))[0]!;
    const repo = (values.image as JsonObject).repository as string;
    expect(fs.readFileSync(path.join(root, 'Dockerfile'), 'utf8')).to.contain(`docker build -t ${repo}:`);
    expect(fs.readFileSync(path.join(root, 'manifests/base/kustomization.yaml'), 'utf8')).to.contain(`name: ${repo}`);
  });
});
