// A postgresql:// URL given by a user (`pgx check --from`, a template import's source): checked, with a
// form to show that has no secret in it and a form for a tool's command line that has no password. A
// leaf, so that pgx check (src/check) and the runtime's import (runtime/templates/import.ts) read a
// source URL the same way.
//
// libpq takes a password from the userinfo (user:pw@) and from the query (?password=pw), the query's
// winning; node-postgres does the same. Other query parameters carry secrets too (sslpassword,
// oauth_client_secret, scram_client_key: PQconndefaults marks them '*' or 'D'), and a parameter libpq
// does not know may be a misspelt one. So the shown form keeps the values of the parameters libpq
// itself would show, and masks every other value: an allow-list, because a deny-list leaks the secret
// nobody thought of.

import { PgxError } from './errors.js';

export interface PostgresUrl {
  /** The URL as given, secrets included: for a client in this process (node-postgres) that connects. */
  url: string;
  /** The URL without its password and with query values other than PLAIN_PARAMETERS' masked: for messages, logs and answers. */
  display: string;
  /** The password (the query's, else the userinfo's), percent-decoded, or null when the URL has none (for PGPASSWORD). */
  password: string | null;
  /** The URL without any password, userinfo or query: for a tool's command line (ps shows it to every user), with `password` in PGPASSWORD. */
  withoutPassword: string;
  /** Query parameters other than password that carry a secret: libpq has no environment variable to hand them to a tool. */
  secretParameters: string[];
  /** Every host named, decoded (a Unix socket directory starts with /): the authority's and ?host='s, comma-separated lists split. */
  hosts: string[];
  /** The names of the query's parameters, decoded. */
  parameterNames: string[];
}

const FORM = 'postgresql://user:password@host:port/database';

/**
 * PostgreSQL 18's libpq connection parameters that are neither secret ('*') nor debug-only ('D') in
 * PQconndefaults, plus `ssl` (libpq reads ssl=true as sslmode=require). Their values are shown.
 */
const PLAIN_PARAMETERS = new Set([
  'service', 'user', 'passfile', 'channel_binding', 'connect_timeout', 'dbname', 'host', 'hostaddr', 'port',
  'client_encoding', 'options', 'application_name', 'fallback_application_name', 'keepalives', 'keepalives_idle',
  'keepalives_interval', 'keepalives_count', 'tcp_user_timeout', 'sslmode', 'sslnegotiation', 'sslcompression',
  'sslcert', 'sslkey', 'sslcertmode', 'sslrootcert', 'sslcrl', 'sslcrldir', 'sslsni', 'requirepeer', 'require_auth',
  'min_protocol_version', 'max_protocol_version', 'ssl_min_protocol_version', 'ssl_max_protocol_version',
  'gssencmode', 'krbsrvname', 'gsslib', 'gssdelegation', 'target_session_attrs', 'load_balance_hosts',
  'oauth_issuer', 'oauth_client_id', 'oauth_scope', 'ssl',
]);

/** The parameters PQconndefaults marks secret ('*') or that hold key material ('D'), password aside. */
const SECRET_PARAMETERS = new Set(['sslpassword', 'oauth_client_secret', 'scram_client_key', 'scram_server_key']);

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
  const query = queryParameters(url, what);
  const fromQuery = query.filter((p) => p.key === 'password').at(-1);
  const password = fromQuery !== undefined ? fromQuery.value : url.password === '' ? null : decode(url.password, what);
  url.password = '';
  // libpq has no use for a fragment; it is not shown, in case someone put something there.
  url.hash = '';
  const withoutPassword = withQuery(url, query.filter((p) => p.key !== 'password').map((p) => p.raw));
  const display = withQuery(url, query.map((p) => (PLAIN_PARAMETERS.has(p.key) ? p.raw : `${p.rawKey}=***`)));
  const secretParameters = [...new Set(query.filter((p) => SECRET_PARAMETERS.has(p.key)).map((p) => p.key))];
  const named = [decode(url.hostname, what), ...query.filter((p) => p.key === 'host').map((p) => p.value)];
  const hosts = named.flatMap((h) => h.split(',')).filter((h) => h !== '');
  return { url: text, display, password, withoutPassword, secretParameters, hosts, parameterNames: query.map((p) => p.key) };
}

interface Parameter {
  /** key=value as written (percent-encoded). */
  raw: string;
  rawKey: string;
  key: string;
  value: string;
}

/** The query's key=value pairs, decoded as libpq decodes them: %XX only ('+' stays '+', unlike a form). */
function queryParameters(url: URL, what: string): Parameter[] {
  return url.search
    .replace(/^\?/, '')
    .split('&')
    .filter((raw) => raw !== '')
    .map((raw) => {
      const eq = raw.indexOf('=');
      const rawKey = eq === -1 ? raw : raw.slice(0, eq);
      return { raw, rawKey, key: decode(rawKey, what), value: eq === -1 ? '' : decode(raw.slice(eq + 1), what) };
    });
}

/** Percent-decoded; a bad escape is refused without quoting the text (it may be a password). */
function decode(text: string, what: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    throw new PgxError('INVALID_PARAMETER', `${what}: a part of the URL has a % that is not followed by two hex digits`, { hint: 'Percent-encode special characters as %XX (% itself as %25).' });
  }
}

function withQuery(url: URL, pairs: string[]): string {
  const copy = new URL(url.toString());
  copy.search = pairs.length === 0 ? '' : `?${pairs.join('&')}`;
  return copy.toString();
}
