// `pgx db create|list|get|drop|pin|unpin|ttl|snapshot|restore|limit|memory-limit|credential|revoke`: minted databases through the runtime's HTTP API.

import { BOUNDS, type DatabaseBody } from '../api/contract.js';
import { DATABASE_PAGE } from '../api/paths.js';
import { withHints } from '../errors.js';
import { withinBound, type Bound } from '../runtime/databases/records.js';
import { apiClient, parseCommand, parseDuration, positionals, TARGET_HELP, UsageError } from './command-line.js';
import { databaseUrl } from './connection.js';
import { count, printJson, printTable } from './output.js';
import { createHints, databaseHints, dropHints, snapshotHints } from './hints.js';

const DB_HELP = `Usage: pgx db <subcommand> [options]

  create TEMPLATE [--name N] [--ttl 1h|1h30m|7d|SECONDS] [--pin] [--connection-limit N]
                [--memory-limit MB]
                mint a database from a sealed template; prints its connection URL
                  --name N     the database's name (else tdb_TEMPLATE__<random>)
                  --ttl T      drop it T after creation whatever its sessions or pin (at most 3650d)
                  --pin        keep it when idle (the janitor drops it only at its TTL)
                  --connection-limit N
                               client sessions on it at once; more get 53300
                  --memory-limit MB
                               MB its backends may hold together; past it the largest
                               running statement is canceled with 53200
  list [--limit N] [--after NAME]
                the minted databases, by name; all of them, fetched a page at a time, or
                with --limit one page of N (1 to ${DATABASE_PAGE.maxLimit}) and the command for the next
                  --after NAME the page after NAME (the "next" a page ends with)
  get NAME      one minted database
  drop NAME     drop it now (open sessions end with 57P01); a database already gone is not an error
  pin NAME      keep it when idle
  unpin NAME    let the janitor drop it once idle past --grace
  ttl NAME T    set its TTL to T from now (1h, 1h30m, 7d, SECONDS), or 'none' to clear it
  snapshot NAME SNAPSHOT [--force] [--keep]
                save NAME's current state as SNAPSHOT (a sealed template; a clone where the
                filesystem clones); open sessions make it fail unless --force ends them.
                It belongs to NAME: dropped with it, and counted against the runtime's
                --snapshot-retention; --keep keeps it past NAME, uncounted
  restore NAME SNAPSHOT [--force]
                put NAME back to SNAPSHOT under the same name (same rules for open sessions)
  limit NAME N  allow N client sessions on it at once, or 'default' for the runtime's setting
  memory-limit NAME MB
                let its backends hold MB together, or 'default' for the runtime's setting
  credential NAME
                a new login role that can connect to NAME only; prints its URL with the password
                (shown this once; --json prints {user, password, url})
  revoke NAME USER
                drop that credential (its sessions end); one already gone is not an error
      --all           every credential of NAME instead (revoke NAME --all)

${TARGET_HELP}`;

export async function runDb(argv: string[]): Promise<number> {
  const cmd = parseCommand(argv, DB_HELP, {
    name: { type: 'string' },
    ttl: { type: 'string' },
    pin: { type: 'boolean' },
    'connection-limit': { type: 'string' },
    'memory-limit': { type: 'string' },
    force: { type: 'boolean' },
    keep: { type: 'boolean' },
    limit: { type: 'string' },
    after: { type: 'string' },
    all: { type: 'boolean' },
  });
  if (cmd.help) {
    process.stdout.write(DB_HELP);
    return 0;
  }
  const [sub, ...args] = cmd.positionals;
  const rest = { ...cmd, positionals: args };
  const createOnly = ['name', 'ttl', 'pin', 'connection-limit', 'memory-limit'].filter((f) => cmd.values[f] !== undefined);
  if (sub !== 'create' && createOnly.length > 0) throw new UsageError(`--${createOnly[0]} is an option of pgx db create only`, DB_HELP);
  if (cmd.values.force !== undefined && sub !== 'snapshot' && sub !== 'restore') throw new UsageError('--force is an option of pgx db snapshot and restore only', DB_HELP);
  if (cmd.values.keep !== undefined && sub !== 'snapshot') throw new UsageError('--keep is an option of pgx db snapshot only', DB_HELP);
  if (cmd.values.all !== undefined && sub !== 'revoke') throw new UsageError('--all is an option of pgx db revoke only', DB_HELP);
  const listOnly = ['limit', 'after'].filter((f) => cmd.values[f] !== undefined);
  if (sub !== 'list' && listOnly.length > 0) throw new UsageError(`--${listOnly[0]} is an option of pgx db list only`, DB_HELP);
  switch (sub) {
    case 'create': {
      const [template] = positionals(rest, ['TEMPLATE'], DB_HELP);
      const ttl = cmd.values.ttl === undefined ? null : parseTtl(cmd.values.ttl as string, '--ttl');
      const api = apiClient(cmd);
      const created = await withHints(createHints(template!), api.createDatabase({
        template: template!,
        ...(cmd.values.name !== undefined ? { name: cmd.values.name as string } : {}),
        ...(ttl !== null ? { ttl_seconds: ttl } : {}),
        ...(cmd.values.pin === true ? { pinned: true } : {}),
        ...(cmd.values['connection-limit'] !== undefined ? { connection_limit: parseLimit(cmd.values['connection-limit'] as string, '--connection-limit', BOUNDS.connectionLimit) } : {}),
        ...(cmd.values['memory-limit'] !== undefined ? { memory_limit_mb: parseLimit(cmd.values['memory-limit'] as string, '--memory-limit', BOUNDS.memoryLimitMb) } : {}),
      }));
      const url = databaseUrl(created.url, api.url);
      if (cmd.json) printJson(created);
      else process.stdout.write(`${url}\n`);
      return 0;
    }
    case 'list': {
      positionals(rest, [], DB_HELP);
      const after = (cmd.values.after as string | undefined) ?? null;
      if (cmd.values.limit === undefined) {
        // Every page, one request each, in one table (or one JSON list, as before paging).
        const items: DatabaseBody[] = [];
        const client = apiClient(cmd);
        let next = after;
        do {
          const page = await client.listDatabasesPage({ limit: DATABASE_PAGE.maxLimit, after: next });
          items.push(...page.items);
          next = page.next;
        } while (next !== null);
        for (const d of items) databaseUrl(d.url, client.url);
        if (cmd.json) printJson({ items });
        else printDatabases(items);
        return 0;
      }
      const limit = parseLimit(cmd.values.limit as string, '--limit', PAGE_LIMIT);
      const api = apiClient(cmd);
      const page = await api.listDatabasesPage({ limit, after });
      for (const d of page.items) databaseUrl(d.url, api.url);
      if (cmd.json) printJson(page);
      else {
        printDatabases(page.items);
        if (page.next !== null) process.stdout.write(`more: pgx db list --limit ${limit} --after ${page.next}\n`);
      }
      return 0;
    }
    case 'get': {
      const [name] = positionals(rest, ['NAME'], DB_HELP);
      const api = apiClient(cmd);
      const d = await withHints(databaseHints(name!), api.getDatabase(name!));
      databaseUrl(d.url, api.url);
      if (cmd.json) printJson(d);
      else printDatabases([d], true);
      return 0;
    }
    case 'drop': {
      const [name] = positionals(rest, ['NAME'], DB_HELP);
      await withHints(dropHints(name!), apiClient(cmd).dropDatabase(name!));
      // The API answers 204 with no body; --json says what happened in the same words.
      if (cmd.json) printJson({ name, dropped: true });
      else process.stdout.write(`dropped ${name}\n`);
      return 0;
    }
    case 'pin':
    case 'unpin': {
      const [name] = positionals(rest, ['NAME'], DB_HELP);
      const client = apiClient(cmd);
      const d = await withHints(databaseHints(name!), sub === 'pin' ? client.pin(name!) : client.unpin(name!));
      if (cmd.json) printJson(d);
      else process.stdout.write(`${sub === 'pin' ? 'pinned' : 'unpinned'} ${d.name}\n`);
      return 0;
    }
    case 'ttl': {
      const [name, ttlText] = positionals(rest, ['NAME', 'TTL'], DB_HELP);
      const seconds = parseTtl(ttlText!, 'TTL');
      const d = await withHints(databaseHints(name!), apiClient(cmd).setTtl(name!, seconds));
      if (cmd.json) printJson(d);
      else process.stdout.write(`${d.name} expires ${d.expires_at ?? 'never (no TTL)'}\n`);
      return 0;
    }
    case 'snapshot':
    case 'restore': {
      const [name, snapshot] = positionals(rest, ['NAME', 'SNAPSHOT'], DB_HELP);
      const client = apiClient(cmd);
      const force = cmd.values.force === true;
      if (sub === 'snapshot') {
        const t = await withHints(snapshotHints(name!, snapshot!), client.snapshot(name!, snapshot!, force, cmd.values.keep === true));
        if (cmd.json) printJson(t);
        else process.stdout.write(`snapshot ${t.name} of ${name} taken${t.kept ? ' (kept past the database)' : ''}\n`);
      } else {
        const d = await withHints(snapshotHints(name!, snapshot!), client.restore(name!, snapshot!, force));
        if (cmd.json) printJson(d);
        else process.stdout.write(`restored ${name} to snapshot ${snapshot}\n`);
      }
      return 0;
    }
    case 'limit': {
      const [name, limitText] = positionals(rest, ['NAME', 'N'], DB_HELP);
      const limit = limitText === 'default' ? null : parseLimit(limitText!, 'N', BOUNDS.connectionLimit);
      const d = await withHints(databaseHints(name!), apiClient(cmd).setConnectionLimit(name!, limit));
      if (cmd.json) printJson(d);
      else process.stdout.write(`${d.name} allows ${d.connection_limit === null ? "the runtime's default number of sessions" : count(d.connection_limit, 'session')} at once\n`);
      return 0;
    }
    case 'memory-limit': {
      const [name, mbText] = positionals(rest, ['NAME', 'MB'], DB_HELP);
      const mb = mbText === 'default' ? null : parseLimit(mbText!, 'MB', BOUNDS.memoryLimitMb);
      const d = await withHints(databaseHints(name!), apiClient(cmd).setMemoryLimit(name!, mb));
      if (cmd.json) printJson(d);
      else process.stdout.write(`${d.name} may hold ${d.memory_limit_mb === null ? "the runtime's default" : `${d.memory_limit_mb} MB`} of backend memory\n`);
      return 0;
    }
    case 'credential': {
      const [name] = positionals(rest, ['NAME'], DB_HELP);
      const api = apiClient(cmd);
      const c = await withHints(databaseHints(name!), api.createCredential(name!));
      const url = databaseUrl(c.url, api.url);
      if (cmd.json) printJson(c);
      else process.stdout.write(`${url}\n`);
      return 0;
    }
    case 'revoke': {
      if (cmd.values.all === true) {
        const [name] = positionals(rest, ['NAME'], DB_HELP);
        const revoked = await withHints(databaseHints(name!), apiClient(cmd).revokeCredentials(name!));
        if (cmd.json) printJson({ name, revoked });
        else process.stdout.write(`revoked ${revoked} credential${revoked === 1 ? '' : 's'} on ${name}\n`);
        return 0;
      }
      const [name, user] = positionals(rest, ['NAME', 'USER'], DB_HELP);
      await withHints(databaseHints(name!), apiClient(cmd).revokeCredential(name!, user!));
      if (cmd.json) printJson({ name, user, revoked: true });
      else process.stdout.write(`revoked ${user} on ${name}\n`);
      return 0;
    }
    case undefined:
      throw new UsageError('missing subcommand: create, list, get, drop, pin, unpin, ttl, snapshot, restore, limit, memory-limit, credential or revoke', DB_HELP);
    default:
      throw new UsageError(`unknown subcommand "${sub}": expected create, list, get, drop, pin, unpin, ttl, snapshot, restore, limit, memory-limit, credential or revoke`, DB_HELP);
  }
}

function printDatabases(items: DatabaseBody[], withUrl = false): void {
  printTable(
    ['NAME', 'TEMPLATE', 'OWNER', 'IN USE', 'PINNED', 'EXPIRES', 'CREATED', ...(withUrl ? ['URL'] : [])],
    items.map((d) => [
      d.name,
      d.template,
      d.owner,
      d.in_use ? 'yes' : 'no',
      d.pinned ? 'yes' : 'no',
      d.expires_at ?? '-',
      d.created_at,
      ...(withUrl ? [d.url] : []),
    ]),
    'no minted databases (create one with: pgx db create TEMPLATE)',
  );
}

/** --limit of pgx db list: the API's page sizes. */
const PAGE_LIMIT: Bound = { min: 1, max: DATABASE_PAGE.maxLimit, int: true, text: `1 to ${DATABASE_PAGE.maxLimit}` };

/** A limit within its range (the API's, records.ts BOUNDS), refused here before any request. */
function parseLimit(text: string, what: string, bound: Bound): number {
  const n = Number(text);
  if (!/^\d+$/.test(text) || !withinBound(n, bound)) throw new UsageError(`${what} ${text}: expected ${bound.text}`, DB_HELP);
  return n;
}

/** A duration (1h, 7d, seconds) of at most the API's longest TTL; 'none' is null. */
function parseTtl(text: string, what: string): number | null {
  const seconds = parseDuration(text, what, DB_HELP);
  if (seconds !== null && !withinBound(seconds, BOUNDS.ttlSeconds)) throw new UsageError(`${what} ${text}: expected ${BOUNDS.ttlSeconds.text}`, DB_HELP);
  return seconds;
}
