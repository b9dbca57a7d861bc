// The engine's Router (engine/ports.ts): the database name of a startup packet turned into a database
// PostgreSQL has. Names outside the prefix pass at once (PostgreSQL answers 3D000 itself if absent); a
// new name under the prefix is minted once however many clients ask; PGX's own databases (pgx_control,
// spares) are refused as if absent; a per-database credential reaches its own database only; a minted
// database serves its minter (and what PostgreSQL counts as its owner), its credentials and superusers,
// never another tenant its owner granted CONNECT. A sealed template is refused as PostgreSQL refuses
// it (55000), with what to connect to instead.

import type { Clock } from '../../clock.js';
import type { Caller, Route, Router } from '../../engine/ports.js';
import { PgxError } from '../../errors.js';
import { credentialDenied, type DatabaseCredentials } from './credentials.js';
import type { Dropper } from './dropper.js';
import type { Lifecycle } from './lifecycle.js';
import type { ClaimSent, Minted, Minter } from './mint.js';
import { NameQueue } from './name-queue.js';
import { databaseDoesNotExist, isReservedName, isUnderPrefix, parseMintName } from './names.js';
import type { Permissions } from './permissions.js';
import type { Registry } from './registry.js';
import type { Tombstones } from './tombstones.js';

export interface MintRouterOptions {
  prefix: string;
  lifecycle: Lifecycle;
  registry: Registry;
  credentials: DatabaseCredentials;
  dropper: Dropper;
  tombstones: Tombstones;
  minter: Minter;
  permissions: Permissions;
  clock: Clock;
}

const RESOLVED = Promise.resolve();

export class MintRouter implements Router {
  /** Databases whose new connects wait (a snapshot or restore in progress), until their turn settles. */
  private readonly held = new NameQueue();

  constructor(private readonly o: MintRouterOptions) {}

  /**
   * Resolves when `database` can be connected to: at once for names outside the prefix, after minting
   * it for a new name under the prefix. `early`: as soon as a warm claim of it has gone out, with
   * Route.made (see there).
   */
  route(caller: Caller, early = false): Promise<Route | void> {
    const held = this.held.pending(caller.database);
    if (held) return held.then(() => this.route(caller, early));
    if (isReservedName(caller.database)) return Promise.reject(databaseDoesNotExist(caller.database));
    // A per-database credential reaches its own database only (and never mints one).
    const home = this.o.credentials.databaseOf(caller.user);
    if (home !== undefined && home !== caller.database) return Promise.reject(credentialDenied(caller.database));
    if (!isUnderPrefix(caller.database, this.o.prefix)) {
      return this.o.registry.sealedTemplate(caller.database) ? Promise.reject(sealedTemplate(caller.database, this.o.prefix)) : RESOLVED;
    }
    return this.routeMinted(caller.database, caller.user, home === caller.database, early);
  }

  /** Runs `work` while route() holds new connects to `db` (they proceed once it settles). */
  holdConnects<T>(db: string, work: () => Promise<T>): Promise<T> {
    return this.held.run(db, work);
  }

  private async routeMinted(database: string, user: string, credential: boolean, early: boolean): Promise<Route | void> {
    const { registry } = this.o;
    const name = parseMintName(database, this.o.prefix);
    const state = this.o.lifecycle.state;
    if (state !== 'running') {
      throw new PgxError('CANNOT_CONNECT_NOW', `cannot create database "${database}": the runtime is ${state === 'new' || state === 'starting' ? 'starting up' : 'shutting down'}`, {
        hint: 'Connect again in a moment.',
      });
    }
    // A name being dropped (idle, expired) is minted afresh once the drop is done.
    await this.o.dropper.dropping(database)?.catch(() => undefined);
    let baseline: Minted['loginBaseline'] = null;
    if (!registry.databases.has(database)) {
      const buried = this.o.tombstones.refusal(database);
      if (buried !== null) throw buried;
      let claimSent: ClaimSent = () => {};
      const sent = new Promise<Parameters<ClaimSent>[0]>((resolve) => (claimSent = resolve));
      const minting = this.o.minter.minted(name, user, {}, early ? claimSent : undefined);
      const first = await Promise.race([minting, sent.then((reused) => ({ reused }))]);
      if ('reused' in first) {
        // The claim went out: the client's login goes out beside it, served once the claim is in.
        const made = minting.then((m) => this.admitted(database, user, credential, m.loginBaseline));
        // Its failure is the engine's to show, if the client is still there to see it.
        made.catch(() => undefined);
        return { made, loginBaselineRows: first.reused.rows };
      }
      baseline = first.loginBaseline;
    }
    return this.admitted(database, user, credential, baseline);
  }

  /** The checks and bookkeeping after `database` exists: who may connect, and its session cap. */
  private async admitted(database: string, user: string, credential: boolean, baseline: Minted['loginBaseline']): Promise<Route | void> {
    const { registry } = this.o;
    if (!credential) await this.admitToMinted(database, user);
    registry.lastRouted.set(database, this.o.clock.now());
    const limit = registry.databases.get(database)?.connectionLimit ?? null;
    // A mint joined by another role read the minting role's rows: this one's backend reads its own.
    const rows = baseline !== null && baseline.role === user ? baseline.rows : undefined;
    if (limit === null && rows === undefined) return undefined;
    return { ...(limit !== null ? { maxSessions: limit } : {}), ...(rows !== undefined ? { loginBaselineRows: rows } : {}) };
  }

  /**
   * A minted name is its minter's. Its owner can GRANT CONNECT on it (PostgreSQL's rule), but a name
   * under the prefix is one a client expects to mint: another tenant who connects to it, an old URL or
   * a CI job's name minted again after its grace, would otherwise land in a database someone else owns
   * and arranged (a schema named after the visitor comes first in its search_path), and write there.
   * So only the recorded owner, roles PostgreSQL counts as the owner (members of it, superusers) and
   * the database's credentials (route() let them through) are served; the catalog is asked only for
   * a role other than the recorded owner.
   */
  private async admitToMinted(database: string, user: string): Promise<void> {
    const record = this.o.registry.databases.get(database);
    if (record === undefined || record.owner === user) return;
    const access = await this.o.permissions.access(user, database);
    // A role that does not exist gets PostgreSQL's own refusal at login (28000), which says what it is:
    // a revoked credential's client (the MCP server) asks for a new one on it.
    if (access.ownerOrSuperuser || !access.roleExists) return;
    throw credentialDenied(database, `Database "${database}" was minted by another role. Connect to a name of your own (${this.o.prefix}<template>__<token>), or ask for a credential of this one.`);
  }
}

/**
 * PostgreSQL's own refusal of a database that allows no connections (55000, its message word for word),
 * with what PostgreSQL cannot say: the template is PGX's, and what to connect to instead.
 */
function sealedTemplate(name: string, prefix: string): PgxError {
  return new PgxError('TEMPLATE_SEALED', `database "${name}" is not currently accepting connections`, {
    detail: `"${name}" is a sealed PGX template: databases are minted from it, nobody connects to it.`,
    hint: `Connect to a database minted from it (${prefix}${name}__<token>, any token makes a new one), or unseal it to change it: SELECT pgx_unseal_template('${name}').`,
  });
}
