// Which extensions a tenant may create. PostgreSQL lets a database owner create any *trusted*
// extension (pgcrypto, hstore, ...) and only superusers the rest (dblink, postgres_fdw, file_fdw,
// untrusted languages); PGX narrows the trusted ones to an allow-list (--allow-extensions). An event
// trigger at the end of CREATE EXTENSION refuses one not on the list with 42501, as PostgreSQL words
// its own refusal, and the statement's transaction rolls back whatever the extension's script did.
//
// It lives in a schema the superuser owns (pgx_guard): a database owner owns `public` and could drop a
// function there, and with it (CASCADE) the trigger. Nobody else has any right on that schema: the
// trigger runs as its owner and needs no USAGE granted, and a tenant has no business creating there. It is installed in template1 (so databases made
// with a plain CREATE DATABASE have it) and in every template when it is sealed (so every minted
// database has it). Superusers are not checked.

import { quoteLiteral, type SqlClient } from '../postgres/sql-client.js';

export const GUARD_SCHEMA = 'pgx_guard';

/** Trusted extensions of PostgreSQL 18 that touch nothing outside the database; untrusted ones need a superuser anyway. */
export const DEFAULT_ALLOWED_EXTENSIONS = [
  'btree_gin',
  'btree_gist',
  'citext',
  'cube',
  'dict_int',
  'fuzzystrmatch',
  'hstore',
  'intarray',
  'isn',
  'lo',
  'ltree',
  'pg_trgm',
  'pgcrypto',
  'plpgsql',
  'seg',
  'tablefunc',
  'tcn',
  'tsm_system_rows',
  'tsm_system_time',
  'unaccent',
  'uuid-ossp',
];

function extensionGuardSql(allowed: readonly string[]): string {
  const list = allowed.length === 0 ? "'{}'::text[]" : `ARRAY[${allowed.map(quoteLiteral).join(', ')}]::text[]`;
  const shown = allowed.length === 0 ? 'none' : allowed.join(', ');
  return `
CREATE SCHEMA IF NOT EXISTS ${GUARD_SCHEMA};
REVOKE ALL ON SCHEMA ${GUARD_SCHEMA} FROM PUBLIC;
DO $revoke$ BEGIN
  -- A template sealed by an older PGX granted the credentials' group CREATE here (prepareDatabase).
  IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'pgx_credentials') THEN
    REVOKE ALL ON SCHEMA ${GUARD_SCHEMA} FROM pgx_credentials;
  END IF;
END $revoke$;
CREATE OR REPLACE FUNCTION ${GUARD_SCHEMA}.extension_allowed() RETURNS event_trigger
LANGUAGE plpgsql SET search_path = pg_catalog AS $guard$
DECLARE
  ext text;
BEGIN
  IF current_setting('is_superuser') = 'on' THEN
    RETURN;
  END IF;
  FOR ext IN
    SELECT e.extname FROM pg_event_trigger_ddl_commands() c JOIN pg_extension e ON e.oid = c.objid
    WHERE c.classid = 'pg_extension'::regclass
  LOOP
    IF NOT ext = ANY (${list}) THEN
      RAISE EXCEPTION 'permission denied to create extension "%"', ext
        USING ERRCODE = '42501', HINT = ${quoteLiteral(`This PGX runtime lets tenants create only: ${shown} (--allow-extensions).`)};
    END IF;
  END LOOP;
END
$guard$;
DROP EVENT TRIGGER IF EXISTS pgx_extension_allow_list;
CREATE EVENT TRIGGER pgx_extension_allow_list ON ddl_command_end WHEN TAG IN ('CREATE EXTENSION')
  EXECUTE FUNCTION ${GUARD_SCHEMA}.extension_allowed();
`;
}

/** Installs (or refreshes, for a changed list) the guard in the database `client` is connected to, as a superuser. */
export async function installExtensionGuard(client: SqlClient, allowed: readonly string[]): Promise<void> {
  await client.query(extensionGuardSql(allowed));
}
