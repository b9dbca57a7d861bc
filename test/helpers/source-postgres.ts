// A source database for imports: Debian's PostgreSQL 15 server (package postgresql-15, which CI
// installs), or any other server binaries given as binDir (the embedded PostgreSQL 18, as the runtime
// finds them: a source newer than the machine's pg_dump), started for a test on a free loopback port
// with SCRAM passwords over TCP, as a real production database would be reached. As root it runs as
// Debian's `postgres` OS user.

import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { freePort, waitFor } from './commands.js';
import { scratchDir } from './scratch.js';

export const PG15_BIN = '/usr/lib/postgresql/15/bin';

export interface SourcePostgres {
  port: number;
  /** A superuser connection URL over TCP (password in it). */
  url(database: string, user?: string, password?: string): string;
  stop(): Promise<void>;
}

/** Why a PostgreSQL 15 source cannot run here, or null when it can. */
export function sourceUnavailable(): string | null {
  if (!fs.existsSync(path.join(PG15_BIN, 'postgres'))) return `no PostgreSQL 15 server in ${PG15_BIN} (apt-get install postgresql-15)`;
  if (process.getuid?.() === 0) {
    try {
      execFileSync('id', ['-u', 'postgres']);
    } catch {
      return 'no OS user postgres to run it as';
    }
  }
  return null;
}

/** binDir: the server binaries to run (initdb, postgres); Debian's PostgreSQL 15 when not given. */
export async function startSourcePostgres(superPassword: string, binDir = PG15_BIN): Promise<SourcePostgres> {
  const dir = scratchDir('pgx-source-');
  const dataDir = path.join(dir, 'data');
  const asPostgres = process.getuid?.() === 0 ? osUser('postgres') : undefined;
  if (asPostgres) fs.chownSync(dir, asPostgres.uid, asPostgres.gid);
  const pwFile = path.join(dir, 'pw');
  fs.writeFileSync(pwFile, superPassword, { mode: 0o600 });
  if (asPostgres) fs.chownSync(pwFile, asPostgres.uid, asPostgres.gid);
  execFileSync(path.join(binDir, 'initdb'), ['-D', dataDir, '-U', 'postgres', '--auth-local=trust', '--auth-host=scram-sha-256', `--pwfile=${pwFile}`, '-E', 'UTF8', '--no-locale'], {
    stdio: 'ignore',
    ...asPostgres,
  });
  const port = await freePort();
  const child: ChildProcess = spawn(path.join(binDir, 'postgres'), ['-D', dataDir, '-p', String(port), '-k', dir, '-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off'], {
    stdio: 'ignore',
    ...asPostgres,
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await waitFor(`the source PostgreSQL in ${binDir} to accept connections`, () => fs.existsSync(path.join(dir, `.s.PGSQL.${port}`)), 30_000);
  return {
    port,
    url: (database, user = 'postgres', password = superPassword) => `postgresql://${user}:${encodeURIComponent(password)}@127.0.0.1:${port}/${database}`,
    async stop() {
      child.kill('SIGINT');
      await exited;
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

function osUser(name: string): { uid: number; gid: number } {
  return {
    uid: Number(execFileSync('id', ['-u', name], { encoding: 'utf8' }).trim()),
    gid: Number(execFileSync('id', ['-g', name], { encoding: 'utf8' }).trim()),
  };
}
