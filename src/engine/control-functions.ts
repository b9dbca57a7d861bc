// The SQL control functions, declared once: each one's key (its SQL name is pgx_<key>), the aliases a
// client may call it by too (the pgrust_ names are PGX's) and its arguments. control.ts recognises calls from this
// table; the runtime must handle every key (runtime/databases/control-functions.ts maps each to its
// handler, and the compiler refuses a key without one). Adding a function is a row here.

/** An argument: a name that must not be NULL, or an optional boolean flag. */
type Argument = { name: string; optional?: true };

const table = {
  runtime_status: { aliases: ['pgrust_runtime_status'], args: [] },
  seal_template: { aliases: ['pgrust_seal_template'], args: [{ name: 'template' }] },
  unseal_template: { aliases: [], args: [{ name: 'template' }] },
  pin_database: { aliases: ['pgrust_pin_database'], args: [{ name: 'database' }] },
  unpin_database: { aliases: ['pgrust_unpin_database'], args: [{ name: 'database' }] },
  drop_database: { aliases: [], args: [{ name: 'database' }] },
  drop_template: { aliases: [], args: [{ name: 'template' }, { name: 'force', optional: true }] },
  snapshot_database: { aliases: [], args: [{ name: 'database' }, { name: 'snapshot' }, { name: 'force', optional: true }] },
  restore_database: { aliases: [], args: [{ name: 'database' }, { name: 'snapshot' }, { name: 'force', optional: true }] },
  rename_template: { aliases: [], args: [{ name: 'template' }, { name: 'new_name' }] },
  keep_snapshot: { aliases: [], args: [{ name: 'snapshot' }, { name: 'keep', optional: true }] },
  list_templates: { aliases: [], args: [] },
} as const satisfies Record<string, { aliases: readonly `pgrust_${string}`[]; args: readonly Argument[] }>;

/** A control function's key: what the engine passes the runtime (ports.ts ControlFunctions.call). */
export type ControlFunction = keyof typeof table;

/** How a client may call a function by one of its names. */
export interface ControlSignature {
  fn: ControlFunction;
  /** Arguments at least and at most. */
  min: number;
  max: number;
  /** The arguments as a usage line shows them: `'database', 'snapshot' [, force]`. */
  usage: string;
}

/** Every name a client may call, with what it calls. */
export const CONTROL_NAMES: ReadonlyMap<string, ControlSignature> = new Map(
  (Object.entries(table) as [ControlFunction, (typeof table)[ControlFunction]][]).flatMap(([fn, { aliases, args }]) => {
    const list: readonly Argument[] = args;
    const required = list.filter((a) => a.optional !== true);
    const usage = [required.map((a) => `'${a.name}'`).join(', '), ...list.filter((a) => a.optional === true).map((a) => `[, ${a.name}]`)].join(' ');
    const signature: ControlSignature = { fn, min: required.length, max: list.length, usage };
    return [`pgx_${fn}`, ...aliases].map((name) => [name, signature] as const);
  }),
);
