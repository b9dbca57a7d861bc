// Makes the records agree with the cluster, which is the truth: run at start and now and then by the
// janitor. The records and the cluster drift when the runtime dies between a CREATE/DROP and its
// record, or when someone runs DROP DATABASE or ALTER DATABASE by hand.
//   - a record whose database is gone is forgotten (routing would otherwise send clients to nothing);
//   - a database under the prefix with no record is adopted as minted only when a superuser owns it
//     (a mint by the API whose record a crash lost: no tenant can make a database a superuser owns);
//     one a tenant owns is never adopted, and never served (mint.ts refuses its name with 42P04), or a
//     tenant's CREATE DATABASE under the prefix would squat a name someone else is handed. A tenant's
//     own mint whose record a crash lost stays out too: logged, for a superuser to drop;
//   - a spare with no record is handed to the janitor to drop;
//   - a dropped database renamed to pgx_trash_<oid> whose DROP DATABASE never ran (the runtime stopped
//     or died first) goes to the trash (trash.ts), which drops it in the background; only one a
//     superuser owns (a drop gives it to the runtime), never a tenant's database named like it;
//   - a template recorded sealed that PostgreSQL no longer has sealed (IS_TEMPLATE without connections;
//     a snapshot: without connections, create-database.ts sealSql) is recorded unsealed (or gone).
// Anything changed after the catalog snapshot was taken is left for the next run.

import type { Clock } from '../../clock.js';
import type { Logger } from '../../log.js';
import type { MetadataStore } from './metadata.js';
import { isBuildName, isSpareName, isTrashName, mintNameProblem, parseMintName } from './names.js';
import { newDatabaseRecord, type DatabaseRecord } from './records.js';
import type { Registry } from './registry.js';

export interface ReconcileOptions {
  prefix: string;
  registry: Registry;
  metadata: MetadataStore;
  /** Unrecorded names under the prefix already logged (each is logged once, not every run). */
  reported: Set<string>;
  /** Names a mint, claim, refill or drop is working on right now: not drift, work in progress. */
  busy: (name: string) => boolean;
  /** Queues a trash database for its DROP DATABASE; true when it was not queued already. */
  trash: (name: string) => boolean;
  clock: Clock;
  logger: Logger;
}

interface ClusterDatabase {
  owner: string;
  /** Nobody can connect to it (a sealed snapshot). */
  closed: boolean;
  /** IS_TEMPLATE as well (a sealed template). */
  sealed: boolean;
  ownerIsSuperuser: boolean;
}


/** Returns how many records it changed. */
export async function reconcile(o: ReconcileOptions): Promise<number> {
  const { registry, metadata, clock, logger } = o;
  const snapshotAt = clock.now();
  const { rows } = await (await metadata.client()).query(
    'SELECT d.datname, pg_catalog.pg_get_userbyid(d.datdba), NOT d.datallowconn, d.datistemplate, coalesce(r.rolsuper, false) ' +
      'FROM pg_catalog.pg_database d LEFT JOIN pg_catalog.pg_roles r ON r.oid = d.datdba',
  );
  const cluster = new Map<string, ClusterDatabase>(
    rows.map(([name, owner, closed, template, superuser]) => [
      name!,
      { owner: owner ?? '', closed: closed === 't', sealed: closed === 't' && template === 't', ownerIsSuperuser: superuser === 't' },
    ]),
  );
  let changed = 0;

  for (const d of [...registry.databases.values(), ...registry.spares.values()]) {
    if (cluster.has(d.name) || d.createdAt >= snapshotAt || o.busy(d.name)) continue;
    registry.forget(d.name);
    await metadata.deleteDatabase(d.name);
    logger.info('record-forgotten', { database: d.name, kind: d.kind, reason: 'no longer in pg_database (dropped outside PGX)' });
    changed++;
  }

  for (const [name, db] of cluster) {
    if (isTrashName(name)) {
      // Only trash a drop made (it gives the database to the runtime): a tenant's CREATE DATABASE of
      // such a name is its own, left alone as an unadopted name under the prefix is.
      if (db.ownerIsSuperuser && o.trash(name)) logger.info('trash-found', { database: name, reason: 'dropped, but its DROP DATABASE had not run: dropped in the background now' });
      else if (!db.ownerIsSuperuser && !o.reported.has(name)) {
        o.reported.add(name);
        logger.warn('trash-not-dropped', { database: name, owner: db.owner, reason: 'named as trash but not owned by a superuser, so not made by a drop: never served; a superuser may drop it' });
      }
      continue;
    }
    if (o.busy(name) || registry.databases.has(name) || registry.spares.has(name)) continue;
    if (isSpareName(name) || isBuildName(name)) {
      // Not recorded, so never handed out: a stale spare (or a build's scratch copy) the janitor drops.
      registry.put(orphan(name, '', db.owner, snapshotAt, 'spare'));
      logger.info('spare-orphaned', { spare: name, reason: 'not in pgx_control: left by a runtime that stopped while creating it' });
      changed++;
    } else if (name.startsWith(o.prefix) && !db.ownerIsSuperuser) {
      if (!o.reported.has(name)) {
        o.reported.add(name);
        logger.warn('database-not-adopted', {
          database: name,
          owner: db.owner,
          reason: 'under the mint prefix but not minted by this runtime (no record, not owned by a superuser): never served; a superuser may drop it',
        });
      }
    } else if (name.startsWith(o.prefix) && mintNameProblem(name, o.prefix) === null) {
      const record = orphan(name, parseMintName(name, o.prefix).template, db.owner, snapshotAt, 'ephemeral');
      registry.put(record);
      await metadata.saveDatabase(record);
      logger.info('database-adopted', { database: name, owner: db.owner, reason: 'under the mint prefix but not in pgx_control; dropped after --grace like any minted database' });
      changed++;
    }
  }

  for (const t of [...registry.templates.values()]) {
    const db = cluster.get(t.name);
    if (!t.sealed) {
      // Unsealed and then dropped by hand: nothing of it is left to list.
      if (db === undefined && !o.busy(t.name)) {
        registry.templates.delete(t.name);
        await metadata.deleteTemplate(t.name);
        logger.info('template-forgotten', { template: t.name, reason: 'dropped outside PGX while unsealed' });
        changed++;
      }
      continue;
    }
    if ((t.sealedAt ?? 0) >= snapshotAt) continue;
    if (t.snapshotOf !== null ? db?.closed : db?.sealed) continue;
    if (db) {
      const record = { ...t, sealed: false };
      registry.templates.set(t.name, record);
      await metadata.saveTemplate(record);
    } else {
      registry.templates.delete(t.name);
      await metadata.deleteTemplate(t.name);
    }
    logger.info('template-unsealed', { template: t.name, reason: db ? `no longer ${t.snapshotOf !== null ? 'closed to connections' : 'IS_TEMPLATE without connections'} in pg_database` : 'dropped outside PGX' });
    changed++;
  }
  return changed;
}

/** A record for a database found without one; generation -1 makes a spare stale. */
function orphan(name: string, template: string, owner: string, now: number, kind: 'spare' | 'ephemeral'): DatabaseRecord {
  return newDatabaseRecord({ name, kind, template, generation: -1, owner, createdAt: now });
}
