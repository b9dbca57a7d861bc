// Minting: a name under the prefix that does not exist yet becomes a database, copied from its sealed
// template, owned by the connecting role. Concurrent requests for one name share one mint. A spare
// from the warm pool is claimed when one is ready (warm: a rename), else the template is copied
// (cold). Refusals are worded as PostgreSQL words a missing database (3D000), with a hint saying why.

import type { Clock } from '../../clock.js';
import { PgxError } from '../../errors.js';
import type { Logger } from '../../log.js';
import type { Counters, MintSource } from './counters.js';
import { claimSpareSql, closeToPublicSql, createDatabase, createDatabaseSql } from './create-database.js';
import type { MetadataStore } from './metadata.js';
import type { MintQueue } from './mint-queue.js';
import type { AdminConnection } from '../postgres/admin-connection.js';
import { databaseDoesNotExist, type MintName } from './names.js';
import { snapshotDenied, type ClaimCheck, type Permissions } from './permissions.js';
import { newDatabaseRecord, type InitialSettings, type TemplateRecord } from './records.js';
import type { LoginTriggers } from './login-triggers.js';
import type { Registry } from './registry.js';
import { postgresSqlstate, quoteLiteral, type SqlClient } from '../postgres/sql-client.js';
import { Tally } from './tally.js';
import type { WarmPool } from './warm-pool.js';
import type { DiskRoom } from '../postgres/disk-guard.js';

export interface MinterOptions {
  /** Minted databases the runtime holds at most (--max-databases); beyond it 53400. */
  maxDatabases: number;
  /** Minted databases one role may own at most (--max-databases-per-role); null for no cap. */
  maxDatabasesPerRole: number | null;
  registry: Registry;
  metadata: MetadataStore;
  pool: WarmPool;
  queue: MintQueue;
  /**
   * The connection claims run on when a spare is ready at once: a claim is three catalog updates, and
   * must not wait behind the mint workers' creates (hundreds of ms each in a burst).
   */
  claims: AdminConnection;
  permissions: Permissions;
  counters: Counters;
  /** Free space on the data filesystem: a mint below --min-free-disk is refused with 53100. */
  disk?: DiskRoom;
  clock: Clock;
  logger: Logger;
  /** Whether a login may go out beside a claim (login-triggers.ts); none given: never. */
  loginTriggers?: LoginTriggers;
  /**
   * The engine's login baseline query for a role, given its name as an SQL expression
   * (engine/login-check.ts settingsRowsSql): a claim runs it behind the rename, so the minted
   * database's first backend needs no query of its own. None: not read.
   */
  loginBaselineSql?: (roleName: string) => string;
}

interface InFlight {
  user: string;
  promise: Promise<Minted>;
}

/** A mint's outcome, and the login baseline its claim read (engine/ports.ts Route), for `role`. */
export interface Minted {
  source: MintSource;
  loginBaseline: LoginBaseline | null;
}

type LoginBaseline = { role: string; rows: (string | null)[][] };

/**
 * Told when a warm claim of the name has gone out to PostgreSQL, with the login baseline it reuses:
 * the name exists once the claim commits, so the client's login may go out beside it (engine/ports.ts
 * Route.made).
 */
export type ClaimSent = (baseline: LoginBaseline) => void;

/**
 * How long a role's login baseline, read by one claim, serves the claims after it. The rows are the
 * same for every database (a role's and every database's defaults), and rows older than a login can
 * only fail its backend's first reuse check, never pass a wrong one (engine/backend-login-checks.ts
 * adopt): a default changed meanwhile costs one backend replaced, while reading them in every claim
 * cost a warm mint 0.2 ms of its 4 (the read after the claim's catalog updates is slow from idle;
 * docs/benchmarks.md, Mint).
 */
const BASELINE_REUSE_MS = 60_000;
/** Roles whose baseline is kept at most (the least recently read go first). */
const BASELINES_KEPT = 1_000;

export class Minter {
  private readonly inFlight = new Map<string, InFlight>();
  /** Mints in flight per template: the demand a pool that ran out of spares grows towards. */
  private readonly inFlightOf = new Tally();
  /** Mints past the caps and not yet recorded, in total and per role: they count against the caps. */
  private accepted = 0;
  private readonly acceptedPerRole = new Tally();
  /** Refusals that concern the asking role only; another role sharing the mint asks again for itself. */
  private readonly roleRefusals = new WeakSet<Error>();
  /** The login baseline each role's latest claim read, and when (BASELINE_REUSE_MS). */
  private readonly baselines = new Map<string, { baseline: LoginBaseline; readAt: number }>();

  constructor(private readonly opts: MinterOptions) {}

  isMinting(name: string): boolean {
    return this.inFlight.has(name);
  }

  /**
   * Creates `name` for `user`, or joins the mint of it already running. `initial`: what its record starts
   * with (an explicit create's TTL, pin, limits), so no moment exists in which it lacks them.
   */
  mint(name: MintName, user: string, initial: InitialSettings = {}): Promise<MintSource> {
    return this.minted(name, user, initial).then((m) => m.source);
  }

  /**
   * mint(), with the login baseline a claim read (for the role it minted for). `claimSent` hears when
   * a claim for this mint went out, if no other mint was in flight then (beside other mints the
   * machine is busy, and a login that looks the name up too early costs a second one) and no database
   * has a login event trigger (login-triggers.ts).
   */
  minted(name: MintName, user: string, initial: InitialSettings = {}, claimSent?: ClaimSent): Promise<Minted> {
    const running = this.inFlight.get(name.name);
    if (running) {
      if (running.user === user) return running.promise;
      return running.promise.catch((err: unknown) => {
        if (err instanceof Error && this.roleRefusals.has(err)) return this.minted(name, user, initial);
        throw err;
      });
    }
    const beside = this.inFlight.size === 0 && this.opts.loginTriggers?.none === true;
    const promise = this.run(name, user, initial, beside ? claimSent : undefined).finally(() => {
      this.inFlight.delete(name.name);
      this.inFlightOf.remove(name.template);
    });
    this.inFlight.set(name.name, { user, promise });
    this.inFlightOf.add(name.template);
    return promise;
  }

  private async run(name: MintName, user: string, initial: InitialSettings, claimSent: ClaimSent | undefined): Promise<Minted> {
    const { registry, permissions, counters, clock } = this.opts;
    const started = clock.monotonic();
    const template = registry.sealedTemplate(name.template);
    if (!template) {
      // Not recorded (route() asks the registry first): a database of that name was made outside PGX.
      if (await permissions.databaseExists(name.name)) throw notMinted(name.name);
      throw databaseDoesNotExist(name.name, {
        hint: registry.templates.has(name.template)
          ? `Template "${name.template}" is unsealed; seal it again with SELECT pgx_seal_template('${name.template}').`
          : `There is no sealed template "${name.template}"; create that database and seal it with SELECT pgx_seal_template('${name.template}').`,
      });
    }
    // A snapshot holds its database's data: minted from by its owner only (a restore checks the same).
    if (template.snapshotOf !== null && !(await permissions.access(user, template.name)).ownerOrSuperuser) {
      const err = snapshotDenied(template.name);
      this.roleRefusals.add(err);
      throw err;
    }
    // A claim of a ready spare can check the mint rule itself (claimCheck), saving a catalog lookup.
    const check = permissions.claimCheck(user);
    let verified = check === 'none';
    if (!verified && !(check !== null && this.opts.pool.hasReady(template))) {
      if (!(await permissions.mayMint(user))) return this.refusal(name, user);
      verified = true;
    }
    try {
      this.opts.disk?.assertRoom(`cannot create database "${name.name}"`);
    } catch (err) {
      counters.add('mints.failures');
      throw err;
    }
    this.accept(name.name, user);
    try {
      const minted = await this.obtain(name, template, user, verified ? null : check, initial, claimSent);
      if (minted !== 'refused') {
        const { source } = minted;
        const ms = clock.monotonic() - started;
        counters.recordMint(source, ms);
        this.opts.logger.debug('database-minted', { database: name.name, template: template.name, owner: user, source, ms: Math.round(ms) });
        return minted;
      }
    } catch (err) {
      counters.add('mints.failures');
      this.opts.logger.warn('mint-failed', { database: name.name, template: template.name, owner: user, err });
      throw err;
    } finally {
      this.release(user);
    }
    return this.refusal(name, user);
  }

  /**
   * A spare claimed at once, else a claim or a copy on a mint worker; 'refused' if the role may not
   * mint. `check`: how a claim checks the mint rule ('none' or null: verified already).
   */
  private async obtain(name: MintName, template: TemplateRecord, user: string, check: ClaimCheck | 'none' | null, initial: InitialSettings, claimSent: ClaimSent | undefined): Promise<Minted | 'refused'> {
    const { pool } = this.opts;
    const claimCheck = check === 'none' ? null : check;
    if (pool.hasReady(template)) {
      const claimed = await this.claim(await this.opts.claims.get(), name, template, user, claimCheck, initial, claimSent);
      if (claimed !== null) return claimed;
    }
    if (claimCheck !== null && !(await this.opts.permissions.mayMint(user))) return 'refused';
    // No spare was ready: the pool grows towards the demand it could not meet (warm-pool.ts), and a
    // spare a refill is making now is taken if it comes soon.
    pool.missed(template, this.inFlightOf.of(template.name));
    const soon = pool.spareSoon(template);
    if (soon !== null && (await soon)) {
      const claimed = await this.claim(await this.opts.claims.get(), name, template, user, null, initial);
      if (claimed !== null) return claimed;
    }
    return this.opts.queue.submit(name.name, (client) => this.create(client, name, template, user, initial));
  }

  /** The role may not mint: 3D000, or 42P04 when a database of that name was made outside PGX. */
  private async refusal(name: MintName, user: string): Promise<never> {
    if (await this.opts.permissions.databaseExists(name.name)) throw notMinted(name.name);
    const err = databaseDoesNotExist(name.name, {
      hint: `Role "${user}" may not create databases on connect. Connect as a role with CREATEDB, or add it to the runtime's mint roles (--mint-roles).`,
    });
    this.roleRefusals.add(err);
    throw err;
  }

  /** Counts the mint against the caps, or refuses it with 53400 naming the setting. */
  private accept(name: string, user: string): void {
    const { registry, maxDatabases, maxDatabasesPerRole, counters } = this.opts;
    if (registry.databases.size + this.accepted >= maxDatabases) {
      counters.add('mints.failures');
      throw new PgxError('TOO_MANY_DATABASES', `cannot create database "${name}": the runtime holds its maximum of ${maxDatabases} databases`, {
        hint: 'Drop databases you no longer need (SELECT pgx_drop_database(name)), unpin idle ones, or raise --max-databases.',
      });
    }
    const mine = this.acceptedPerRole.of(user);
    if (maxDatabasesPerRole !== null && registry.ownedBy(user) + mine >= maxDatabasesPerRole) {
      counters.add('mints.failures');
      throw new PgxError('TOO_MANY_DATABASES', `cannot create database "${name}": role "${user}" already owns its maximum of ${maxDatabasesPerRole} databases`, {
        hint: 'Drop databases this role no longer needs (SELECT pgx_drop_database(name)), or raise --max-databases-per-role.',
      });
    }
    this.accepted++;
    this.acceptedPerRole.add(user);
  }

  private release(user: string): void {
    this.accepted--;
    this.acceptedPerRole.remove(user);
  }

  /**
   * Claims a ready spare for `name`: a warm Minted; null when there is none or the claim failed;
   * 'refused' when `checkRole` (how the claim checks the mint rule) and PostgreSQL refused the role
   * (see claimSpareSql). The claim reads the role's login baseline in the same round trip, after the
   * rename in the same session, so before any login to the name (engine/ports.ts Route.loginBaselineRows).
   */
  private async claim(client: SqlClient, name: MintName, template: TemplateRecord, user: string, checkRole: ClaimCheck | null, initial: InitialSettings, claimSent?: ClaimSent): Promise<Minted | 'refused' | null> {
    const { pool, logger, loginBaselineSql, clock } = this.opts;
    const known = this.baselines.get(user);
    const reuse = known !== undefined && clock.monotonic() - known.readAt < BASELINE_REUSE_MS;
    const baselineSql = loginBaselineSql && !reuse ? `; ${loginBaselineSql(quoteLiteral(user))}` : '';
    const spare = pool.take(template);
    if (!spare) return null;
    try {
      const answer = client.query(claimSpareSql(spare.name, name.name, user, checkRole) + baselineSql);
      // Only with a baseline to hand over: else the claim reads it, which needs its answer.
      if (reuse) claimSent?.(known.baseline);
      const { rows } = await answer;
      this.record(name, template, user, spare.generation, spare.name, initial);
      pool.handedOut(spare);
      if (reuse) return { source: 'warm', loginBaseline: known.baseline };
      return { source: 'warm', loginBaseline: baselineSql ? this.keepBaseline({ role: user, rows }) : null };
    } catch (err) {
      // The claim is one transaction: on 42P04 (the name exists already) or 42501 (the role may not
      // have it) the spare is untouched and goes back. Anything else makes it suspect (gone, or the
      // connection died mid-way): the janitor drops it IF EXISTS, and the create that follows answers
      // 42P04 if the rename did go through.
      const sqlstate = postgresSqlstate(err);
      if (sqlstate === '42P04' || sqlstate === '42501') pool.giveBack(spare);
      else pool.discard(spare);
      // The name is taken by a database PGX did not mint (route() found no record): never served.
      if (sqlstate === '42P04') throw notMinted(name.name);
      if (sqlstate === '42501' && checkRole !== null) return 'refused';
      logger.warn('spare-claim-failed', { spare: spare.name, database: name.name, err });
      return null;
    }
  }

  private keepBaseline(baseline: LoginBaseline): LoginBaseline {
    this.baselines.delete(baseline.role);
    this.baselines.set(baseline.role, { baseline, readAt: this.opts.clock.monotonic() });
    if (this.baselines.size > BASELINES_KEPT) this.baselines.delete(this.baselines.keys().next().value!);
    return baseline;
  }

  /** On a mint worker: claim a spare if one has become ready meanwhile, else copy the template. */
  private async create(client: SqlClient, name: MintName, template: TemplateRecord, user: string, initial: InitialSettings): Promise<Minted> {
    const claimed = await this.claim(client, name, template, user, null, initial);
    if (claimed !== null && claimed !== 'refused') return claimed;
    try {
      await createDatabase(client, createDatabaseSql(name.name, template.name, user));
    } catch (err) {
      if (postgresSqlstate(err) === '42P04') throw notMinted(name.name);
      throw err;
    }
    // Before the record, so routing never serves it open to PUBLIC (spares are closed when made).
    await client.query(closeToPublicSql(name.name));
    this.record(name, template, user, template.generation, null, initial);
    this.opts.pool.kick();
    return { source: 'cold', loginBaseline: null };
  }

  /**
   * In memory at once (routing sees it); on disk a moment later, batched (saveDatabaseLater), so the
   * write does not compete with the client's first queries. A failure is only logged, since the
   * database exists either way and reconcile adopts a minted name missing from pgx_control.
   */
  private record(name: MintName, template: TemplateRecord, user: string, generation: number, spare: string | null, initial: InitialSettings): void {
    const { registry, metadata, clock, logger } = this.opts;
    const now = clock.now();
    const record = { ...newDatabaseRecord({ name: name.name, kind: 'ephemeral', template: template.name, generation, owner: user, createdAt: now }), ...initial };
    registry.put(record);
    registry.lastRouted.set(name.name, now);
    const written = metadata.saveDatabaseLater(record, spare ?? undefined);
    written.catch((err: unknown) => logger.error('metadata-write-failed', { database: name.name, err }));
  }
}

/**
 * 42P04 for a name under the mint prefix that holds a database PGX did not mint (a tenant's CREATE
 * DATABASE or RENAME): only databases the runtime minted and recorded are served there, and a mint
 * never adopts one, or the next client to ask for the name would land in the squatter's database.
 */
export function notMinted(name: string): PgxError {
  return new PgxError('DUPLICATE_DATABASE', `database "${name}" exists but was not minted by PGX`, {
    detail: 'Only databases this runtime minted and recorded are served under the mint prefix.',
    hint: 'Connect to another name under the prefix. A superuser can drop the database (DROP DATABASE) to free the name.',
  });
}
