// Rules a reviewer checks, checked by CI instead: which folders may import which, that no import cycle
// exists (type-only imports included), where time is read, that the codec stays pure, and that the
// control functions are declared in one table.

import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { CONTROL_NAMES } from '../src/engine/control-functions.js';

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

interface Import {
  /** The imported file, as a .ts path. */
  target: string;
  /** `import type` / `export type`: erased when compiled, yet still a dependency a reader follows. */
  typeOnly: boolean;
}

function importsOf(file: string): Import[] {
  const text = fs.readFileSync(file, 'utf8');
  return [...text.matchAll(/(?:^|\n)\s*(import|export)(\s+type\b)?[^'";]*?from\s+'(\.[^']+)'/g)].map((m) => ({
    target: path.resolve(path.dirname(file), m[3]!).replace(/\.js$/, '.ts'),
    typeOnly: m[2] !== undefined,
  }));
}

/** Cycles not broken yet; nothing may join them (the list can only shrink). */
const KNOWN_CYCLES: string[] = [];

const MAX_LINES = 450;
/** Long files not split yet; nothing may join them (the list can only shrink). */
const KNOWN_LONG: string[] = [];

/** The one door between runtime and engine: the runtime implements the engine's ports, naming their types. */
const ENGINE_PORTS = path.join(src, 'engine', 'ports.ts');

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
      for (const { target, typeOnly } of importsOf(f)) {
        const to = area(target);
        if (from === 'runtime' && target === ENGINE_PORTS && typeOnly) continue;
        if (to !== from && !allowed!.includes(to)) violations.push(`${path.relative(root, f)} imports ${path.relative(root, target)}`);
      }
    }
    expect(violations).to.deep.equal([]);
  });

  it('has no import cycle, type-only imports included', () => {
    const graph = new Map(files.map((f) => [f, importsOf(f).map((i) => i.target).filter((t) => t.startsWith(src))]));
    const cycles: string[] = [];
    const done = new Set<string>();
    const onPath: string[] = [];
    const visit = (f: string): void => {
      const at = onPath.indexOf(f);
      if (at >= 0) {
        cycles.push([...onPath.slice(at), f].map((p) => path.relative(src, p)).join(' -> '));
        return;
      }
      if (done.has(f)) return;
      onPath.push(f);
      for (const t of graph.get(f) ?? []) visit(t);
      onPath.pop();
      done.add(f);
    };
    for (const f of files) visit(f);
    expect(cycles.filter((c) => !KNOWN_CYCLES.includes(c))).to.deep.equal([]);
    // A cycle broken since: take it off the list, so it cannot come back unseen.
    expect(KNOWN_CYCLES.filter((c) => !cycles.includes(c)), 'no longer cycles: remove them from KNOWN_CYCLES').to.deep.equal([]);
  });

  it('pgx status loads no package and no other command: node starts it, then its own code', () => {
    // Scripts and watches run `pgx status` in a loop, and issue 23 asks it to answer in 200 ms with
    // node's start: zod alone took 45 ms to load. Static imports that stay in the compiled code
    // (not `import type`) are what loads; other commands come in by `await import()`, which is not.
    const loaded = new Set<string>();
    const packages = new Set<string>();
    const visit = (file: string): void => {
      if (loaded.has(file)) return;
      loaded.add(file);
      for (const m of fs.readFileSync(file, 'utf8').matchAll(/(?:^|\n)\s*(?:import|export)(?!\s+type\b)[^'";]*?from\s+'([^']+)'/g)) {
        const spec = m[1]!;
        if (spec.startsWith('.')) visit(path.resolve(path.dirname(file), spec).replace(/\.js$/, '.ts'));
        else if (!spec.startsWith('node:')) packages.add(spec);
      }
    };
    visit(path.join(src, 'cli', 'main.ts'));
    visit(path.join(src, 'cli', 'status.ts'));
    expect([...packages], 'packages pgx status loads').to.deep.equal([]);
    const commands = ['db', 'template', 'doctor', 'connection', 'start', 'mcp', 'check'].map((c) => path.join(src, 'cli', `${c}.ts`));
    expect(commands.filter((c) => loaded.has(c)).map((c) => path.relative(src, c)), 'other commands pgx status loads').to.deep.equal([]);
  });

  it('declares each control function once, in engine/control-functions.ts', () => {
    const table = path.join(src, 'engine', 'control-functions.ts');
    const keys = [...new Set([...CONTROL_NAMES.values()].map((s) => s.fn))];
    const names = [...CONTROL_NAMES.keys()];
    expect(keys).to.include('seal_template');
    expect(names).to.include.members(['pgx_seal_template', 'pgrust_seal_template']);
    const alternatives = (list: string[]): string => list.join('|');
    // A copy of the list elsewhere: a SQL name as a string, a union of keys, or a switch over them.
    const copy = new RegExp(
      `['"\`](?:${alternatives(names)})['"\`]|['"](?:${alternatives(keys)})['"]\\s*\\||\\|\\s*['"](?:${alternatives(keys)})['"]|case\\s+['"](?:${alternatives(keys)})['"]`,
    );
    const offenders = files.filter((f) => f !== table && copy.test(fs.readFileSync(f, 'utf8')));
    expect(offenders.map((f) => path.relative(root, f))).to.deep.equal([]);
    // The symptom of a list kept twice: a name the engine accepts that the runtime cannot run.
    const unsupported = files.filter((f) => /not supported by this runtime/.test(fs.readFileSync(f, 'utf8')));
    expect(unsupported.map((f) => path.relative(root, f))).to.deep.equal([]);
  });

  it('docs/architecture.md maps every file of src/', () => {
    const map = fs.readFileSync(path.join(root, 'docs', 'architecture.md'), 'utf8');
    const unmapped = files.filter((f) => !map.includes(`\`${path.basename(f)}\``) && !map.includes(`/${path.basename(f)}\``));
    expect(unmapped.map((f) => path.relative(root, f))).to.deep.equal([]);
  });

  it('keeps files under 450 lines, or says in the header why not', () => {
    const header = (text: string): string => /^(?:\/\/.*\n)+/.exec(text)?.[0] ?? '';
    const long = files.filter((f) => {
      const text = fs.readFileSync(f, 'utf8');
      return text.split('\n').length > MAX_LINES && !/over 450 lines/i.test(header(text));
    });
    const offenders = long.map((f) => path.relative(src, f));
    expect(offenders.filter((f) => !KNOWN_LONG.includes(f))).to.deep.equal([]);
    expect(KNOWN_LONG.filter((f) => !offenders.includes(f)), 'short now (or explained): remove them from KNOWN_LONG').to.deep.equal([]);
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
