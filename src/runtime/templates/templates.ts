// Sealing and unsealing templates. Sealing freezes and analyses a database (so every copy starts with
// frozen tuples and planner statistics, and autovacuum has nothing to do in it), marks it a template
// that refuses connections, ends the sessions still on it (CREATE DATABASE refuses a template others
// are connected to) and records it; the warm pool then fills with spares of it. Unsealing reverses
// it so the template can be changed; its spares turn stale. Sealing again bumps the generation, so
// everything minted later, spares included, is a copy of the current content.

import type { Clock } from '../../clock.js';
import { PgxError } from '../../errors.js';
import type { Logger } from '../../log.js';
import { prepareDatabase, unprepareDatabase } from '../databases/credentials.js';
import { installExtensionGuard } from './extension-guard.js';
import { COPY_STRATEGY, sealSql, terminateBackends } from '../databases/create-database.js';
import type { EngineSessions } from '../databases/dropper.js';
import type { MetadataStore } from '../databases/metadata.js';
import { buildName, controlSqlName, databaseDoesNotExist, isReservedName, isSystemDatabase, templateNameProblem } from '../databases/names.js';
import { NameQueue } from '../databases/name-queue.js';
import { functionDenied, type Permissions } from '../databases/permissions.js';
import type { TemplateRecord } from '../databases/records.js';
import type { Registry } from '../databases/registry.js';
import { quoteIdent, quoteLiteral, type SqlClient } from '../postgres/sql-client.js';
import { withBuildOwner } from './build-owner.js';
import { buildScratch } from './script-build.js';
import type { WarmPool } from '../databases/warm-pool.js';


export interface TemplatesOptions {
  prefix: string;
  /** A superuser connection inside the named template (search_path empty: sql-client.ts CATALOG_ONLY). */
  connect: (database: string) => Promise<SqlClient>;
  registry: Registry;
  metadata: MetadataStore;
  permissions: Permissions;
  pool: WarmPool;
  /** Scratch databases of builds in progress (reconcile must not take them for orphans). */
  scratches: Set<string>;
  engine: EngineSessions;
  /** Extensions tenants may create in databases minted from a template (extension-guard.ts). */
  allowedExtensions: readonly string[];
  clock: Clock;
  logger: Logger;
}

export interface BuildRequest {
  name: string;
  /** Fills the new template's database, acting as the owner (see script-build.ts). */
  fill: (database: string, owner: string) => Promise<void>;
  /** What was built from, for the log: "script", "import". */
  source: string;
  /** Owns the template and fills it; default postgres (see build-owner.ts). */
  owner?: string | undefined;
  /** Never fill it as a role with privileges; without `owner`, as the template's own role (build-owner.ts). */
  unprivileged?: boolean | undefined;
  /** Seal it when built (default true). */
  seal?: boolean | undefined;
  /** Rebuild a template that exists (its sessions are ended); otherwise an existing name is 42P04. */
  replace?: boolean | undefined;
}

export class Templates {
  /** Seal, unseal and build of one template run one after the other. */
  /** Builds, seals, unseals and drops of one template run one at a time. */
  private readonly lanes = new NameQueue();

  constructor(private readonly opts: TemplatesOptions) {}

  /**
   * Builds template `name` from a SQL script (see script-build.ts), then seals it unless told not
   * to. With `replace`, an existing database of that name is dropped only once the script succeeded.
   */
  build(req: BuildRequest, user: string): Promise<TemplateRecord> {
    return this.lanes.run(req.name, () => this.doBuild(req, user));
  }

  private async doBuild(req: BuildRequest, user: string): Promise<TemplateRecord> {
    const { registry, metadata, permissions, clock, logger } = this.opts;
    const { name } = req;
    this.refuseSpecial(name, 'built');
    const problem = templateNameProblem(name, this.opts.prefix);
    if (problem !== null) throw new PgxError('INVALID_PARAMETER', `template name "${name}" is not usable: ${problem}`, { hint: 'Use lower-case letters, digits and single underscores, e.g. tpl_app.' });
    const before = await permissions.access(user, name);
    if (before.exists && !req.replace) {
      throw new PgxError('DUPLICATE_DATABASE', `database "${name}" already exists`, { hint: 'Pick another name.' });
    }
    if (before.exists && !before.ownerOrSuperuser) throw functionDenied('build_template', name);
    const started = clock.monotonic();
    const admin = await metadata.client();
    const scratch = buildName(await metadata.nextSpareNumber());
    this.opts.scratches.add(scratch);
    let owner: string;
    try {
      owner = await withBuildOwner(admin, name, req, async (role) => {
        await buildScratch({ name, owner: role, scratch, admin, fill: req.fill });
        return role;
      });
      if (before.exists) await this.replaceWith(admin, name, scratch);
      else await admin.query(`ALTER DATABASE ${quoteIdent(scratch)} RENAME TO ${quoteIdent(name)}`);
    } finally {
      this.opts.scratches.delete(scratch);
    }
    logger.info('template-built', { template: name, from: req.source, owner, replaced: before.exists, ms: Math.round(clock.monotonic() - started) });
    if (req.seal === false) {
      const previous = registry.templates.get(name);
      if (!previous) return { name, sealed: false, sealedAt: null, generation: 0, snapshotOf: null, kept: true, groupGrantsFrom: null };
      return previous;
    }
    return this.doSeal(name, user, 'build_template', null);
  }

  /**
   * The old template goes and `scratch` takes its name: nothing mints from it from now on, its
   * sessions are ended, and one transaction renames it away and the new one in, so at no instant is
   * the name free for someone else's CREATE DATABASE (which waits on the unique index, then gets
   * 42P04). The old one is dropped after.
   */
  private async replaceWith(admin: SqlClient, name: string, scratch: string): Promise<void> {
    const { registry, metadata } = this.opts;
    const previous = registry.templates.get(name);
    if (previous?.sealed) {
      const unsealed = { ...previous, sealed: false };
      registry.templates.set(name, unsealed);
      await metadata.saveTemplate(unsealed);
    }
    this.opts.engine.terminateSessions(name, `terminating connection: template "${name}" is being rebuilt`, 'Connect again once the rebuild is done.');
    await admin.query(`ALTER DATABASE ${quoteIdent(name)} WITH IS_TEMPLATE false`);
    await terminateBackends(admin, name);
    const old = buildName(await this.opts.metadata.nextSpareNumber());
    this.opts.scratches.add(old);
    try {
      // One query string is one (implicit) transaction: on a failure nothing is left open on this
      // shared connection.
      await admin.query(`ALTER DATABASE ${quoteIdent(name)} RENAME TO ${quoteIdent(old)}; ALTER DATABASE ${quoteIdent(scratch)} RENAME TO ${quoteIdent(name)}`);
      await admin.query(`DROP DATABASE ${quoteIdent(old)} WITH (FORCE)`);
    } finally {
      this.opts.scratches.delete(old);
    }
  }

  /** `from`: the database the caller is connected to, if any; sealing it would end the caller's session. */
  seal(name: string, user: string, fn = controlSqlName('seal_template'), from: string | null = null): Promise<TemplateRecord> {
    return this.lanes.run(name, () => this.doSeal(name, user, fn, from));
  }

  unseal(name: string, user: string, fn = controlSqlName('unseal_template')): Promise<TemplateRecord> {
    return this.lanes.run(name, () => this.doUnseal(name, user, fn));
  }

  private async doSeal(name: string, user: string, fn: string, from: string | null): Promise<TemplateRecord> {
    const { registry, metadata, permissions, clock, logger } = this.opts;
    this.refuseSpecial(name, 'sealed');
    if (from === name) {
      throw new PgxError('OBJECT_IN_USE', `cannot seal the currently open database "${name}"`, {
        hint: `Connect to another database (e.g. postgres) and run SELECT ${fn}('${name}') there.`,
      });
    }
    const problem = templateNameProblem(name, this.opts.prefix);
    if (problem !== null) {
      throw new PgxError('INVALID_PARAMETER', `database "${name}" cannot be sealed as a template: ${problem}`, {
        hint: `Minted names are ${this.opts.prefix}<template>__<token>; rename it (ALTER DATABASE ... RENAME TO) to lower-case letters, digits and single underscores.`,
      });
    }
    const access = await permissions.access(user, name);
    if (!access.exists) throw databaseDoesNotExist(name, { hint: `Create it first: CREATE DATABASE ${name}; then fill it and seal it.` });
    if (!access.ownerOrSuperuser) throw functionDenied(fn, name);

    const admin = await metadata.client();
    const started = clock.monotonic();
    const previous = registry.templates.get(name);
    const snapshot = previous?.snapshotOf != null;
    // A sealed snapshot is not IS_TEMPLATE (sealSql): closed to connections is all it shows.
    const alreadySealed = !access.allowConnections && (access.isTemplate || (snapshot && previous?.sealed === true));
    // Already sealed: nobody could connect since, so the content is what was frozen; a reseal only
    // refreshes what is minted from now on (new generation, new spares).
    if (!alreadySealed) {
      if (!access.allowConnections) await admin.query(`ALTER DATABASE ${quoteIdent(name)} ALLOW_CONNECTIONS true`);
      await this.freeze(name);
      await admin.query(sealSql(name, snapshot));
      await this.endSessions(admin, name);
    }
    const { rows } = await admin.query(`SELECT pg_catalog.pg_database_size(${quoteLiteral(name)})`);
    const bytes = Number(rows[0]?.[0] ?? 0);
    const generation = (previous?.generation ?? 0) + 1;
    // freeze() has just granted the credentials' group its rights in this content; a reseal of content
    // frozen earlier carries them only if that content did.
    const prepared = alreadySealed ? previous?.groupGrantsFrom != null : true;
    const record: TemplateRecord = {
      name,
      sealed: true,
      sealedAt: clock.now(),
      generation,
      snapshotOf: previous?.snapshotOf ?? null,
      kept: previous?.kept ?? true,
      groupGrantsFrom: prepared ? (previous?.groupGrantsFrom ?? generation) : null,
    };
    await metadata.saveTemplate(record);
    registry.templates.set(name, record);
    logger.info('template-sealed', { template: name, generation: record.generation, strategy: COPY_STRATEGY, mb: Math.round(bytes / 1048576), ms: Math.round(clock.monotonic() - started) });
    this.opts.pool.kick();
    return record;
  }

  private async doUnseal(name: string, user: string, fn: string): Promise<TemplateRecord> {
    const { registry, metadata, permissions, clock, logger } = this.opts;
    this.refuseSpecial(name, 'unsealed');
    const access = await permissions.access(user, name);
    if (!access.exists) throw databaseDoesNotExist(name);
    if (!access.ownerOrSuperuser) throw functionDenied(fn, name);
    const previous = registry.templates.get(name);
    const record: TemplateRecord = previous
      ? { ...previous, sealed: false }
      : { name, sealed: false, sealedAt: null, generation: 0, snapshotOf: null, kept: true, groupGrantsFrom: null };
    // Unsealed in memory first: no mint or refill starts from it while it opens up; its spares are stale.
    registry.templates.set(name, record);
    try {
      await (await metadata.client()).query(`ALTER DATABASE ${quoteIdent(name)} WITH IS_TEMPLATE false ALLOW_CONNECTIONS true`);
      // Open for changes, it holds no rights for the credentials' group; sealing grants them again.
      const client = await this.opts.connect(name);
      try {
        await unprepareDatabase(client);
      } finally {
        await client.close();
      }
      await metadata.saveTemplate(record);
    } catch (err) {
      if (previous) registry.templates.set(name, previous);
      else registry.templates.delete(name);
      throw err;
    }
    logger.info('template-unsealed', { template: name, at: clock.now() });
    return record;
  }

  /**
   * Drops template (or snapshot) `name`: its record first, so nothing mints or refills from it while it
   * goes (its spares are then stale, and the janitor drops them), then the database. Databases minted
   * from it keep their data (they are copies), but a user who still mints from the name would lose it:
   * without `force` that is refused with 55006 saying how many there are.
   */
  drop(name: string, user: string, force: boolean, fn = controlSqlName('drop_template')): Promise<void> {
    return this.lanes.run(name, () => this.doDrop(name, user, force, fn));
  }

  private async doDrop(name: string, user: string, force: boolean, fn: string): Promise<void> {
    const { registry, metadata, permissions, logger } = this.opts;
    this.refuseSpecial(name, 'dropped');
    const record = registry.templates.get(name);
    const access = await permissions.access(user, name);
    if (!record) {
      if (access.exists) {
        throw new PgxError('NOT_A_TEMPLATE', `database "${name}" is not a template PGX knows`, {
          hint: `Drop an ordinary database with DROP DATABASE ${quoteIdent(name)}, or SELECT pgx_drop_database('${name}') for one PGX minted.`,
        });
      }
      throw databaseDoesNotExist(name);
    }
    if (access.exists && !access.ownerOrSuperuser) throw functionDenied(fn, name);
    const copies = [...registry.databases.values()].filter((d) => d.template === name).length;
    if (copies > 0 && !force) {
      throw new PgxError('OBJECT_IN_USE', `cannot drop template "${name}": ${plural(copies, 'database')} minted from it ${copies === 1 ? 'is' : 'are'} alive`, {
        detail: 'They keep their data when it goes; only minting from it ends.',
        hint: `Drop them first, or drop it anyway: SELECT ${fn}('${name}', true).`,
      });
    }
    registry.templates.delete(name);
    try {
      const admin = await metadata.client();
      if (access.exists) {
        await this.endSessions(admin, name);
        await admin.query(`ALTER DATABASE ${quoteIdent(name)} WITH IS_TEMPLATE false`);
        await admin.query(`DROP DATABASE IF EXISTS ${quoteIdent(name)} WITH (FORCE)`);
      }
      await metadata.deleteTemplate(name);
    } catch (err) {
      registry.templates.set(name, record);
      throw err;
    }
    logger.info('template-dropped', { template: name, snapshotOf: record.snapshotOf, by: user, mintedCopiesAlive: copies, forced: copies > 0 });
  }

  /**
   * Renames template (or snapshot) `name` to `to` with ALTER DATABASE RENAME, its record with it.
   * PostgreSQL renames only a database nobody is connected to (55006 otherwise); PGX refuses too while
   * databases minted from it are alive, whose names and records name the template. Its spares turn
   * stale (the janitor drops them) and the pool makes new ones under the new name.
   */
  rename(name: string, to: string, user: string, fn = controlSqlName('rename_template')): Promise<TemplateRecord> {
    return this.lanes.run(name, () => this.doRename(name, to, user, fn));
  }

  private async doRename(name: string, to: string, user: string, fn: string): Promise<TemplateRecord> {
    const { registry, metadata, permissions, logger } = this.opts;
    this.refuseSpecial(name, 'renamed');
    const record = registry.templates.get(name);
    const access = await permissions.access(user, name);
    if (!record) {
      if (!access.exists) throw databaseDoesNotExist(name);
      throw new PgxError('NOT_A_TEMPLATE', `database "${name}" is not a template PGX knows`, { hint: `Rename an ordinary database with ALTER DATABASE ${quoteIdent(name)} RENAME TO ...` });
    }
    if (access.exists && !access.ownerOrSuperuser) throw functionDenied(fn, name);
    const problem = isReservedName(to) || isSystemDatabase(to) ? 'the name is reserved' : templateNameProblem(to, this.opts.prefix);
    if (problem !== null) {
      throw new PgxError('INVALID_PARAMETER', `template name "${to}" is not usable: ${problem}`, { hint: 'Use lower-case letters, digits and single underscores, e.g. tpl_app_v2.' });
    }
    if ((await permissions.access(user, to)).exists || registry.templates.has(to)) {
      throw new PgxError('DUPLICATE_DATABASE', `database "${to}" already exists`, { hint: 'Pick another name.' });
    }
    const copies = [...registry.databases.values()].filter((d) => d.template === name).length;
    if (copies > 0) {
      throw new PgxError('OBJECT_IN_USE', `cannot rename template "${name}": ${plural(copies, 'database')} minted from it ${copies === 1 ? 'is' : 'are'} alive`, {
        detail: `Their names (${this.opts.prefix}${name}__<token>) and records name the template.`,
        hint: `Drop them first (SELECT pgx_drop_database(name)), or build the template again under the new name.`,
      });
    }
    const open = this.opts.engine.sessionsPerDatabase().get(name) ?? 0;
    if (open > 0) {
      throw new PgxError('OBJECT_IN_USE', `database "${name}" is being accessed by other users`, {
        detail: `There ${open === 1 ? 'is 1 other session' : `are ${open} other sessions`} using the database.`,
        hint: 'Close them and rename it again.',
      });
    }
    this.opts.engine.closeIdleBackends(name);
    const renamed: TemplateRecord = { ...record, name: to };
    const admin = await metadata.client();
    // Out of the registry first: nothing mints from it while it changes name.
    registry.templates.delete(name);
    try {
      await admin.query(`ALTER DATABASE ${quoteIdent(name)} RENAME TO ${quoteIdent(to)}`);
    } catch (err) {
      registry.templates.set(name, record);
      throw err;
    }
    try {
      await metadata.renameTemplate(name, renamed);
    } catch (err) {
      // The records still say `name`: so does the database again.
      await admin.query(`ALTER DATABASE ${quoteIdent(to)} RENAME TO ${quoteIdent(name)}`).catch(() => undefined);
      registry.templates.set(name, record);
      throw err;
    }
    registry.templates.set(to, renamed);
    logger.info('template-renamed', { template: name, to, snapshotOf: record.snapshotOf, by: user });
    this.opts.pool.kick();
    return renamed;
  }

  /**
   * VACUUM (FREEZE, ANALYZE) inside the template: copies start frozen and with statistics. The
   * extension allow-list and the credentials' group grants go in first, so every database minted from
   * it has them; a last session leaves the relation cache init file for clones to inherit.
   */
  private async freeze(name: string): Promise<void> {
    const client = await this.opts.connect(name);
    try {
      await installExtensionGuard(client, this.opts.allowedExtensions);
      // Before the VACUUM, so the ACLs it writes are frozen too: copies need no connection for a credential.
      await prepareDatabase(client);
      await client.query('VACUUM (FREEZE, ANALYZE)');
    } finally {
      await client.close();
    }
    // The VACUUM invalidated the relation cache init file (pg_internal.init); a new session writes it
    // again. FILE_COPY clones carry it, so their first client skips building it (measured: 20.6 ms
    // against 9.9 ms for that first connect, benchmarks.md "Copy-on-write").
    const warm = await this.opts.connect(name);
    try {
      await warm.query('SELECT 1');
    } finally {
      await warm.close();
    }
  }

  /**
   * Ends every other session on the template: the engine's clients first, told why, then whatever
   * else PostgreSQL has there (the engine's idle pooled backends, direct connections).
   */
  private async endSessions(admin: SqlClient, name: string): Promise<void> {
    const ended = this.opts.engine.terminateSessions(
      name,
      `terminating connection: database "${name}" was sealed as a template`,
      `Connect to a database minted from it (${this.opts.prefix}${name}__<token>), or unseal it with SELECT pgx_unseal_template('${name}') to change it.`,
    );
    const backends = await terminateBackends(admin, name);
    this.opts.logger.info('template-sessions-ended', { template: name, engineSessions: ended, backends });
  }

  /** PGX's own databases are invisible (3D000); system and minted databases cannot be templates. */
  private refuseSpecial(name: string, what: 'sealed' | 'unsealed' | 'built' | 'dropped' | 'renamed'): void {
    if (isReservedName(name)) throw databaseDoesNotExist(name);
    if (isSystemDatabase(name)) {
      throw new PgxError('INVALID_PARAMETER', `database "${name}" cannot be ${what}: PGX and PostgreSQL rely on it`, {
        hint: 'Create a database of your own (CREATE DATABASE tpl_app), fill it, and seal that.',
      });
    }
    if (this.opts.registry.databases.has(name)) {
      throw new PgxError('INVALID_PARAMETER', `database "${name}" cannot be ${what}: it was minted by PGX and is dropped when idle`, {
        hint: 'Seal a database you created with CREATE DATABASE; mint from that template instead.',
      });
    }
  }
}

/** "1 database", "2 databases". */
function plural(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`;
}
