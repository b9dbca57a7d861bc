// Runtime pods against the "restricted" Pod Security Standard, checked rule by rule as the standard
// writes them (https://kubernetes.io/docs/concepts/security/pod-security-standards/, baseline and
// restricted, Kubernetes 1.32), on the StatefulSet the operator makes; and the Runtime's scheduling
// fields (nodeSelector, tolerations, affinity, topologySpreadConstraints, imagePullSecrets), /dev/shm
// and startupProbe there. The real API server's PodSecurity admission checks the same pods in
// test/kube/platform.kube.ts.

import type { V1Container, V1PodSpec } from '@kubernetes/client-node';
import { expect } from 'chai';
import { statefulSet } from '../../src/operator/controllers/runtime-objects.js';
import { parseObject, runtime as runtimeSchema, type Runtime } from '../../src/operator/crds/index.js';
import { DEFAULT_POD_NETWORK } from '../../src/operator/pods.js';

const RESTRICTED_VOLUMES = ['configMap', 'csi', 'downwardAPI', 'emptyDir', 'ephemeral', 'persistentVolumeClaim', 'projected', 'secret'];
const BASELINE_CAPABILITIES = ['AUDIT_WRITE', 'CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'FSETID', 'KILL', 'MKNOD', 'NET_BIND_SERVICE', 'SETFCAP', 'SETGID', 'SETPCAP', 'SETUID', 'SYS_CHROOT'];

/** Every violation of the restricted profile (which includes baseline) in a pod spec, as the standard names its controls. */
export function restrictedViolations(pod: V1PodSpec): string[] {
  const out: string[] = [];
  const containers: V1Container[] = [...(pod.initContainers ?? []), ...pod.containers];
  // Baseline.
  if (pod.hostNetwork || pod.hostPID || pod.hostIPC) out.push('Host Namespaces');
  for (const c of containers) {
    const sc = c.securityContext ?? {};
    if (sc.privileged) out.push(`Privileged Containers: ${c.name}`);
    for (const cap of sc.capabilities?.add ?? []) if (!BASELINE_CAPABILITIES.includes(cap)) out.push(`Capabilities: ${c.name} adds ${cap}`);
    for (const p of c.ports ?? []) if (p.hostPort) out.push(`Host Ports: ${c.name}`);
    if (sc.procMount && sc.procMount !== 'Default') out.push(`/proc Mount Type: ${c.name}`);
    if (sc.seccompProfile?.type === 'Unconfined') out.push(`Seccomp (baseline): ${c.name}`);
  }
  if (pod.securityContext?.seccompProfile?.type === 'Unconfined') out.push('Seccomp (baseline): pod');
  for (const v of pod.volumes ?? []) if ((v as { hostPath?: unknown }).hostPath) out.push(`HostPath Volumes: ${v.name}`);
  // Restricted.
  for (const v of pod.volumes ?? []) {
    const kinds = Object.keys(v).filter((k) => k !== 'name');
    if (!kinds.every((k) => RESTRICTED_VOLUMES.includes(k))) out.push(`Volume Types: ${v.name} (${kinds.join(', ')})`);
  }
  const podNonRoot = pod.securityContext?.runAsNonRoot === true;
  const podSeccomp = ['RuntimeDefault', 'Localhost'].includes(pod.securityContext?.seccompProfile?.type ?? '');
  if (pod.securityContext?.runAsUser === 0) out.push('Running as Non-root user: pod runAsUser 0');
  for (const c of containers) {
    const sc = c.securityContext ?? {};
    if (sc.allowPrivilegeEscalation !== false) out.push(`Privilege Escalation: ${c.name}`);
    if (!(sc.runAsNonRoot === true || (podNonRoot && sc.runAsNonRoot !== false))) out.push(`Running as Non-root: ${c.name}`);
    if (sc.runAsUser === 0) out.push(`Running as Non-root user: ${c.name}`);
    const seccomp = sc.seccompProfile?.type;
    if (!(['RuntimeDefault', 'Localhost'].includes(seccomp ?? '') || (podSeccomp && seccomp === undefined))) out.push(`Seccomp: ${c.name}`);
    if (!(sc.capabilities?.drop ?? []).includes('ALL')) out.push(`Capabilities: ${c.name} does not drop ALL`);
    for (const cap of sc.capabilities?.add ?? []) if (cap !== 'NET_BIND_SERVICE') out.push(`Capabilities: ${c.name} adds ${cap}`);
  }
  return out;
}

function runtimeOf(spec: Record<string, unknown>): Runtime {
  const r = parseObject(runtimeSchema, { apiVersion: 'pgx.dev/v1alpha1', kind: 'Runtime', metadata: { name: 'main', namespace: 'ns', uid: 'u-1' }, spec: { image: 'ghcr.io/pgx/pgx:1', ...spec } });
  if (!r.ok) throw new Error(r.message);
  return r.value;
}

describe('operator: runtime pods and the restricted Pod Security profile', () => {
  it('makes pods that pass every control of the restricted profile', () => {
    const pod = statefulSet(runtimeOf({}), DEFAULT_POD_NETWORK).spec!.template.spec!;
    expect(restrictedViolations(pod)).to.deep.equal([]);
  });

  it('mounts no ServiceAccount token: the runtime never calls the Kubernetes API', () => {
    expect(statefulSet(runtimeOf({}), DEFAULT_POD_NETWORK).spec!.template.spec!.automountServiceAccountToken).to.equal(false);
  });

  it('the check finds what the profile refuses (so an empty list means something)', () => {
    const bad: V1PodSpec = { hostNetwork: true, containers: [{ name: 'c', securityContext: { capabilities: { add: ['SYS_ADMIN'] } } }], volumes: [{ name: 'h', hostPath: { path: '/' } }] };
    expect(restrictedViolations(bad)).to.include.members(['Host Namespaces', 'Capabilities: c adds SYS_ADMIN', 'HostPath Volumes: h', 'Privilege Escalation: c', 'Running as Non-root: c', 'Seccomp: c', 'Capabilities: c does not drop ALL']);
  });

  it('gives PostgreSQL a memory-backed /dev/shm of the size asked, and a startupProbe for a slow recovery', () => {
    const pod = statefulSet(runtimeOf({ sharedMemory: '1Gi', startupTimeout: '20m' }), DEFAULT_POD_NETWORK).spec!.template.spec!;
    const c = pod.containers[0]!;
    expect(c.volumeMounts?.find((m) => m.mountPath === '/dev/shm')?.name).to.equal('shm');
    expect(pod.volumes?.find((v) => v.name === 'shm')?.emptyDir).to.deep.equal({ medium: 'Memory', sizeLimit: '1Gi' });
    expect(c.startupProbe?.httpGet?.path).to.equal('/healthz');
    // 20 minutes of probes every 5 s before the kubelet gives up; liveness only after that.
    expect((c.startupProbe!.periodSeconds ?? 0) * (c.startupProbe!.failureThreshold ?? 0)).to.equal(1200);
    const defaults = statefulSet(runtimeOf({}), DEFAULT_POD_NETWORK).spec!.template.spec!;
    expect(defaults.volumes?.find((v) => v.name === 'shm')?.emptyDir?.sizeLimit).to.equal('256Mi');
  });

  it('serves /metrics on a named port of its own, without the token: the flag and the container port agree', () => {
    const pod = statefulSet(runtimeOf({}), { ...DEFAULT_POD_NETWORK, metricsPort: 9300 }).spec!.template.spec!;
    const c = pod.containers[0]!;
    expect(c.ports).to.deep.include({ name: 'metrics', containerPort: 9300 });
    const args = c.args!;
    expect(args[args.indexOf('--metrics-port') + 1]).to.equal('9300');
    expect(args[args.indexOf('--metrics-host') + 1]).to.equal('0.0.0.0');
    // The API port is unchanged and keeps its token.
    expect(args[args.indexOf('--api-port') + 1]).to.equal(String(DEFAULT_POD_NETWORK.apiPort));
    expect(args).to.include('--api-token-file');
    expect(statefulSet(runtimeOf({}), DEFAULT_POD_NETWORK).spec!.template.spec!.containers[0]!.ports).to.deep.include({ name: 'metrics', containerPort: 9187 });
  });

  it("mounts the Runtime's TLS Secret read-only (tls.crt and tls.key only) and starts the runtime with it, still restricted", () => {
    const plain = statefulSet(runtimeOf({}), DEFAULT_POD_NETWORK).spec!.template.spec!;
    expect(plain.containers[0]!.args).to.not.include('--tls-cert');
    expect(plain.volumes?.map((v) => v.name)).to.not.include('tls');
    const pod = statefulSet(runtimeOf({ tls: { secretName: 'main-tls' } }), DEFAULT_POD_NETWORK).spec!.template.spec!;
    const c = pod.containers[0]!;
    const args = c.args!;
    expect(args[args.indexOf('--tls-cert') + 1]).to.equal('/etc/pgx-tls/tls.crt');
    expect(args[args.indexOf('--tls-key') + 1]).to.equal('/etc/pgx-tls/tls.key');
    expect(c.volumeMounts).to.deep.include({ name: 'tls', mountPath: '/etc/pgx-tls', readOnly: true });
    expect(pod.volumes?.find((v) => v.name === 'tls')?.secret).to.deep.equal({
      secretName: 'main-tls',
      defaultMode: 0o440,
      items: [{ key: 'tls.crt', path: 'tls.crt' }, { key: 'tls.key', path: 'tls.key' }],
    });
    expect(restrictedViolations(pod)).to.deep.equal([]);
  });

  it('refuses a TLS Secret name that cannot name a Secret', () => {
    expect(() => runtimeOf({ tls: { secretName: 'Not_A_Name' } })).to.throw(/tls\.secretName/);
    expect(() => runtimeOf({ tls: {} })).to.throw(/secretName/);
  });

  it('places pods as the Runtime says: nodeSelector, tolerations, affinity, topology spread and pull secrets', () => {
    const affinity = { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'zfs', operator: 'In', values: ['yes'] }] }] } } };
    const spread = { maxSkew: 1, topologyKey: 'topology.kubernetes.io/zone', whenUnsatisfiable: 'ScheduleAnyway', labelSelector: { matchLabels: { 'pgx.dev/runtime': 'main' } } };
    const pod = statefulSet(
      runtimeOf({
        nodeSelector: { 'pgx.dev/storage': 'zfs' },
        tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'pgx', effect: 'NoSchedule' }],
        affinity,
        topologySpreadConstraints: [spread],
        imagePullSecrets: [{ name: 'registry' }],
      }),
      DEFAULT_POD_NETWORK,
    ).spec!.template.spec!;
    expect(pod.nodeSelector).to.deep.equal({ 'pgx.dev/storage': 'zfs' });
    expect(pod.tolerations).to.deep.equal([{ key: 'dedicated', operator: 'Equal', value: 'pgx', effect: 'NoSchedule' }]);
    expect(pod.affinity).to.deep.equal(affinity);
    expect(pod.topologySpreadConstraints).to.deep.equal([spread]);
    expect(pod.imagePullSecrets).to.deep.equal([{ name: 'registry' }]);
  });
});
