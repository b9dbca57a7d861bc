// Errors are told apart by their code (src/errors.ts), never by their message: a message is words for a
// person and may be reworded at any time. A grep over src/ finds an error's message being matched, in
// the forms that has taken: `.message.includes(...)`, `/.../.test(err.message)`, `.exec(i.message)`,
// `err.message === '...'`.

import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const src = path.join(root, 'src');

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? sourceFiles(p) : e.name.endsWith('.ts') ? [p] : [];
  });
}

/**
 * Ways a message gets matched; `X.message` is any property access ending in .message. Comparing two
 * messages (a condition's old and new text) is not matching one against words, so only literals count.
 */
const MATCHING = [
  /\.message\s*\??\.\s*(includes|startsWith|endsWith|match|matchAll|search|indexOf|localeCompare)\s*\(/,
  /\.(test|exec)\(\s*[\w$.?()]*\.message\b/,
  /\bmatch\(\s*[\w$.?()]*\.message\b/,
  /(?<!typeof\s+[\w$.?()]*)\.message\s*(===|!==|==|!=)\s*['"`]/,
  /['"`]\s*(===|!==|==|!=)\s*[\w$.?()]*\.message\b/,
];



describe('errors are matched by code, not by message', () => {
  it('no file in src/ matches an error by its message text', () => {
    const found: Record<string, string[]> = {};
    for (const file of sourceFiles(src)) {
      const rel = path.relative(root, file);
      fs.readFileSync(file, 'utf8')
        .split('\n')
        .forEach((line, i) => {
          if (/^\s*(\/\/|\*)/.test(line)) return;
          if (MATCHING.some((re) => re.test(line))) (found[rel] ??= []).push(`${rel}:${i + 1}: ${line.trim()}`);
        });
    }
    expect(Object.values(found).flat()).to.deep.equal([]);
  });

  it('the check sees the forms it is meant to see', () => {
    const caught = (line: string): boolean => MATCHING.some((re) => re.test(line));
    expect(caught("if (err.message.includes('does not exist')) return;")).to.equal(true);
    expect(caught('if (/^request id /.test(err.message)) throw e;')).to.equal(true);
    expect(caught('const r = / is out of range/.exec(i.message);')).to.equal(true);
    expect(caught("if ((err as Error).message === 'timeout expired') return;")).to.equal(true);
    expect(caught("return err.message?.startsWith('x');")).to.equal(true);
    expect(caught('lines.push(`error ${err.code}: ${err.message}`);')).to.equal(false);
    expect(caught("if (err.code === 'UNKNOWN_DATABASE') return;")).to.equal(false);
    expect(caught("if (typeof body.message === 'string') return body.message;")).to.equal(false);
  });
});
