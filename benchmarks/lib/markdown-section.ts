// Generated sections of a hand-written Markdown file: the text between `<!-- NAME:start -->` and
// `<!-- NAME:end -->` is replaced; everything else is left as its author wrote it.

import { existsSync, readFileSync, writeFileSync } from 'node:fs';

export function replaceSection(file: string, name: string, body: string): void {
  const start = `<!-- ${name}:start -->`;
  const end = `<!-- ${name}:end -->`;
  const block = `${start}\n${body.trim()}\n${end}`;
  const text = existsSync(file) ? readFileSync(file, 'utf8') : '';
  const i = text.indexOf(start);
  const j = text.indexOf(end);
  const next = i >= 0 && j > i ? text.slice(0, i) + block + text.slice(j + end.length) : `${text.trimEnd()}\n\n${block}\n`;
  writeFileSync(file, next);
}
