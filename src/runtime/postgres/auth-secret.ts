// The runtime's authentication secret, kept in the data directory (pgx-auth.secret, mode 0600): what
// the mock SCRAM salt of an unknown role is derived from. A random one per process would change
// across restarts while a real role's salt stays, so asking for a role's salt before and after a
// restart would tell which roles exist; PostgreSQL derives its mock salt from the cluster's
// mock_authentication_nonce in pg_control for the same reason.

import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { PgxError } from '../../errors.js';

const FILE = 'pgx-auth.secret';
const LENGTH = 32;

/** Reads the data directory's secret, creating it on first use. */
export function authSecret(dataDir: string): Buffer {
  const file = path.join(dataDir, FILE);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const text = fs.readFileSync(file, 'utf8').trim();
      const secret = Buffer.from(text, 'hex');
      if (secret.length !== LENGTH || secret.toString('hex') !== text.toLowerCase()) {
        throw new PgxError('CONFIG_INVALID', `${file} is not ${LENGTH} bytes of hex`, {
          hint: `Remove ${file}: the runtime writes a new one at its next start (unknown roles then get new mock salts once).`,
        });
      }
      return secret;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    try {
      // 'wx': if two starts race, one writes and both read the same file.
      fs.writeFileSync(file, `${randomBytes(LENGTH).toString('hex')}\n`, { mode: 0o600, flag: 'wx' });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
  throw new PgxError('CONFIG_INVALID', `cannot create ${file}`, { hint: 'Check that the data directory is writable by the runtime.' });
}
