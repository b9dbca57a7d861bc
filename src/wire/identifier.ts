// Names as PostgreSQL sees them. A startup packet's user and database (like any identifier) longer
// than NAMEDATALEN - 1 = 63 bytes are truncated by PostgreSQL, on a character boundary
// (pg_mbcliplen; the cluster is UTF8), without an error: `<63-byte role>X` logs in as the 63-byte role.
// The engine must route, count and check by the same name PostgreSQL will use, or a wall keyed by name
// (a credential's one database, a database's session cap) is looked up under a name that is not the one
// in force. Pure: no I/O.

/** PostgreSQL's NAMEDATALEN - 1: the longest name in bytes. */
export const MAX_IDENTIFIER_BYTES = 63;

/**
 * `name` as PostgreSQL stores it: at most 63 bytes of its UTF-8, cut before a character that would
 * cross the limit (a multibyte character is never split). Unchanged (the same string) when it fits.
 */
export function clipIdentifier(name: string): string {
  // Each UTF-16 unit is at most 3 UTF-8 bytes (a surrogate pair, 2 units, is 4): 21 units always fit.
  if (name.length <= MAX_IDENTIFIER_BYTES / 3 || Buffer.byteLength(name, 'utf8') <= MAX_IDENTIFIER_BYTES) return name;
  const bytes = Buffer.from(name, 'utf8');
  let end = MAX_IDENTIFIER_BYTES;
  // Back off continuation bytes (10xxxxxx) to the start of the character the limit falls in.
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end--;
  return bytes.toString('utf8', 0, end);
}
