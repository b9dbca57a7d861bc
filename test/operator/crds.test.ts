// The CRDs in crds/ are generated from the zod schemas in src/operator/crds/: this proves the checked-in
// files are current, that their schemas are structural (what Kubernetes requires of apiextensions/v1
// CRDs), and that the zod schemas refuse bad specs with messages a person can act on.

import { expect } from 'chai';
import fc from 'fast-check';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import { branch, KINDS, memoryLimitMb, parseDuration, parseObject, parseQuantity, renderCrdFiles, runtime, template, templateDatabaseName } from '../../src/operator/crds/index.js';
import { CONFIG_DEFAULTS } from '../../src/cli/config.js';
import { isObject, type Json, type JsonObject } from '../helpers/kube-api/patch.js';
import { applyDefaults, prune, validate } from '../helpers/kube-api/schema.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const crdDir = path.join(root, 'crds');

/** Every schema node with its path. */
function nodes(schema: JsonObject, at = ''): [string, JsonObject][] {
  const out: [string, JsonObject][] = [[at || '<root>', schema]];
  if (isObject(schema.properties)) for (const [k, v] of Object.entries(schema.properties)) if (isObject(v)) out.push(...nodes(v, `${at}.${k}`));
  if (isObject(schema.items)) out.push(...nodes(schema.items, `${at}[]`));
  if (isObject(schema.additionalProperties)) out.push(...nodes(schema.additionalProperties, `${at}.*`));
  return out;
}

/** The structural-schema rules of apiextensions.k8s.io/v1 that a generator could get wrong. */
function structuralProblems(schema: JsonObject): string[] {
  const problems: string[] = [];
  const INT_OR_STRING = JSON.stringify([{ type: 'integer' }, { type: 'string' }]);
  for (const [at, n] of nodes(schema)) {
    const intOrString = n['x-kubernetes-int-or-string'] === true;
    if (typeof n.type !== 'string' && !intOrString && n['x-kubernetes-preserve-unknown-fields'] !== true) problems.push(`${at}: no type`);
    if ('$ref' in n) problems.push(`${at}: $ref`);
    if (n.additionalProperties === false) problems.push(`${at}: additionalProperties false`);
    if (n.properties !== undefined && n.additionalProperties !== undefined) problems.push(`${at}: properties and additionalProperties`);
    if (n.nullable !== undefined) problems.push(`${at}: nullable (we never need it)`);
    for (const kw of ['anyOf', 'oneOf', 'allOf', 'not']) {
      const v = n[kw];
      if (v === undefined) continue;
      if (kw === 'anyOf' && intOrString && JSON.stringify(v) === INT_OR_STRING) continue;
      const branches = Array.isArray(v) ? v : [v];
      for (const b of branches) {
        if (!isObject(b)) problems.push(`${at}.${kw}: not a schema`);
        else for (const k of ['type', 'description', 'default', 'additionalProperties', 'nullable', 'properties', 'items']) if (k in b) problems.push(`${at}.${kw}: ${k} inside a value validation`);
      }
    }
    if (n.default !== undefined) {
      const causes = validate(structuredClone(n.default), n, at, undefined);
      if (causes.length > 0) problems.push(`${at}: default does not validate: ${causes.map((c) => c.message).join('; ')}`);
    }
  }
  const metadata = isObject(schema.properties) ? schema.properties.metadata : undefined;
  if (!isObject(metadata) || Object.keys(metadata).some((k) => k !== 'type')) problems.push('metadata: must be just {type: object}');
  return problems;
}

/** Whether a printer column's JSONPath names a field the schema has (filters step into list items). */
function pathExists(schema: JsonObject, jsonPath: string): boolean {
  let node: Json | undefined = schema;
  for (const [, field, filter] of jsonPath.matchAll(/\.([A-Za-z]+)(\[[^\]]*\])?/g)) {
    if (field === 'metadata' && node === schema) return true;
    if (!isObject(node) || !isObject(node.properties)) return false;
    node = node.properties[field!];
    if (filter !== undefined) node = isObject(node) ? node.items : undefined;
  }
  return node !== undefined;
}

function crdFromDisk(file: string): JsonObject {
  return parseYaml(fs.readFileSync(path.join(crdDir, file), 'utf8')) as JsonObject;
}

describe('CRDs', () => {
  it('crds/ holds exactly what `npm run crds` writes (run it after changing src/operator/crds/)', () => {
    const generated = renderCrdFiles();
    const onDisk = fs.readdirSync(crdDir).filter((f) => f.endsWith('.yaml')).sort();
    expect(onDisk).to.deep.equal(generated.map((g) => g.file).sort());
    for (const g of generated) expect(fs.readFileSync(path.join(crdDir, g.file), 'utf8'), `${g.file} is stale: run npm run crds`).to.equal(g.text);
  });

  for (const k of KINDS) {
    describe(`${k.plural}.pgx.dev`, () => {
      const crd = crdFromDisk(`${k.plural}.pgx.dev.yaml`);
      const spec = crd.spec as JsonObject;
      const version = (spec.versions as JsonObject[])[0]!;
      const schema = (version.schema as JsonObject).openAPIV3Schema as JsonObject;

      it('is an apiextensions.k8s.io/v1 CRD for pgx.dev/v1alpha1 with names, short names and the pgx category', () => {
        expect(crd.apiVersion).to.equal('apiextensions.k8s.io/v1');
        expect((crd.metadata as JsonObject).name).to.equal(`${k.plural}.pgx.dev`);
        expect(spec.group).to.equal('pgx.dev');
        expect(spec.scope).to.equal('Namespaced');
        expect(spec.names).to.deep.include({ kind: k.kind, plural: k.plural, listKind: `${k.kind}List`, categories: ['pgx'] });
        expect((spec.names as JsonObject).shortNames).to.deep.equal(k.shortNames);
        expect(version).to.deep.include({ name: 'v1alpha1', served: true, storage: true });
        expect(version.subresources).to.deep.equal({ status: {} });
      });

      it('has a structural schema', () => {
        expect(structuralProblems(schema)).to.deep.equal([]);
      });

      it('prints columns that exist in the schema, Age last', () => {
        const columns = version.additionalPrinterColumns as JsonObject[];
        for (const c of columns) expect(pathExists(schema, String(c.jsonPath)), String(c.jsonPath)).to.equal(true);
        expect(columns[columns.length - 1]).to.deep.equal({ name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' });
      });

      it('keeps the name rules as CEL rules at the root', () => {
        const rules = (schema['x-kubernetes-validations'] as JsonObject[]).map((r) => r.rule);
        expect(rules).to.include(`self.metadata.name.size() <= ${k.maxNameLength}`);
      });
    });
  }

  it('Branch columns are Phase, Template, Database, Expires (and Pod, Secret with -o wide), Age', () => {
    const version = ((crdFromDisk('branches.pgx.dev.yaml').spec as JsonObject).versions as JsonObject[])[0]!;
    const columns = (version.additionalPrinterColumns as JsonObject[]).filter((c) => c.priority === undefined).map((c) => c.name);
    expect(columns).to.deep.equal(['Phase', 'Template', 'Database', 'Expires', 'Age']);
  });

  it('keeps defaults, enums, patterns and int-or-string quantities in the schema', () => {
    const schema = (((crdFromDisk('runtimes.pgx.dev.yaml').spec as JsonObject).versions as JsonObject[])[0]!.schema as JsonObject).openAPIV3Schema as JsonObject;
    const spec = (schema.properties as JsonObject).spec as JsonObject;
    const props = spec.properties as JsonObject;
    expect(props.replicas).to.deep.include({ type: 'integer', minimum: 1, default: 1 });
    expect(((props.storage as JsonObject).properties as JsonObject).size).to.deep.include({ 'x-kubernetes-int-or-string': true, default: '10Gi' });
    expect(props.engine).to.deep.include({ default: {} });
    expect(((props.engine as JsonObject).properties as JsonObject).grace).to.deep.include({ default: '15s', pattern: '^([0-9]+[smhd])+$' });
    expect(((props.engine as JsonObject).properties as JsonObject).poolMax).to.deep.include({ type: 'integer', minimum: 0, default: 500 });
    expect(((props.engine as JsonObject).properties as JsonObject).poolIdle).to.deep.include({ type: 'string', default: '10m' });
    expect(props.imagePullPolicy).to.deep.include({ enum: ['Always', 'IfNotPresent', 'Never'] });
  });
});

describe('pgx.dev/v1alpha1 schemas', () => {
  const meta = { name: 'pr-42', namespace: 'previews' };
  const goodBranch = { apiVersion: 'pgx.dev/v1alpha1', kind: 'Branch', metadata: meta, spec: { templateRef: { name: 'app' }, ttl: '2h' } };

  it('accept a good Branch and fill in defaults', () => {
    const r = parseObject(branch, goodBranch);
    expect(r).to.deep.equal({ ok: true, value: { ...goodBranch, spec: { templateRef: { name: 'app' }, ttl: '2h', expiryPolicy: 'Delete', pinned: true } } });
  });

  it('fill in a Runtime\'s nested defaults from an almost empty spec', () => {
    const r = parseObject(runtime, { apiVersion: 'pgx.dev/v1alpha1', kind: 'Runtime', metadata: { name: 'main' }, spec: { image: 'pgx:dev' } });
    expect(r.ok).to.equal(true);
    if (r.ok) expect(r.value.spec).to.deep.equal({ replicas: 1, image: 'pgx:dev', storage: { size: '10Gi' }, allowedNamespaces: { from: 'Same' }, privilegedTemplates: false, sharedMemory: '256Mi', startupTimeout: '10m', engine: { prefix: 'tdb_', grace: '15s', poolSize: 'auto', poolMax: 500, poolIdle: '10m' } });
  });

  it("default a Runtime's engine to pgx start's own defaults (CONFIG_DEFAULTS), so a Runtime that sets nothing runs as pgx start does", () => {
    const r = parseObject(runtime, { apiVersion: 'pgx.dev/v1alpha1', kind: 'Runtime', metadata: { name: 'main' }, spec: { image: 'pgx:dev' } });
    if (!r.ok) throw new Error(r.message);
    const e = r.value.spec.engine;
    expect(e.prefix).to.equal(CONFIG_DEFAULTS.prefix);
    expect(parseDuration(e.grace)! / 1000).to.equal(CONFIG_DEFAULTS.grace);
    expect(e.poolSize).to.equal(CONFIG_DEFAULTS.poolSize);
    expect(e.poolMax).to.equal(CONFIG_DEFAULTS.poolMax);
    expect(parseDuration(e.poolIdle)! / 1000).to.equal(CONFIG_DEFAULTS.poolIdle);
  });

  it('refuse unknown fields, naming them', () => {
    const r = parseObject(branch, { ...goodBranch, spec: { ...goodBranch.spec, tll: '2h' } });
    expect(r).to.deep.equal({ ok: false, message: 'unknown field "spec.tll"' });
  });

  it('refuse a negative ttl, saying what a duration looks like', () => {
    const message = 'spec.ttl: ttl must be a positive duration such as 30s, 15m, 2h, 7d or 1h30m, each number at most 5 digits';
    const r = parseObject(branch, { ...goodBranch, spec: { ...goodBranch.spec, ttl: '-1h' } });
    expect(r).to.deep.equal({ ok: false, message });
    expect(parseObject(branch, { ...goodBranch, spec: { ...goodBranch.spec, ttl: '0s' } })).to.deep.equal({ ok: false, message });
  });

  it('refuse an unbounded ttl (300000000d made "Invalid time value" and a Branch stuck in Creating)', () => {
    const message = 'spec.ttl: ttl must be a positive duration such as 30s, 15m, 2h, 7d or 1h30m, each number at most 5 digits';
    expect(parseObject(branch, { ...goodBranch, spec: { ...goodBranch.spec, ttl: '300000000d' } })).to.deep.equal({ ok: false, message });
    expect(parseObject(branch, { ...goodBranch, spec: { ...goodBranch.spec, ttl: '1d'.repeat(13) } })).to.deep.equal({ ok: false, message: 'spec.ttl: ttl must be at most 24 characters' });
    // The largest a ttl can be still makes a valid date.
    const r = parseObject(branch, { ...goodBranch, spec: { ...goodBranch.spec, ttl: '99999d99999d99999d99999d' } });
    expect(r.ok).to.equal(true);
    expect(Number.isFinite(new Date(Date.now() + parseDuration('99999d99999d99999d99999d')!).getTime())).to.equal(true);
    // And the CRD says the same, so the API server refuses it at apply time.
    const schema = (((crdFromDisk('branches.pgx.dev.yaml').spec as JsonObject).versions as JsonObject[])[0]!.schema as JsonObject).openAPIV3Schema as JsonObject;
    const ttl = (((schema.properties as JsonObject).spec as JsonObject).properties as JsonObject).ttl as JsonObject;
    expect(ttl).to.deep.include({ maxLength: 24 });
    expect(new RegExp(String(ttl.pattern)).test('300000000d')).to.equal(false);
    expect(new RegExp(String(ttl.pattern)).test('1h30m')).to.equal(true);
  });

  it('refuse a name over 63 bytes, and a Template name that would not fit a database name', () => {
    const long = 'b'.repeat(64);
    expect(parseObject(branch, { ...goodBranch, metadata: { name: long } })).to.deep.equal({ ok: false, message: 'metadata.name: Branch name must be at most 63 characters' });
    const tpl = { apiVersion: 'pgx.dev/v1alpha1', kind: 'Template', metadata: { name: 't'.repeat(41) }, spec: { runtimeRef: { name: 'main' }, source: { sql: 'select 1' } } };
    expect(parseObject(template, tpl)).to.deep.equal({ ok: false, message: 'metadata.name: Template name must be at most 40 characters' });
    expect(parseObject(branch, { ...goodBranch, spec: { templateRef: { name: 'Not_A_Label' } } })).to.deep.equal({
      ok: false,
      message: "spec.templateRef.name: Template name must be lower-case letters, digits and '-', starting and ending with a letter or digit (a DNS-1123 label)",
    });
  });

  it('refuse a Runtime name that cannot name a Service', () => {
    const r = parseObject(runtime, { apiVersion: 'pgx.dev/v1alpha1', kind: 'Runtime', metadata: { name: '1st' }, spec: { image: 'pgx:dev' } });
    expect(r).to.deep.equal({ ok: false, message: "metadata.name: Runtime name must be lower-case letters, digits and '-', starting with a letter and ending with a letter or digit (a DNS-1035 label)" });
  });

  it('refuse memory that is not a quantity', () => {
    const r = parseObject(branch, { ...goodBranch, spec: { ...goodBranch.spec, limits: { memory: 'lots' } } });
    expect(r).to.deep.equal({ ok: false, message: 'spec.limits.memory: limits.memory must be a Kubernetes quantity such as 512Mi, 2Gi or 1.5G' });
    expect(parseObject(branch, { ...goodBranch, spec: { ...goodBranch.spec, limits: { memory: '256Mi', connections: 0 } } })).to.deep.equal({
      ok: false,
      message: 'spec.limits.connections: limits.connections must be at least 1',
    });
  });

  it('refuse replicas below 1 and a Template with two sources', () => {
    const rt = parseObject(runtime, { apiVersion: 'pgx.dev/v1alpha1', kind: 'Runtime', metadata: { name: 'main' }, spec: { image: 'pgx:dev', replicas: 0 } });
    expect(rt).to.deep.equal({ ok: false, message: 'spec.replicas: replicas must be at least 1' });
    const tpl = parseObject(template, { apiVersion: 'pgx.dev/v1alpha1', kind: 'Template', metadata: { name: 'app' }, spec: { runtimeRef: { name: 'main' }, source: { sql: 'select 1', configMapRef: { name: 'schema' } } } });
    expect(tpl).to.deep.equal({ ok: false, message: 'spec.source: source must set exactly one of sql, configMapRef or database (2 set)' });
  });

  it('parse durations and quantities as the controllers need them', () => {
    expect(parseDuration('30s')).to.equal(30_000);
    expect(parseDuration('1h30m')).to.equal(5_400_000);
    expect(parseDuration('7d')).to.equal(604_800_000);
    expect(parseDuration('-1h')).to.equal(null);
    expect(parseQuantity('512Mi')).to.equal(512 * 2 ** 20);
    expect(parseQuantity('1.5G')).to.equal(1.5e9);
    expect(parseQuantity('500m')).to.equal(0.5);
    expect(parseQuantity(2)).to.equal(2);
    expect(parseQuantity('lots')).to.equal(null);
    expect(templateDatabaseName('my-app')).to.equal('my_app');
  });

  it('turn a memory quantity into the whole MB (MiB) the runtime takes, rounding up, and refuse one under 1Mi', () => {
    const mb = (q: string | number) => memoryLimitMb('limits.memory', q);
    expect(mb('64Mi')).to.deep.equal({ ok: true, mb: 64 });
    expect(mb('1Gi')).to.deep.equal({ ok: true, mb: 1024 });
    expect(mb('100M')).to.deep.equal({ ok: true, mb: 96 }); // 95.37 MiB
    expect(mb('1.5Mi')).to.deep.equal({ ok: true, mb: 2 });
    expect(mb('1Mi')).to.deep.equal({ ok: true, mb: 1 });
    expect(mb(64 * 2 ** 20)).to.deep.equal({ ok: true, mb: 64 });
    expect(mb('1048577')).to.deep.equal({ ok: true, mb: 2 });
    for (const small of ['0', 0, '512Ki', '500m', '1048575']) {
      const r = mb(small);
      expect(r.ok, String(small)).to.equal(false);
      expect(r.ok ? '' : r.message).to.contain(`limits.memory "${small}" is under 1Mi`);
    }
    expect(mb('1e30').ok).to.equal(false);
    expect(mb('lots').ok).to.equal(false);
  });
});

/** Absent keys, not undefined ones: what the object looks like as JSON. */
function json<T>(v: T): Json {
  return JSON.parse(JSON.stringify(v)) as Json;
}

/** What the API double (and so, for these rules, a real API server) says of an object under Strict field validation. */
const schemas = new Map<string, JsonObject>();
function clusterAccepts(file: string, obj: Json): boolean {
  if (!schemas.has(file)) schemas.set(file, (((crdFromDisk(file).spec as JsonObject).versions as JsonObject[])[0]!.schema as JsonObject).openAPIV3Schema as JsonObject);
  const schema = schemas.get(file)!;
  const copy = structuredClone(obj);
  if (prune(copy, schema).length > 0) return false;
  applyDefaults(copy, schema);
  return validate(copy, schema, '', undefined).length === 0;
}

describe('the CRD schema and the zod schema agree', () => {
  // Values a person might write for each kind of field: mostly right, sometimes wrong, so that whole
  // objects come out both valid and invalid.
  const mostly = <T>(good: fc.Arbitrary<T>, bad: fc.Arbitrary<T>): fc.Arbitrary<T> => fc.oneof({ arbitrary: good, weight: 12 }, { arbitrary: bad, weight: 1 });
  const name = mostly(
    fc.oneof(fc.constantFrom('pr-1', 'a', 'x'.repeat(40), 'main-0'), fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?$/)),
    fc.oneof(fc.constantFrom('x'.repeat(41), 'x'.repeat(63), 'x'.repeat(64), 'Bad', '-a', 'a-', 'a.b', 'a_b', ''), fc.stringMatching(/^[a-z0-9.-]{1,70}$/)),
  );
  const quantity = mostly<string | number>(
    fc.oneof(fc.constantFrom('256Mi', '1Gi', '1.5G', '500m', '1e3', '1e-3', '.5Gi', '+1Gi'), fc.integer({ min: 0, max: 3 })),
    fc.oneof(fc.constantFrom('lots', '-1Gi', '1 Gi', '', '1GB'), fc.integer({ min: -3, max: -1 }), fc.constant(1.5)),
  );
  const duration = mostly(fc.constantFrom('30s', '2h', '7d', '1h30m', '00h01m'), fc.oneof(fc.constantFrom('0s', '0h0m', '-1h', '2 h', '', '1w', '10', 'h'), fc.stringMatching(/^[0-9smhd-]{0,6}$/)));
  const maybe = <T>(a: fc.Arbitrary<T>): fc.Arbitrary<T | undefined> => fc.option(a, { nil: undefined });
  const count = mostly<number | string>(fc.integer({ min: 1, max: 10000 }), fc.oneof(fc.integer({ min: -2, max: 0 }), fc.constantFrom(10001, 1.5, '3')));
  const extra = fc.oneof({ arbitrary: fc.constant(undefined), weight: 12 }, { arbitrary: fc.constantFrom({ tll: '1h' }, { Pinned: true }), weight: 1 });

  const branchArb = fc.record({
    apiVersion: fc.constant('pgx.dev/v1alpha1'),
    kind: fc.constant('Branch'),
    metadata: fc.record({ name }),
    spec: fc
      .record({
        templateRef: mostly<Record<string, string>>(fc.record({ name }), fc.constantFrom<Record<string, string>>({}, { name: 'app', kind: 'Template' })),
        ttl: maybe(duration),
        pinned: maybe(mostly<boolean | string>(fc.boolean(), fc.constant('yes'))),
        limits: maybe(fc.record({ memory: maybe(quantity), connections: maybe(count) })),
        affinity: maybe(fc.record({ pod: maybe(name) })),
        extra,
      })
      .map(({ extra: e, ...spec }) => ({ ...spec, ...e })),
  });

  const runtimeArb = fc.record({
    apiVersion: fc.constant('pgx.dev/v1alpha1'),
    kind: fc.constant('Runtime'),
    metadata: fc.record({ name }),
    spec: fc.record({
      image: mostly(fc.constant('ghcr.io/pgx/pgx:0.1'), fc.constantFrom('', undefined)),
      replicas: maybe(mostly<number | string>(fc.integer({ min: 1, max: 100 }), fc.constantFrom(0, -1, 101, '2'))),
      imagePullPolicy: maybe(mostly(fc.constant('Always'), fc.constant('Sometimes'))),
      storage: maybe(fc.record({ size: maybe(quantity), storageClassName: maybe(mostly(fc.constantFrom('zfs-localpv', 'fast.example.com'), fc.constant('Not_OK'))) })),
      resources: maybe(fc.record({ requests: maybe(fc.dictionary(fc.constantFrom('cpu', 'memory'), quantity)), limits: maybe(fc.dictionary(fc.constantFrom('memory'), quantity)) })),
      engine: maybe(
        fc.record({
          prefix: maybe(mostly(fc.constantFrom('tdb_', 'x', 'pr_', 'a'.repeat(12)), fc.constantFrom('Tdb', '1x', 'a'.repeat(13)))),
          grace: maybe(mostly(fc.constant('0s'), duration)),
          poolSize: maybe(mostly<number | string>(fc.oneof(fc.integer({ min: 0, max: 1000 }), fc.constant('auto')), fc.constantFrom(-1, 1001, 1.5, 'Auto', '8', ''))),
          poolMax: maybe(mostly(fc.integer({ min: 0, max: 1_000_000 }), fc.constantFrom(-1, 1_000_001, '5'))),
          poolIdle: maybe(duration),
          databaseDefaults: maybe(fc.record({ memory: maybe(quantity), connections: maybe(count) })),
        }),
      ),
    }),
  });

  const templateArb = fc.record({
    apiVersion: fc.constant('pgx.dev/v1alpha1'),
    kind: fc.constant('Template'),
    metadata: fc.record({ name }),
    spec: fc.record({
      runtimeRef: fc.record({ name }),
      source: mostly<Record<string, unknown>>(
        fc.oneof<fc.Arbitrary<Record<string, unknown>>[]>(
          fc.record({ sql: mostly(fc.constant('create table t (id int)'), fc.constant('')) }),
          fc.record({ configMapRef: fc.record({ name: mostly(fc.constant('schema'), fc.constant('Bad Name')), key: maybe(mostly(fc.constant('schema.sql'), fc.constant('a/b'))) }) }),
          fc.record({
            database: fc.record({
              urlSecretRef: fc.record({ name: fc.constant('prod-db') }),
              mask: maybe(mostly(fc.constant('update users set email = null'), fc.constant(''))),
              maskConfigMapRef: fc.oneof({ arbitrary: fc.constant(undefined), weight: 6 }, { arbitrary: fc.constant({ name: 'mask' }), weight: 1 }),
            }),
          }),
        ),
        fc.constantFrom<Record<string, unknown>>({}, { sql: 'select 1', configMapRef: { name: 'schema' } }),
      ),
      owner: maybe(mostly(fc.constantFrom('app_owner', 'postgres'), fc.constantFrom('App', '1x', 'a'.repeat(64)))),
      seal: maybe(fc.boolean()),
    }),
  });

  const cases = [
    { kind: 'Branch', file: 'branches.pgx.dev.yaml', arb: branchArb as fc.Arbitrary<unknown>, schema: branch as unknown as { safeParse(v: unknown): { success: boolean } } },
    { kind: 'Runtime', file: 'runtimes.pgx.dev.yaml', arb: runtimeArb as fc.Arbitrary<unknown>, schema: runtime as unknown as { safeParse(v: unknown): { success: boolean } } },
    { kind: 'Template', file: 'templates.pgx.dev.yaml', arb: templateArb as fc.Arbitrary<unknown>, schema: template as unknown as { safeParse(v: unknown): { success: boolean } } },
  ];
  for (const c of cases) {
    it(`on which ${c.kind} objects are valid`, () => {
      const seen = { valid: 0, invalid: 0 };
      fc.assert(
        fc.property(c.arb, (raw) => {
          const obj = json(raw);
          const valid = c.schema.safeParse(obj).success;
          seen[valid ? 'valid' : 'invalid']++;
          expect(valid, JSON.stringify(obj)).to.equal(clusterAccepts(c.file, obj));
        }),
        { numRuns: 400 },
      );
      // Both answers came up often enough for the agreement to mean something.
      expect(seen.valid).to.be.greaterThan(40);
      expect(seen.invalid).to.be.greaterThan(40);
    });
  }
});
