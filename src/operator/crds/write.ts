// `npm run crds`: writes crds/*.yaml from the zod schemas. test/operator/crds.test.ts fails when the
// checked-in files differ from what this writes.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { renderCrdFiles } from './index.js';

// dist/src/operator/crds/write.js -> the checkout root
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../..');
const dir = path.join(root, 'crds');
fs.mkdirSync(dir, { recursive: true });
for (const { file, text } of renderCrdFiles()) {
  const target = path.join(dir, file);
  const old = fs.existsSync(target) ? fs.readFileSync(target, 'utf8') : null;
  if (old !== text) fs.writeFileSync(target, text);
  process.stdout.write(`${old === text ? 'unchanged' : 'wrote'} ${path.relative(root, target)}\n`);
}
