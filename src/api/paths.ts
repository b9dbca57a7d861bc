// Every path the HTTP API serves, in one place: the server routes on these, clients build URLs from them.
// `{name}` is one path segment (percent-decoded).

export const PATHS = {
  healthz: '/healthz',
  readyz: '/readyz',
  metrics: '/metrics',
  status: '/v1/status',
  templates: '/v1/templates',
  templateImport: '/v1/templates/import',
  template: '/v1/templates/{name}',
  importJob: '/v1/imports/{id}',
  templateSeal: '/v1/templates/{name}/seal',
  templateUnseal: '/v1/templates/{name}/unseal',
  templateRename: '/v1/templates/{name}/rename',
  templateKeep: '/v1/templates/{name}/keep',
  databases: '/v1/databases',
  database: '/v1/databases/{name}',
  databasePin: '/v1/databases/{name}/pin',
  databaseUnpin: '/v1/databases/{name}/unpin',
  databaseTtl: '/v1/databases/{name}/ttl',
  databaseSnapshots: '/v1/databases/{name}/snapshots',
  databaseRestore: '/v1/databases/{name}/restore',
  databaseConnectionLimit: '/v1/databases/{name}/connection-limit',
  databaseMemoryLimit: '/v1/databases/{name}/memory-limit',
  databaseCredentials: '/v1/databases/{name}/credentials',
  databaseCredential: '/v1/databases/{name}/credentials/{user}',
} as const;

export type PathPattern = (typeof PATHS)[keyof typeof PATHS];

/** A concrete path for a pattern: pathFor(PATHS.database, { name: 'tdb_x__y' }). */
export function pathFor(pattern: PathPattern, params: Record<string, string> = {}): string {
  return pattern.replace(/\{(\w+)\}/g, (_, key: string) => {
    const value = params[key];
    if (value === undefined) throw new Error(`pathFor(${pattern}): no value for {${key}}`);
    return encodeURIComponent(value);
  });
}

/** The params of `path` if it matches `pattern`, else null. */
export function matchPath(pattern: PathPattern, path: string): Record<string, string> | null {
  const want = pattern.split('/');
  const got = path.split('/');
  if (want.length !== got.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < want.length; i++) {
    const w = want[i]!;
    const g = got[i]!;
    const param = /^\{(\w+)\}$/.exec(w);
    if (param) {
      if (g.length === 0) return null;
      try {
        params[param[1]!] = decodeURIComponent(g);
      } catch {
        return null;
      }
    } else if (w !== g) return null;
  }
  return params;
}

/**
 * GET /v1/databases?limit=N&after=NAME: a page of at most `limit` databases (default, most) whose
 * names sort after `after`, in binary order. A client that reads only `items` gets the first page.
 * Here rather than in contract.ts so that the CLI's client loads no zod (a third of `pgx status`).
 */
export const DATABASE_PAGE = { defaultLimit: 100, maxLimit: 1000 } as const;
