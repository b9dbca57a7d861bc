// Session state DISCARD ALL does not undo: a custom setting's placeholder, a temporary schema, a
// LOADed library. A session that got a pooled backend would see what an earlier session left, where a
// fresh backend shows nothing; the engine therefore closes such a session's backend instead of pooling
// it (src/engine/residue.ts), and the next session starts as on a fresh backend.

import { expect } from 'chai';
import { code, describeScenarios, rows, type Scenario } from './harness.js';

/** A custom setting: PostgreSQL makes a placeholder on first SET; RESET ALL resets it to '', not away. */
const customSetting: Scenario = {
  name: 'a custom setting does not outlive its session',
  async run(t) {
    const a = await t.session('a');
    expect(rows(await a.q("SELECT current_setting('myapp.tenant', true) AS tenant"))).to.deep.equal([{ tenant: null }]);
    await a.q("SET myapp.tenant = 'acme'");
    await t.leave(a);
    const b = await t.session('b');
    t.freshBackend(b, a);
    expect(rows(await b.q("SELECT current_setting('myapp.tenant', true) AS tenant"))).to.deep.equal([{ tenant: null }]);
    expect(code(await b.q('SHOW myapp.tenant'))).to.equal('42704');
  },
};

/** DISCARD ALL drops temporary tables but the backend keeps its temporary schema. */
const tempSchema: Scenario = {
  name: 'a new session has no temporary schema',
  async run(t) {
    const a = await t.session('a');
    expect(rows(await a.q('SELECT pg_my_temp_schema()::int AS temp, current_schemas(true) AS path'))).to.deep.equal([{ temp: 0, path: '{pg_catalog,public}' }]);
    await a.q('CREATE TEMP TABLE scratch (id int)');
    await t.leave(a);
    const b = await t.session('b');
    t.freshBackend(b, a);
    expect(rows(await b.q('SELECT pg_my_temp_schema()::int AS temp, current_schemas(true) AS path'))).to.deep.equal([{ temp: 0, path: '{pg_catalog,public}' }]);
  },
};

/** A library loaded with LOAD stays loaded in the backend, its settings with it. */
const loadedLibrary: Scenario = {
  name: 'a library LOADed by one session is not loaded in the next',
  async run(t) {
    const a = await t.session('a');
    expect(code(await a.q('SHOW auto_explain.log_min_duration'))).to.equal('42704');
    await a.q("LOAD 'auto_explain'");
    expect(rows(await a.q('SHOW auto_explain.log_min_duration'))).to.deep.equal([{ 'auto_explain.log_min_duration': '-1' }]);
    await t.leave(a);
    const b = await t.session('b');
    t.freshBackend(b, a);
    expect(code(await b.q('SHOW auto_explain.log_min_duration'))).to.equal('42704');
  },
};

/** The other side: a session that leaves nothing behind hands its backend on (the pool works). */
const plainSession: Scenario = {
  name: 'a session with ordinary settings hands its backend to the next',
  async run(t) {
    const a = await t.session('a');
    await a.q("SET application_name = 'plain'; SET statement_timeout = '5s'");
    expect(rows(await a.q('SELECT count(*)::int AS n FROM items'))).to.deep.equal([{ n: 10 }]);
    await t.leave(a);
    const b = await t.session('b');
    t.reuses(b, a);
    expect(rows(await b.q('SHOW statement_timeout'))).to.deep.equal([{ statement_timeout: '0' }]);
  },
};

describeScenarios('state a pooled backend would keep after DISCARD ALL', [customSetting, tempSchema, loadedLibrary, plainSession]);
