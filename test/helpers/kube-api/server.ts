// The HTTP side of the double: the Kubernetes REST paths and verbs over HTTPS with bearer-token auth,
// discovery, and watch streams of newline-delimited JSON events, so @kubernetes/client-node (list,
// watch, informers, typed and custom-object APIs) talks to it exactly as to a real API server.
//
// Paths: /api/v1/..., /apis/{group}/{version}/..., then [namespaces/{ns}/]{plural}[/{name}[/status]].
// Verbs: GET (get, list, or watch with ?watch=true), POST (create), PUT (update), PATCH (merge or JSON
// patch), DELETE (delete, or deletecollection on a collection).
// Every request is authenticated by its bearer token and authorized by RBAC (rbac.ts) before it is
// served: the admin token (system:masters) may do anything; a service account's token what the Roles
// and ClusterRoles bound to it allow, else 403 Forbidden as from a real API server.

import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { isObject, type Json, type JsonObject } from './patch.js';
import { authorize, forbiddenMessage, type RequestAttributes, type UserInfo } from './rbac.js';
import { apiVersionOf, qualifiedName, type ResourceType } from './resources.js';
import { StatusError, type ObjectStore, type PatchType, type Selection } from './store.js';

/** One request as the server saw it: tests count writes with this. */
export interface RequestRecord {
  method: string;
  /** Who asked: the user its token names ('' when it named nobody). */
  user: string;
  /** The resource's API group ('' for the core group and for discovery). */
  apiGroup: string;
  /** get, list, watch, create, update, patch, delete, deletecollection, or discovery. */
  verb: string;
  /** plural, with /status for the subresource; '' for discovery. */
  resource: string;
  namespace: string | null;
  name: string | null;
  code: number;
  /** Milliseconds from the request's arrival to its response (a watch: to its headers). */
  ms: number;
  /** Which TLS connection carried it: 1 for the first the server accepted, and so on. */
  connection: number;
}

export interface ServerOptions {
  store: ObjectStore;
  /** The admin's token (system:masters). */
  token: string;
  certPem: string;
  keyPem: string;
}

const WRITE_VERBS = new Set(['create', 'update', 'patch', 'delete', 'deletecollection']);

export function isWrite(r: RequestRecord): boolean {
  return WRITE_VERBS.has(r.verb);
}

interface Route {
  type: ResourceType;
  namespace: string | null;
  name: string | null;
  subresource: 'status' | null;
}

const PATCH_TYPES: Record<string, PatchType> = {
  'application/merge-patch+json': 'merge',
  'application/json-patch+json': 'json',
  'application/strategic-merge-patch+json': 'strategic',
};

export class KubeApiServer {
  readonly requests: RequestRecord[] = [];
  private readonly server: https.Server;
  /** Open watch streams, each with what stops it. */
  private readonly watches = new Map<ServerResponse, () => void>();
  private readonly sockets = new Set<Socket>();
  /** Each accepted connection's number (RequestRecord.connection). */
  private readonly connectionIds = new WeakMap<Socket, number>();
  /** TLS connections accepted so far (a client that reuses connections opens few). */
  connections = 0;
  /** Bearer tokens and whom they name. */
  private readonly tokens = new Map<string, UserInfo>();

  constructor(private readonly opts: ServerOptions) {
    this.tokens.set(opts.token, { name: 'pgx-test-admin', groups: ['system:masters', 'system:authenticated'] });
    this.server = https.createServer({ cert: opts.certPem, key: opts.keyPem }, (req, res) => void this.handle(req, res));
    this.server.on('secureConnection', (s: Socket) => {
      this.connections++;
      this.connectionIds.set(s, this.connections);
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
  }

  /** Makes `token` name `user` (a token request, or a static token file's line). */
  addToken(token: string, user: UserInfo): void {
    this.tokens.set(token, user);
  }

  /** The user a bearer token names: 401 for an unknown token, or a service account that no longer exists. */
  private authenticate(header: string | undefined): UserInfo {
    const user = header?.startsWith('Bearer ') ? this.tokens.get(header.slice(7)) : undefined;
    if (user === undefined) throw new StatusError(401, 'Unauthorized', 'Unauthorized');
    if (user.serviceAccount) {
      const sa = user.serviceAccount;
      try {
        this.opts.store.get(this.opts.store.typeFor('', 'v1', 'serviceaccounts')!, sa.namespace, sa.name);
      } catch {
        throw new StatusError(401, 'Unauthorized', 'Unauthorized');
      }
    }
    return user;
  }

  listen(): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(0, '127.0.0.1', () => {
        const address = this.server.address();
        resolve(typeof address === 'object' && address !== null ? address.port : 0);
      });
    });
  }

  /** Ends every watch stream (clients see the stream close, as when an API server restarts). */
  endWatches(): void {
    for (const [res, stop] of [...this.watches]) {
      stop();
      res.end();
    }
  }

  async close(): Promise<void> {
    this.endWatches();
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const s of this.sockets) s.destroy();
    await closed;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'https://localhost');
    const record: RequestRecord = { method: req.method ?? 'GET', user: '', apiGroup: '', verb: 'discovery', resource: '', namespace: null, name: null, code: 200, ms: performance.now(), connection: this.connectionIds.get(req.socket) ?? 0 };
    try {
      const user = this.authenticate(req.headers.authorization);
      record.user = user.name;
      // Discovery and OpenAPI: every authenticated user may read them (system:discovery, system:basic-user).
      const discovery = this.discovery(url.pathname);
      if (discovery !== null) {
        if (record.method !== 'GET') throw new StatusError(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource');
        return this.send(res, 200, discovery, record);
      }
      const route = this.route(url.pathname);
      record.resource = route.type.plural + (route.subresource ? `/${route.subresource}` : '');
      record.apiGroup = route.type.group;
      record.namespace = route.namespace;
      record.name = route.name;
      const verb = verbOf(record.method, route.name, url.searchParams);
      if (verb !== null) {
        record.verb = verb;
        const attrs: RequestAttributes = {
          verb,
          apiGroup: route.type.group,
          resource: route.type.plural,
          subresource: route.subresource ?? '',
          namespace: route.namespace ?? '',
          name: route.name ?? '',
        };
        if (!authorize(this.opts.store, user, attrs)) {
          throw new StatusError(403, 'Forbidden', forbiddenMessage(user, attrs, qualifiedName(route.type)), { ...(attrs.name ? { name: attrs.name } : {}), group: attrs.apiGroup, kind: attrs.resource });
        }
      }
      const body = await readBody(req);
      await this.serve(req, res, url, route, body, record);
    } catch (err) {
      const status = err instanceof StatusError ? err : new StatusError(500, 'InternalError', `internal error in the test double: ${(err as Error).stack ?? String(err)}`);
      if (!res.headersSent) this.send(res, status.code, status.toStatus(), record);
      else res.end();
    }
  }

  private async serve(req: IncomingMessage, res: ServerResponse, url: URL, route: Route, raw: string, record: RequestRecord): Promise<void> {
    const { store } = this.opts;
    const { type: t, namespace, name, subresource } = route;
    const q = url.searchParams;
    if (q.has('dryRun')) throw new StatusError(400, 'BadRequest', 'dryRun is not supported by the Kubernetes API test double');
    const sel: Selection = { namespace, labelSelector: q.get('labelSelector') ?? undefined, fieldSelector: q.get('fieldSelector') ?? undefined };
    const writeOpts = { subresource, fieldValidation: q.get('fieldValidation') };
    const method = req.method ?? 'GET';
    const body = (): Json => parseJson(raw);
    if (name === null) {
      if (subresource !== null) throw new StatusError(404, 'NotFound', 'the server could not find the requested resource');
      switch (method) {
        case 'GET': {
          if (q.get('watch') === 'true' || q.get('watch') === '1') {
            record.verb = 'watch';
            return this.watch(req, res, t, sel, q, record);
          }
          record.verb = 'list';
          const list = store.list(t, sel);
          const items = t.custom ? list.items : list.items.map(({ apiVersion: _a, kind: _k, ...rest }) => rest);
          return this.send(res, 200, { apiVersion: apiVersionOf(t), kind: `${t.kind}List`, metadata: { resourceVersion: list.resourceVersion }, items }, record);
        }
        case 'POST': {
          record.verb = 'create';
          if (namespace === null && t.namespaced) throw new StatusError(405, 'MethodNotAllowed', 'create needs a namespace in the path for a namespaced resource');
          const r = store.create(t, namespace ?? '', body(), writeOpts);
          record.name = String((r.object.metadata as JsonObject).name);
          return this.send(res, 201, r.object, record, r.warnings);
        }
        case 'DELETE': {
          record.verb = 'deletecollection';
          for (const o of store.list(t, sel).items) {
            const m = o.metadata as JsonObject;
            store.delete(t, String(m.namespace ?? ''), String(m.name));
          }
          return this.send(res, 200, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success' }, record);
        }
        default:
          throw new StatusError(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource');
      }
    }
    const ns = namespace ?? '';
    switch (method) {
      case 'GET':
        record.verb = 'get';
        return this.send(res, 200, store.get(t, ns, name), record);
      case 'PUT': {
        record.verb = 'update';
        const r = store.update(t, ns, name, body(), writeOpts);
        return this.send(res, 200, r.object, record, r.warnings);
      }
      case 'PATCH': {
        record.verb = 'patch';
        const contentType = (req.headers['content-type'] ?? '').split(';')[0]!.trim();
        const type = PATCH_TYPES[contentType];
        if (type === undefined) {
          // Server-side apply (application/apply-patch+yaml) is not implemented by the double.
          throw new StatusError(415, 'UnsupportedMediaType', `the body of the request was in an unknown format - accepted media types include: ${Object.keys(PATCH_TYPES).join(', ')}`);
        }
        const r = store.patch(t, ns, name, type, body(), writeOpts);
        return this.send(res, 200, r.object, record, r.warnings);
      }
      case 'DELETE': {
        record.verb = 'delete';
        if (subresource !== null) throw new StatusError(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource');
        const options = raw.trim() === '' ? {} : parseJson(raw);
        const opts = isObject(options) ? options : {};
        const propagationPolicy = q.get('propagationPolicy') ?? (typeof opts.propagationPolicy === 'string' ? opts.propagationPolicy : null);
        const r = store.delete(t, ns, name, { propagationPolicy, preconditions: isObject(opts.preconditions) ? opts.preconditions : null });
        return this.send(res, r.code, r.object, record);
      }
      default:
        throw new StatusError(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource');
    }
  }

  /** A watch: chunked newline-delimited JSON events until timeoutSeconds, the client leaves, or close(). */
  private watch(req: IncomingMessage, res: ServerResponse, t: ResourceType, sel: Selection, q: URLSearchParams, record: RequestRecord): void {
    const write = (type: string, object: JsonObject): void => {
      if (!res.writableEnded && !res.destroyed) res.write(JSON.stringify({ type, object }) + '\n');
    };
    const start = this.opts.store.watch(t, sel, q.get('resourceVersion') ?? undefined, (e) => write(e.type, e.object));
    record.code = 'gone' in start ? 410 : 200; // the HTTP status is 200 either way; the record says what happened
    record.ms = performance.now() - record.ms;
    this.requests.push(record);
    res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-cache, private' });
    res.flushHeaders();
    if ('gone' in start) {
      // A real API server answers a too-old resourceVersion with 200 and one ERROR event carrying 410.
      write('ERROR', start.gone.toStatus());
      res.end();
      return;
    }
    const timeout = Number(q.get('timeoutSeconds') ?? '0');
    const stop = (): void => {
      start.stop();
      if (timer) clearTimeout(timer);
      this.watches.delete(res);
    };
    const timer = timeout > 0 ? setTimeout(() => (stop(), res.end()), timeout * 1000) : null;
    this.watches.set(res, stop);
    res.on('close', stop);
    req.on('close', stop);
  }

  private send(res: ServerResponse, code: number, body: JsonObject, record: RequestRecord, warnings: string[] = []): void {
    record.code = code;
    record.ms = performance.now() - record.ms;
    this.requests.push(record);
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    // Warnings go in Warning headers (RFC 7234 code 299), as the API server sends them.
    if (warnings.length > 0) headers.warning = warnings.map((w) => `299 - ${JSON.stringify(w)}`).join(', ');
    res.writeHead(code, headers);
    res.end(JSON.stringify(body));
  }

  private route(pathname: string): Route {
    const segs = pathname.split('/').filter((s) => s !== '').map(decodeURIComponent);
    let group: string;
    let version: string;
    let rest: string[];
    if (segs[0] === 'api' && segs.length >= 3) {
      [group, version, rest] = ['', segs[1]!, segs.slice(2)];
    } else if (segs[0] === 'apis' && segs.length >= 4) {
      [group, version, rest] = [segs[1]!, segs[2]!, segs.slice(3)];
    } else {
      throw new StatusError(404, 'NotFound', 'the server could not find the requested resource');
    }
    let namespace: string | null = null;
    if (rest[0] === 'namespaces' && rest.length >= 3) {
      namespace = rest[1]!;
      rest = rest.slice(2);
    }
    const [plural, name, sub, ...extra] = rest;
    const type = this.opts.store.typeFor(group, version, plural!);
    if (!type || extra.length > 0 || (sub !== undefined && sub !== 'status') || (!type.namespaced && namespace !== null)) {
      throw new StatusError(404, 'NotFound', 'the server could not find the requested resource');
    }
    if (sub === 'status' && !type.statusSubresource) throw new StatusError(404, 'NotFound', 'the server could not find the requested resource');
    return { type, namespace, name: name ?? null, subresource: sub === 'status' ? 'status' : null };
  }

  /** /version, /api, /api/v1, /apis, /apis/{group} and /apis/{group}/{version}; null for other paths. */
  private discovery(pathname: string): JsonObject | null {
    const path = pathname.replace(/\/+$/, '') || '/';
    const types = this.opts.store.allTypes();
    const groups = new Map<string, Set<string>>();
    for (const t of types) if (t.group !== '') (groups.get(t.group) ?? groups.set(t.group, new Set()).get(t.group)!).add(t.version);
    const groupBody = (name: string): JsonObject => {
      const versions = [...groups.get(name)!].sort().map((v) => ({ groupVersion: `${name}/${v}`, version: v }));
      return { name, versions, preferredVersion: versions[versions.length - 1]! };
    };
    const resources = (group: string, version: string): JsonObject => ({
      kind: 'APIResourceList',
      apiVersion: 'v1',
      groupVersion: group === '' ? version : `${group}/${version}`,
      resources: types
        .filter((t) => t.group === group && t.version === version)
        .flatMap((t) => [
          { name: t.plural, singularName: t.singular, namespaced: t.namespaced, kind: t.kind, verbs: ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'], shortNames: t.shortNames, ...(t.categories.length ? { categories: t.categories } : {}) },
          ...(t.statusSubresource ? [{ name: `${t.plural}/status`, singularName: '', namespaced: t.namespaced, kind: t.kind, verbs: ['get', 'patch', 'update'] }] : []),
        ]),
    });
    const openapi = this.openapi(path, types);
    if (openapi !== null) return openapi;
    if (path === '/version') return { major: '1', minor: '34', gitVersion: 'v1.34.0-pgx-test-double', platform: 'linux/amd64' };
    if (path === '/api') return { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [] };
    if (path === '/api/v1') return resources('', 'v1');
    if (path === '/apis') return { kind: 'APIGroupList', apiVersion: 'v1', groups: [...groups.keys()].sort().map(groupBody) };
    const m = /^\/apis\/([^/]+)(?:\/([^/]+))?$/.exec(path);
    if (m && groups.has(m[1]!)) {
      if (m[2] === undefined) return { kind: 'APIGroup', apiVersion: 'v1', ...groupBody(m[1]!) };
      if (groups.get(m[1]!)!.has(m[2])) return resources(m[1]!, m[2]);
    }
    return null;
  }

  /**
   * OpenAPI v3 discovery, enough for kubectl: the root lists a document per group/version; each
   * document has the resources' paths, with the query parameters the server takes (kubectl looks for
   * fieldValidation on a kind's PATCH to decide that the server validates, and then sends
   * fieldValidation=Strict instead of validating itself), and, for CRD kinds, their schemas.
   */
  private openapi(path: string, types: ResourceType[]): JsonObject | null {
    const gvOf = (t: ResourceType): string => (t.group === '' ? `api/${t.version}` : `apis/${t.group}/${t.version}`);
    if (path === '/openapi/v3') {
      const paths: JsonObject = {};
      for (const gv of new Set(types.map(gvOf))) paths[gv] = { serverRelativeURL: `/openapi/v3/${gv}?hash=${this.opts.store.resourceVersion()}` };
      return { paths };
    }
    const gv = /^\/openapi\/v3\/(.+)$/.exec(path)?.[1];
    const inGv = gv === undefined ? [] : types.filter((t) => gvOf(t) === gv);
    if (inGv.length === 0) return null;
    const paths: JsonObject = {};
    const schemas: JsonObject = {};
    for (const t of inGv) {
      const gvk = { group: t.group, version: t.version, kind: t.kind };
      const param = (name: string): JsonObject => ({ name, in: 'query', schema: { type: 'string', uniqueItems: true } });
      const op = (action: string, params: string[]): JsonObject => ({ 'x-kubernetes-action': action, 'x-kubernetes-group-version-kind': gvk, parameters: params.map(param) });
      const base = `/${gv}${t.namespaced ? '/namespaces/{namespace}' : ''}/${t.plural}`;
      paths[base] = { get: op('list', ['labelSelector', 'fieldSelector', 'watch', 'resourceVersion']), post: op('post', ['fieldValidation', 'fieldManager']) };
      paths[`${base}/{name}`] = {
        get: op('get', []),
        put: op('put', ['fieldValidation', 'fieldManager']),
        patch: op('patch', ['fieldValidation', 'fieldManager', 'force']),
        delete: op('delete', ['propagationPolicy']),
      };
      if (t.schema) schemas[`${t.group.split('.').reverse().join('.')}.${t.version}.${t.kind}`] = { ...t.schema, 'x-kubernetes-group-version-kind': [gvk] };
    }
    return { openapi: '3.0.0', info: { title: 'Kubernetes', version: 'v1.34.0-pgx-test-double' }, paths, components: { schemas } };
  }
}

/** The RBAC verb of a request; null for a method the server does not serve (answered 405). */
function verbOf(method: string, name: string | null, q: URLSearchParams): string | null {
  switch (method) {
    case 'GET':
      if (name !== null) return 'get';
      return q.get('watch') === 'true' || q.get('watch') === '1' ? 'watch' : 'list';
    case 'POST':
      return name === null ? 'create' : null;
    case 'PUT':
      return name === null ? null : 'update';
    case 'PATCH':
      return name === null ? null : 'patch';
    case 'DELETE':
      return name === null ? 'deletecollection' : 'delete';
    default:
      return null;
  }
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function parseJson(raw: string): Json {
  try {
    return JSON.parse(raw) as Json;
  } catch {
    throw new StatusError(400, 'BadRequest', `the request body is not JSON: ${raw.slice(0, 100)}`);
  }
}
