// The engine's ControlFunctions (engine/ports.ts): a handler for every control function
// engine/control-functions.ts declares. The handlers are a map over the engine's keys, so a function
// declared there without a handler here does not compile (rather than failing a client's call at run
// time). Each reads its arguments (a name that is not NULL, an optional force flag) and answers the
// function's text value.

import type { Caller, ControlFunction, ControlFunctions } from '../../engine/ports.js';
import { PgxError } from '../../errors.js';
import type { DiskRoom } from '../postgres/disk-guard.js';
import type { DiskUse } from '../postgres/disk-usage.js';
import type { RuntimeStatus } from '../status.js';
import type { Snapshots } from '../templates/snapshots.js';
import type { Templates } from '../templates/templates.js';
import type { DatabaseCommands } from './commands.js';
import { controlSqlName } from './names.js';
import { functionDenied, type Permissions } from './permissions.js';
import type { TemplateRecord } from './records.js';

/** Runs one function for `caller`; `fn` is its SQL name, for messages. */
type Handler = (args: (string | null)[], caller: Caller, fn: string) => Promise<string>;

/** One handler per declared control function: the compiler checks that none is missing. */
export type ControlHandlers = { readonly [F in ControlFunction]: Handler };

export interface ControlParts {
  permissions: Permissions;
  templates: Templates;
  commands: DatabaseCommands;
  snapshots: Snapshots;
  status: () => Promise<RuntimeStatus>;
  /** Templates and snapshots with their disk use (operations.ts listTemplatesWithUse). */
  templatesWithUse: () => Promise<(TemplateRecord & { use: DiskUse })[]>;
  disk?: DiskRoom | undefined;
}

export function controlHandlers(p: ControlParts): ControlHandlers {
  return {
    runtime_status: async (_args, caller, fn) => {
      const access = await p.permissions.access(caller.user, caller.database);
      if (!access.ownerOrSuperuser) throw functionDenied(fn, caller.database);
      return JSON.stringify(await p.status());
    },
    list_templates: async (_args, caller, fn) => {
      // Sizes read every template's files: for those who may read the runtime's status.
      const access = await p.permissions.access(caller.user, caller.database);
      if (!access.ownerOrSuperuser) throw functionDenied(fn, caller.database);
      const items = (await p.templatesWithUse()).map((t) => ({ name: t.name, sealed: t.sealed, snapshot_of: t.snapshotOf, kept: t.kept, ...t.use }));
      return JSON.stringify(items);
    },
    seal_template: async (args, caller, fn) => (await p.templates.seal(nameArg(fn, args), caller.user, fn, caller.database)).name,
    unseal_template: async (args, caller, fn) => (await p.templates.unseal(nameArg(fn, args), caller.user, fn)).name,
    pin_database: async (args, caller, fn) => (await p.commands.setPinned(nameArg(fn, args), true, caller.user, fn)).name,
    unpin_database: async (args, caller, fn) => (await p.commands.setPinned(nameArg(fn, args), false, caller.user, fn)).name,
    drop_database: async (args, caller, fn) => {
      const name = nameArg(fn, args);
      await p.commands.drop(name, caller, fn);
      return name;
    },
    drop_template: async (args, caller, fn) => {
      const [name, force] = dropTemplateArgs(fn, args);
      await p.templates.drop(name, caller.user, force, fn);
      return name;
    },
    rename_template: async (args, caller, fn) => {
      const [name, to] = twoNames(fn, '(template, new_name)', args, "'tpl_app', 'tpl_app_v1'");
      return (await p.templates.rename(name, to, caller.user, fn)).name;
    },
    keep_snapshot: async (args, caller, fn) => {
      const name = args[0];
      if (args.length < 1 || args.length > 2 || name == null) {
        throw new PgxError('INVALID_PARAMETER', `${fn}(snapshot [, keep]) takes a snapshot name that is not NULL`, { hint: `For example: SELECT ${fn}('agent42_before_migration').` });
      }
      // Absent: keep it; false gives it back to its database.
      const keep = args[1] == null ? true : flagArg(fn, 'keep', args[1]);
      return (await p.snapshots.keep(name, keep, caller.user, fn)).name;
    },
    snapshot_database: async (args, caller, fn) => {
      const [db, name, force] = snapshotArgs(fn, args);
      p.disk?.assertRoom(`cannot snapshot database "${db}"`);
      return (await p.snapshots.snapshot(db, name, caller, force, fn)).name;
    },
    restore_database: async (args, caller, fn) => {
      const [db, name, force] = snapshotArgs(fn, args);
      p.disk?.assertRoom(`cannot restore database "${db}"`);
      await p.snapshots.restore(db, name, caller, force, fn);
      return db;
    },
  };
}

/** The port the engine calls: each call goes to its function's handler. */
export function controlFunctions(handlers: ControlHandlers): ControlFunctions {
  return { call: (fn, args, caller) => handlers[fn](args, caller, controlSqlName(fn)) };
}

/** The one argument of a control function: a database name, not NULL. */
function nameArg(fn: string, args: (string | null)[]): string {
  const name = args[0];
  if (args.length !== 1 || name === null || name === undefined) {
    throw new PgxError('INVALID_PARAMETER', `${fn}(name) takes one database name, not ${args.length === 1 ? 'NULL' : `${args.length} arguments`}`, {
      hint: `For example: SELECT ${fn}('tpl_app').`,
    });
  }
  return name;
}

/** (template [, force]): a name that is not NULL, and an optional boolean. */
function dropTemplateArgs(fn: string, args: (string | null)[]): [string, boolean] {
  const [name, force] = args;
  if (args.length < 1 || args.length > 2 || name == null) {
    throw new PgxError('INVALID_PARAMETER', `${fn}(template [, force]) takes a template name that is not NULL`, { hint: `For example: SELECT ${fn}('tpl_old').` });
  }
  return [name, forceArg(fn, force)];
}

/** Two names that are not NULL: `usage` shows them, `example` is a call's arguments. */
function twoNames(fn: string, usage: string, args: (string | null)[], example: string): [string, string] {
  const [a, b] = args;
  if (args.length !== 2 || a == null || b == null) {
    throw new PgxError('INVALID_PARAMETER', `${fn}${usage} takes two names that are not NULL`, { hint: `For example: SELECT ${fn}(${example}).` });
  }
  return [a, b];
}

/** (db, name [, force]): two database names and an optional boolean, as pgx_snapshot/restore_database take. */
function snapshotArgs(fn: string, args: (string | null)[]): [string, string, boolean] {
  const [db, name, force] = args;
  if (args.length < 2 || args.length > 3 || db == null || name == null) {
    throw new PgxError('INVALID_PARAMETER', `${fn}(database, snapshot [, force]) takes two names that are not NULL`, {
      hint: `For example: SELECT ${fn}('tdb_app__agent42', 'agent42_before_migration').`,
    });
  }
  return [db, name, forceArg(fn, force)];
}

/** A control function's optional force argument: absent or NULL is false. */
function forceArg(fn: string, force: string | null | undefined): boolean {
  return flagArg(fn, 'force', force);
}

/** An optional boolean argument (force, keep): absent or NULL is false. */
function flagArg(fn: string, what: string, value: string | null | undefined): boolean {
  if (value != null && value !== 'true' && value !== 'false') throw new PgxError('INVALID_PARAMETER', `${fn}: ${what} must be true or false, not "${value}"`);
  return value === 'true';
}
