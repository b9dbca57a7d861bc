// `pgx operator`: runs the Kubernetes operator until SIGINT/SIGTERM, in a cluster (the pod's service
// account) or against a kubeconfig. Lives here rather than in src/cli so the CLI only dispatches to it
// (src/cli may import src/operator, not the other way round).

import fs from 'node:fs';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { KubeConfig } from '@kubernetes/client-node';
import { createLogger, type LogFormat, type LogLevel } from '../log.js';
import { serveMetrics } from './metrics.js';
import { OperatorMetrics } from './metrics.js';
import { Operator } from './operator.js';

const OPERATOR_HELP = `pgx operator: run the PGX Kubernetes operator (Runtime, Template and Branch objects)

Usage: pgx operator [options]

Options:
  --kubeconfig FILE      use this kubeconfig (default: in cluster when run in a pod, else $KUBECONFIG or ~/.kube/config)
  --namespace NS[,NS..]  watch only these namespaces (default: the pod's namespace, else the kubeconfig context's)
  --all-namespaces       watch every namespace
  --lease-name NAME      the coordination.k8s.io Lease for leader election (default pgx-operator)
  --lease-namespace NS   where the Lease lives (default: the watched namespace, or the pod's)
  --identity NAME        this replica's name in the Lease (default $POD_NAME, else the host name)
  --metrics-port N       serve /metrics, /healthz and /readyz on this port (default 8080; 0 for none)
  --pod-api-port N       the runtime pods' control API port (default 7432)
  --pod-engine-port N    the runtime pods' PostgreSQL port, written into Branch Secrets (default 6432)
  --pod-metrics-port N   the runtime pods' metrics port: /metrics without the API token (default 9187)
  --pod-address-overrides
                         reach pods where their annotations pgx.dev/api-url, engine-host and engine-port say
                         (tests); off by default: whoever may annotate a pod could then receive the API token
  --resync SECONDS       reconcile every object again this often (default 300)
  --log-format json|text (default: text on a terminal, else json)
  --log-level error|warn|info|debug (default info)
  -h, --help             this help

Only the replica holding the Lease acts; run two for availability.
`;

const SA_NAMESPACE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';

/** A usage error: the error and where the usage is, as every pgx command says it (not the whole help). */
function usage(message: string): number {
  process.stderr.write(`pgx operator: ${message}\nRun 'pgx operator --help' for usage.\n`);
  return 2;
}

function port(text: string | undefined, fallback: number): number | null {
  if (text === undefined) return fallback;
  const n = Number(text);
  return Number.isInteger(n) && n >= 0 && n <= 65535 ? n : null;
}

export async function runOperator(argv: string[]): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        kubeconfig: { type: 'string' },
        namespace: { type: 'string' },
        'all-namespaces': { type: 'boolean' },
        'lease-name': { type: 'string' },
        'lease-namespace': { type: 'string' },
        identity: { type: 'string' },
        'metrics-port': { type: 'string' },
        'pod-api-port': { type: 'string' },
        'pod-engine-port': { type: 'string' },
        'pod-metrics-port': { type: 'string' },
        'pod-address-overrides': { type: 'boolean' },
        resync: { type: 'string' },
        'log-format': { type: 'string' },
        'log-level': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
    }));
  } catch (err) {
    return usage((err as Error).message);
  }
  if (values.help) {
    process.stdout.write(OPERATOR_HELP);
    return 0;
  }
  const metricsPort = port(values['metrics-port'], 8080);
  const apiPort = port(values['pod-api-port'], 7432);
  const enginePort = port(values['pod-engine-port'], 6432);
  const podMetricsPort = port(values['pod-metrics-port'], 9187);
  if (metricsPort === null || apiPort === null || enginePort === null || podMetricsPort === null) return usage('ports are integers from 0 to 65535');
  const resync = values.resync === undefined ? 300 : Number(values.resync);
  if (!Number.isFinite(resync) || resync < 1) return usage('--resync takes a number of seconds, at least 1');
  if (values['log-format'] !== undefined && !['json', 'text'].includes(values['log-format'])) return usage('--log-format is json or text');
  if (values['log-level'] !== undefined && !['error', 'warn', 'info', 'debug'].includes(values['log-level'])) return usage('--log-level is error, warn, info or debug');
  if (values['all-namespaces'] && values.namespace !== undefined) return usage('give --namespace or --all-namespaces, not both');

  const kc = new KubeConfig();
  const inCluster = values.kubeconfig === undefined && process.env.KUBERNETES_SERVICE_HOST !== undefined && fs.existsSync(SA_NAMESPACE);
  if (values.kubeconfig !== undefined) kc.loadFromFile(values.kubeconfig);
  else if (inCluster) kc.loadFromCluster();
  else kc.loadFromDefault();
  const podNamespace = inCluster ? fs.readFileSync(SA_NAMESPACE, 'utf8').trim() : undefined;
  const contextNamespace = kc.getContextObject(kc.getCurrentContext())?.namespace;
  const listed = values.namespace?.split(',').map((n) => n.trim()).filter((n) => n !== '');
  if (listed !== undefined && (listed.length === 0 || listed.some((n) => !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(n) || n.length > 63))) {
    return usage('--namespace takes namespace names separated by commas, e.g. --namespace previews,team-a');
  }
  const home = listed?.[0] ?? podNamespace ?? contextNamespace ?? 'default';
  const namespace = values['all-namespaces'] ? null : listed !== undefined && listed.length > 1 ? [...new Set(listed)] : home;

  const logger = createLogger({
    ...(values['log-format'] !== undefined ? { format: values['log-format'] as LogFormat } : {}),
    level: (values['log-level'] ?? 'info') as LogLevel,
  });
  const metrics = new OperatorMetrics({ defaultMetrics: true });
  const operator = new Operator({
    kc,
    namespace,
    leaseNamespace: values['lease-namespace'] ?? podNamespace ?? home,
    leaseName: values['lease-name'] ?? 'pgx-operator',
    identity: values.identity ?? process.env.POD_NAME ?? os.hostname(),
    logger,
    metrics,
    network: { apiPort, enginePort, metricsPort: podMetricsPort, addressOverrides: values['pod-address-overrides'] === true },
    resyncMs: resync * 1000,
  });
  const server = metricsPort === 0 ? null : await serveMetrics(metrics, metricsPort, () => operator.ready);
  if (server) logger.info('metrics listening', { port: server.port, paths: '/metrics /healthz /readyz' });
  await operator.start();
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  logger.info('stopping operator', {});
  await operator.stop();
  await server?.close();
  return 0;
}
