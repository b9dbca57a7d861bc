// Rules a reviewer checks, checked by CI instead: which folders may import which, where time is read,
// and that the codec stays pure.

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

/** The top-level area a file belongs to: wire, engine, runtime, api, operator, mcp, cli, or a leaf file. */
function area(file: string): string {
  const rel = path.relative(src, file);
  return rel.includes(path.sep) ? rel.split(path.sep)[0]! : rel;
}

function relativeImports(file: string): string[] {
  const text = fs.readFileSync(file, 'utf8');
  return [...text.matchAll(/(?:import|export)[^'"]*?from\s+'(\.[^']+)'/g)].map((m) => path.resolve(path.dirname(file), m[1]!));
}

const MAY_IMPORT: Record<string, string[]> = {
  wire: ['wire', 'errors.ts', 'clock.ts'],
  engine: ['engine', 'wire', 'errors.ts', 'clock.ts', 'log.ts'],
  runtime: ['runtime', 'wire', 'postgres-url.ts', 'errors.ts', 'clock.ts', 'log.ts'],
  api: ['api', 'runtime', 'engine', 'wire', 'errors.ts', 'clock.ts', 'log.ts'],
  operator: ['operator', 'api', 'wire', 'durations.ts', 'errors.ts', 'clock.ts', 'log.ts'],
  // The MCP server is a client of the HTTP API, like the operator.
  mcp: ['mcp', 'api', 'durations.ts', 'errors.ts', 'clock.ts', 'log.ts'],
  // pgx check's facts and rules: it reads the runtime's binaries (pg-binaries.ts), never a running runtime.
  check: ['check', 'runtime', 'postgres-url.ts', 'errors.ts', 'clock.ts', 'log.ts'],
  cli: ['cli', 'api', 'operator', 'mcp', 'check', 'runtime', 'engine', 'wire', 'durations.ts', 'postgres-url.ts', 'errors.ts', 'clock.ts', 'log.ts'],
  'durations.ts': [],
  'postgres-url.ts': ['errors.ts'],
  'errors.ts': [],
  'clock.ts': [],
  'log.ts': [],
};

describe('architecture', () => {
  const files = sourceFiles(src);

  it('imports point one way: cli/api/operator -> runtime/engine -> wire -> leaves', () => {
    const violations: string[] = [];
    for (const f of files) {
      const from = area(f);
      const allowed = MAY_IMPORT[from];
      expect(allowed, `no import rule for ${from}`).to.not.equal(undefined);
      for (const target of relativeImports(f)) {
        const to = area(target.replace(/\.js$/, '.ts'));
        if (to !== from && !allowed!.includes(to)) violations.push(`${path.relative(root, f)} imports ${to}`);
      }
    }
    expect(violations).to.deep.equal([]);
  });

  it('reads the time only in clock.ts', () => {
    const offenders = files.filter((f) => !f.endsWith('clock.ts') && /Date\.now\(\)|new Date\(\)\.getTime\(\)/.test(fs.readFileSync(f, 'utf8')));
    expect(offenders.map((f) => path.relative(root, f))).to.deep.equal([]);
  });

  it('keeps src/wire pure: no sockets, timers, processes or logs', () => {
    const offenders = files
      .filter((f) => area(f) === 'wire')
      .filter((f) => /from 'node:(net|tls|child_process|fs|dgram)'|setTimeout|setInterval|from '\.\.\/log\.js'/.test(fs.readFileSync(f, 'utf8')));
    expect(offenders.map((f) => path.relative(root, f))).to.deep.equal([]);
  });

  it('uses no explicit any', () => {
    // Strings and comments may say "any" in prose; only code counts.
    const code = (f: string): string =>
      fs
        .readFileSync(f, 'utf8')
        .replace(/`(?:\\.|[^`\\])*`/g, '``')
        .replace(/'(?:\\.|[^'\\\n])*'/g, "''")
        .replace(/\/\*[\s\S]*?\*\//g, '')
        .replace(/\/\/.*$/gm, '');
    const offenders = files.filter((f) => /:\s*any\b|\bas any\b|<any>/.test(code(f)));
    expect(offenders.map((f) => path.relative(root, f))).to.deep.equal([]);
  });
});
