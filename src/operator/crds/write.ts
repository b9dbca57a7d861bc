// `npm run crds`: writes crds/*.yaml from the zod schemas, and the same into the Helm chart as
// templates (charts/pgx/templates/crds/: upgraded by `helm upgrade`, kept by `helm uninstall`) and the kustomize base
// (manifests/base/crds/: kustomize reads no file outside a kustomization's root). test/operator/crds.test.ts
// and chart.test.ts fail when a checked-in copy differs from what this writes.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { renderChartCrdFiles, renderCrdFiles } from './index.js';

// dist/src/operator/crds/write.js -> the checkout root
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../..');
for (const [d, files] of [['crds', renderCrdFiles()], ['charts/pgx/templates/crds', renderChartCrdFiles()], ['manifests/base/crds', renderCrdFiles()]] as const) {
  const dir = path.join(root, d);
  fs.mkdirSync(dir, { recursive: true });
  for (const { file, text } of files) {
    const target = path.join(dir, file);
    const old = fs.existsSync(target) ? fs.readFileSync(target, 'utf8') : null;
    if (old !== text) fs.writeFileSync(target, text);
    process.stdout.write(`${old === text ? 'unchanged' : 'wrote'} ${path.relative(root, target)}\n`);
  }
}
