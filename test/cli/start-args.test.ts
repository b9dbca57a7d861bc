import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { CONFIG_DEFAULTS } from '../../src/cli/config.js';
import { parseStartArgs, START_HELP } from '../../src/cli/start.js';
import { PgxError } from '../../src/errors.js';
import { UsageError } from '../../src/cli/command-line.js';
import { runCommand } from '../helpers/commands.js';
import { scratchDir } from '../helpers/scratch.js';

const PGX_BIN = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../../bin/pgx.js');

function refusal(argv: string[]): PgxError {
  try {
    parseStartArgs(argv);
  } catch (err) {
    if (err instanceof PgxError) return err;
    throw err;
  }
  throw new Error('expected a refusal');
}

describe('cli: pgx start options', () => {
  it('applies the documented defaults', () => {
    const c = parseStartArgs(['--data-dir', 'd']);
    expect(c).to.include({ dataDir: 'd', host: '127.0.0.1', port: 6432, socketDir: '/tmp', maxBackends: 100, maxClients: 10000 });
    expect(c.auth).to.equal(undefined);
    expect(c.pgSettings).to.deep.equal({});
  });

  it('pgx start --help gives each one-value default the config schema gives (CONFIG_DEFAULTS)', () => {
    const shown = [...START_HELP.matchAll(/^ {2}--([a-z-]+) [^\n]*?\[([0-9.]+)\]$/gm)];
    expect(shown.length).to.be.greaterThan(10);
    for (const [, flag, value] of shown) {
      const key = flag!.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase()) as keyof typeof CONFIG_DEFAULTS;
      expect(CONFIG_DEFAULTS, `--${flag}`).to.have.property(key);
      expect(String(CONFIG_DEFAULTS[key]), `--${flag} [${value}]`).to.equal(value);
    }
  });

  it('merges a config file under the flags, and -c settings over the file\'s', () => {
    const dir = scratchDir('pgx-cfg-');
    const file = path.join(dir, 'pgx.json');
    fs.writeFileSync(file, JSON.stringify({ dataDir: 'from-file', port: 7000, pgSettings: { work_mem: '4MB', jit: 'off' } }));
    const c = parseStartArgs(['--config', file, '--port', '7001', '-c', 'work_mem=8MB', '-c', 'search_path=a,b']);
    expect(c.dataDir).to.equal('from-file');
    expect(c.port).to.equal(7001);
    expect(c.pgSettings).to.deep.equal({ work_mem: '8MB', jit: 'off', search_path: 'a,b' });
    fs.rmSync(dir, { recursive: true });
  });

  it('takes an empty --socket-dir as TCP only', () => {
    expect(parseStartArgs(['--data-dir', 'd', '--socket-dir', '']).socketDir).to.equal(null);
  });

  it('refuses bad input with a message naming the setting and a hint', () => {
    expect(refusal([]).message).to.contain('no data directory');
    expect(refusal(['--data-dir', 'd', '--port', 'lots']).message).to.match(/port/);
    expect(refusal(['--data-dir', 'd', '--auth', 'md5']).message).to.match(/auth/);
    expect(refusal(['--data-dir', 'd', '-c', 'novalue']).message).to.contain('expected NAME=VALUE');
    expect(refusal(['--data-dir', 'd', '-c', 'bad name;=1']).message).to.match(/pgSettings/);
    expect(refusal(['--data-dir', 'd', '--config', '/nonexistent/pgx.json']).message).to.contain('cannot read config file');
    const e = refusal(['--data-dir', 'd', '--max-backends', '0']);
    expect(e.code).to.equal('CONFIG_INVALID');
    expect(e.hint).to.be.a('string');
  });

  it('refuses numbers past their bounds, naming the setting and the bound', () => {
    // A month of --login-timeout would go into setTimeout past 2^31-1 ms, which fires at once: every login refused.
    for (const [flag, value, setting] of [
      ['--login-timeout', '3000000', 'loginTimeout'],
      ['--backend-wait-timeout', '1e10', 'backendWaitTimeout'],
      ['--max-clients', '1e9', 'maxClients'],
      ['--max-sessions-per-db', '100001', 'maxSessionsPerDb'],
      ['--session-memory-limit', '99999999999', 'sessionMemoryLimit'],
      ['--grace', '1e12', 'grace'],
    ]) {
      const e = refusal(['--data-dir', 'd', flag!, value!]);
      expect(e.code, flag).to.equal('CONFIG_INVALID');
      expect(e.message, flag).to.match(new RegExp(`${setting}: .*<=\\d+`));
    }
    expect(parseStartArgs(['--data-dir', 'd', '--login-timeout', '2147483']).loginTimeout).to.equal(2147483);
  });

  it('takes --pool-size as a number of spares or auto (the default: by the filesystem, settings.ts)', () => {
    expect(parseStartArgs(['--data-dir', 'd']).poolSize).to.equal('auto');
    expect(parseStartArgs(['--data-dir', 'd', '--pool-size', '0']).poolSize).to.equal(0);
    expect(parseStartArgs(['--data-dir', 'd', '--pool-size', 'auto']).poolSize).to.equal('auto');
    expect(refusal(['--data-dir', 'd', '--pool-size', 'lots']).message).to.match(/poolSize: .*or auto/);
    expect(refusal(['--data-dir', 'd', '--pool-size', '1001']).message).to.match(/poolSize: .*<=1000/);
  });

  it('takes --min-free-disk as MB or as a percentage of the filesystem', () => {
    expect(parseStartArgs(['--data-dir', 'd']).minFreeDisk).to.equal(null);
    expect(parseStartArgs(['--data-dir', 'd', '--min-free-disk', '512']).minFreeDisk).to.equal(512);
    expect(parseStartArgs(['--data-dir', 'd', '--min-free-disk', '7.5%']).minFreeDisk).to.equal('7.5%');
    expect(refusal(['--data-dir', 'd', '--min-free-disk', 'lots']).message).to.match(/minFreeDisk/);
    expect(refusal(['--data-dir', 'd', '--min-free-disk', '150%']).message).to.match(/minFreeDisk/);
  });

  it('refuses unknown flags as a usage error, as the other commands do', () => {
    let e: unknown;
    try {
      parseStartArgs(['--data-dir', 'd', '--frobnicate']);
    } catch (err) {
      e = err;
    }
    expect(e).to.be.instanceOf(UsageError);
    expect((e as UsageError).message).to.contain('--frobnicate');
  });

  it('pgx start with a bad flag: exit 2, the error and one line pointing to --help (not the whole help)', async () => {
    const r = await runCommand(process.execPath, [PGX_BIN, 'start', '--frobnicate'], { timeoutMs: 30_000 });
    expect(r.code).to.equal(2);
    const lines = r.stderr.trim().split('\n');
    expect(lines).to.have.length(2);
    expect(lines[0]).to.match(/^pgx: .*--frobnicate/);
    expect(lines[1]).to.equal("Run 'pgx start --help' for usage.");
    expect(r.stdout).to.equal('');
  });
});
