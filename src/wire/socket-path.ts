// Where a PostgreSQL-protocol server listens on a Unix socket: `<dir>/.s.PGSQL.<port>`, the name libpq
// derives from host and port. The engine's socket and PostgreSQL's private one are both named so.

/** The socket file of a server on `port` in `dir`. */
export function socketPath(dir: string, port: number): string {
  // A trailing slash on the directory is not doubled (libpq and path.join do the same).
  return `${dir.replace(/\/+$/, '')}/.s.PGSQL.${port}`;
}
