// A postgresql:// URL given by a user (`pgx check --from`, a template import's source): checked, with a
// form to show that has no password in it. A leaf, so that pgx check (src/check) and the runtime's
// import (runtime/templates/import.ts) read a source URL the same way.

import { PgxError } from './errors.js';

export interface PostgresUrl {
  /** The URL as given, password included: for the client that connects. */
  url: string;
  /** The URL without its password: for messages, logs and answers. */
  display: string;
  /** The password, percent-decoded, or null when the URL has none (for PGPASSWORD). */
  password: string | null;
}

const FORM = 'postgresql://user:password@host:port/database';

/** `text` as a postgresql:// (or postgres://) URL; anything else is INVALID_PARAMETER naming `what` (--from, the source). */
export function parsePostgresUrl(text: string, what: string): PostgresUrl {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new PgxError('INVALID_PARAMETER', `${what} is not a URL`, { hint: `Give it as ${FORM}.` });
  }
  if (url.protocol !== 'postgresql:' && url.protocol !== 'postgres:') {
    throw new PgxError('INVALID_PARAMETER', `${what}: the scheme is ${url.protocol}, not postgresql:`, { hint: `Give it as ${FORM}.` });
  }
  const password = url.password === '' ? null : decodeURIComponent(url.password);
  url.password = '';
  return { url: text, display: url.toString(), password };
}
