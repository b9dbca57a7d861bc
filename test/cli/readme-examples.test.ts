// The README's shell examples, run as written: the blocks of "Disposable databases", "Command line"
// and "Connecting" are read from README.md itself (so the test follows the README), each run by bash
// in order against a real `pgx start` on the default addresses (127.0.0.1:6432, /tmp/.s.PGSQL.6432,
// API 127.0.0.1:7432), from a directory where `node bin/pgx.js` is the checkout's, as the README says.
// What is not run as written, and why, is listed in ADAPTED and PLACEHOLDERS: a test must not write
// outside its own directories, and a line naming a source it cannot have is a placeholder.

import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { type CommandResult } from '../helpers/commands.js';
import { bash, blocks, portFree, script as docScript, section as docSection, startLine, type Adaptation, type StartedLine } from '../helpers/doc-examples.js';
import { freshDataDir } from '../helpers/runtime.js';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../..');
const README = fs.readFileSync(path.join(root, 'README.md'), 'utf8');

const section = (title: string): string => docSection(README, title);

/** Lines the README writes with a placeholder for something only the reader has (a source database). */
const PLACEHOLDERS = [/postgresql:\/\/\.\.\./];

/** Lines that run as written except for a path the test keeps in its own directory. */
const ADAPTED: Adaptation<Dirs>[] = [
  // The scram example's data directory is a system path: the test gives it its own.
  [/\/var\/lib\/pgx/g, (d) => d.scramData],
];

interface Dirs {
  work: string;
  scramData: string;
}

/** The runnable lines of a block, after ADAPTED; placeholder lines are left out and returned apart. */
const script = (block: string, dirs: Dirs): { lines: string[]; skipped: string[] } => docScript(block, dirs, ADAPTED, PLACEHOLDERS);

describe('README: the shell examples run as written', function () {
  this.timeout(300_000);
  let dirs: Dirs;
  let runtime: StartedLine | undefined;

  function ok(r: CommandResult, what: string): CommandResult {
    expect(r.code, `${what}\n${r.stdout}\n${r.stderr}`).to.equal(0);
    return r;
  }

  before(async function () {
    for (const port of [6432, 7432]) expect(await portFree(port), `the README's examples use 127.0.0.1:${port}; it is taken`).to.equal(true);
    expect(fs.existsSync('/tmp/.s.PGSQL.6432'), 'the README\'s examples use /tmp/.s.PGSQL.6432; it exists').to.equal(false);
    const data = await freshDataDir();
    const work = path.dirname(data);
    fs.chmodSync(work, 0o755);
    // `node bin/pgx.js` as the README writes it: the checkout's bin, from the reader's directory.
    fs.symlinkSync(path.join(root, 'bin'), path.join(work, 'bin'));
    // The script the README's `--file schema.sql` names: the table its examples use.
    fs.writeFileSync(path.join(work, 'schema.sql'), 'CREATE TABLE users (id bigserial PRIMARY KEY, email text UNIQUE);\n');
    dirs = { work, scramData: await freshDataDir() };
    fs.chmodSync(path.dirname(dirs.scramData), 0o755);
    // What `npm start` runs (package.json), on this data directory.
    const npmStart = (JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start;
    runtime = await startLine(npmStart.replace('.pgx/data', data), work);
    expect(runtime.ready).to.match(/^PGX ready: postgresql:\/\/postgres@127\.0\.0\.1:6432\/postgres .*API http:\/\/127\.0\.0\.1:7432\/v1/);
  });

  after(async function () {
    await runtime?.stop();
    if (dirs) {
      fs.rmSync(dirs.work, { recursive: true, force: true });
      fs.rmSync(path.dirname(dirs.scramData), { recursive: true, force: true });
    }
  });

  it('Disposable databases: seal, mint by connecting, isolation, status; snapshot and restore', async function () {
    const [mint, snapshot, ...rest] = blocks(section('Disposable databases'), 'sh');
    expect(rest).to.deep.equal([]);
    const first = script(mint!, dirs);
    const r = ok(await bash(first.lines, dirs.work), 'the first block');
    // The isolated copy counts 0 rows; the status is JSON.
    expect(r.stdout).to.match(/^ count \n-------\n {5}0\n/m);
    expect(() => JSON.parse(r.stdout.trim().split('\n').at(-1)!)).to.not.throw();
    const second = script(snapshot!, dirs);
    const s = ok(await bash([...second.lines, 'psql -h /tmp -p 6432 -U postgres -d tdb_tpl_app__agent42 -Atc "SELECT email FROM users"'], dirs.work), 'the snapshot block');
    expect(s.stdout.trim().split('\n').at(-1)).to.equal('a@example.com');
  });

  it('Command line: every pgx line answers, exit 0', async function () {
    const [cli, ...rest] = blocks(section('Command line'), 'sh');
    expect(rest).to.deep.equal([]);
    const { lines } = script(cli!, dirs);
    const r = ok(await bash(lines, dirs.work), 'the command line block');
    expect(r.stdout).to.match(/^postgresql:\/\/postgres@127\.0\.0\.1:6432\/tdb_tpl_app__/m);
    expect(r.stdout).to.match(/^sessions\s+\d+ sessions? open on \d+ databases?$/m);
  });

  it('Connecting: psql over TCP and the socket, pgbench; then --auth scram with a tenant that mints', async function () {
    const [plain, scram, ...rest] = blocks(section('Connecting'), 'sh');
    expect(rest).to.deep.equal([]);
    const [config] = blocks(section('Connecting'), 'json');
    ok(await bash(script(plain!, dirs).lines, dirs.work), 'the first block');
    fs.writeFileSync(path.join(dirs.work, 'pgx.json'), config!);
    // The scram runtime takes the same addresses: the first one stops, as a reader's would.
    await runtime!.stop();
    runtime = undefined;
    const { lines } = script(scram!, dirs);
    const startAt = lines.findIndex((l) => / start /.test(l));
    expect(startAt).to.equal(0);
    runtime = await startLine(lines[0]!, dirs.work);
    expect(runtime.ready).to.include(`auth scram, admin password in ${dirs.scramData}/pgx-admin.password`);
    ok(await bash(lines.slice(1), dirs.work), 'the scram block');
    // What those lines did, seen afterwards: the tenant's mint is there, with the template's table.
    const check = ok(
      await bash([`PGPASSWORD=$(cat ${dirs.scramData}/pgx-admin.password) psql -h 127.0.0.1 -p 6432 -U postgres -d tdb_tpl_app__pr1 -Atc "SELECT pg_get_userbyid(datdba), to_regclass('users') IS NOT NULL FROM pg_database WHERE datname = current_database()"`], dirs.work),
      'the check',
    );
    expect(check.stdout.trim()).to.equal('app|t');
  });

  it('leaves out only the placeholder lines it knows', function () {
    const skipped = ['Disposable databases', 'Command line', 'Connecting'].flatMap((title) => blocks(section(title), 'sh').flatMap((b) => script(b, dirs).skipped));
    expect(skipped).to.deep.equal(['node bin/pgx.js template import tpl_prod --from postgresql://... --mask mask.sql   # ... or a masked copy']);
  });
});
