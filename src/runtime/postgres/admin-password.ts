// The admin's secrets under --auth scram. The role `postgres` must prove a password like everyone
// else, so the runtime makes sure it has one somebody knows: PGX_ADMIN_PASSWORD, a `postgres` entry in
// the config's users, else a random one generated at first start and kept in the data directory
// (pgx-admin.password, mode 0600: for whoever may read the data directory, the operator of the machine,
// not a tenant). The HTTP API, which can mint credentials, gets a token the same way when none is
// given (pgx-api.token). Only the SCRAM verifier reaches PostgreSQL; neither secret is ever logged.

import { randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { PgxError } from '../../errors.js';

const ADMIN_PASSWORD_FILE = 'pgx-admin.password';

export interface AdminPassword {
  password: string;
  /** Where it came from, for the ready line: the variable, the config, or the file's path. */
  source: string;
}

export async function adminPassword(dataDir: string, fromConfig: string | undefined, env: NodeJS.ProcessEnv = process.env): Promise<AdminPassword> {
  const fromEnv = env.PGX_ADMIN_PASSWORD;
  if (fromEnv !== undefined && fromEnv.length > 0) return { password: fromEnv, source: 'PGX_ADMIN_PASSWORD' };
  if (fromConfig !== undefined) return { password: fromConfig, source: 'the config file' };
  const file = path.join(dataDir, ADMIN_PASSWORD_FILE);
  return { password: await keptSecret(file, 'Give the admin password in PGX_ADMIN_PASSWORD instead, or let the runtime read the data directory.'), source: file };
}

const API_TOKEN_FILE = 'pgx-api.token';

/** The API token kept in the data directory (generated at first use), for a scram runtime given none. */
export async function keptApiToken(dataDir: string): Promise<{ token: string; file: string }> {
  const file = path.join(dataDir, API_TOKEN_FILE);
  return { token: await keptSecret(file, 'Give the token with --api-token-file FILE or PGX_API_TOKEN instead.'), file };
}

/** The first line of `file`, or a new random secret written there (0600) when it does not exist. */
async function keptSecret(file: string, hint: string): Promise<string> {
  try {
    const kept = (await readFile(file, 'utf8')).split('\n')[0]!.trim();
    if (kept.length >= 16) return kept;
    throw new PgxError('CONFIG_INVALID', `${file} holds fewer than 16 characters`, { hint: `Put a longer secret in it, or delete it for a new one. ${hint}` });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
      if (err instanceof PgxError) throw err;
      throw new PgxError('CONFIG_INVALID', `cannot read ${file}: ${(err as Error).message}`, { hint });
    }
  }
  const secret = randomBytes(18).toString('base64url');
  await writeFile(file, `${secret}\n`, { mode: 0o600, flag: 'wx' });
  return secret;
}
