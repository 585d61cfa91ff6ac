// Control never runs the run's objects (issue 38, item 3): what race sends on its own connections (the control
// connection's footprint reads, block probes, pg_locks and pg_stat_activity reads, cleanup; the guard around a spec's
// setup; race spec's own statements) resolves every function and operator in pg_catalog. A run's setup shadows, in its
// schema, each function and operator those statements name (with argument types race's calls would take over
// pg_catalog's where pg_catalog's needs a coercion: json_build_array's VARIADIC "any", ||(name, text), format_type's
// integer given NULL...), each shadow recording its call in a table outside the run. explore, run and spec of the spec,
// and explore of an application race, make no call of any shadow. On main 0bd95be the same test fails: the explore's
// footprint reads call json_build_array, ||, json_agg as the control role, and the guard's own reads call || and
// format (and refuse the setup, as the shadow writes outside the schema).
// The shadowed names are checked against the names the sources' SQL calls (a grep of the files that hold race's own
// SQL): a name race's SQL starts to call without a shadow here fails the test.
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, test } from 'node:test'
import postgres, { type Sql } from 'postgres'
import { race, ROOT, serverUrls, useServer, type TestServer } from '../support/server.js'

const tag = randomBytes(4).toString('hex')
/** The schema of the table the shadows write to: outside every run's, this test's own. */
const mark = `ctlmark_${tag}`
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'race-ctl-'))

/** The files that hold race's own SQL on its connections (grepped for the functions it calls). */
const SOURCES = [
  'src/engine/footprint.ts',
  'src/engine/run.ts',
  'src/db/postgres.ts',
  'src/db/run-role.ts',
  'src/db/connect.ts',
  'src/db/pg-state.ts',
  'src/db/pooled.ts',
  'src/specfile/guard.ts',
  'src/tester/guarded.ts',
  'src/tester/tester.ts',
  'src/tester/database.ts',
  'src/app/foreign.ts',
]
/** Names followed by '(' in those files that are JavaScript's (Math.max, String.replace...), not SQL's. */
const JS_ONLY = new Set(['ceil', 'floor', 'round', 'max', 'replace', 'name', 'now', 'text'])

const rec = (name: string) => `insert into ${mark}.calls values ('${name}', session_user, current_user);`
/**
 * A plpgsql function that records its call and returns pg_catalog's `call`. Names quoted: the spec guard refuses the
 * text of a call of pg_terminate_backend or pg_cancel_backend, which the shadows of those name.
 */
const fn = (name: string, args: string, ret: string, call: string) =>
  `create or replace function "${name}"(${args}) returns ${ret} language plpgsql as $$ begin ${rec(name)} return ${call.replace(/^pg_catalog\.(\w+)\(/, 'pg_catalog."$1"(')}; end $$;`
/** An operator `op` (left, right) of a recording function. */
const op = (op: string, fname: string, l: string, r: string, ret: string, call: string) => [
  `create or replace function ${fname}(a ${l}, b ${r}) returns ${ret} language plpgsql as $$ begin ${rec(`${op}(${l},${r})`)} return ${call}; end $$;`,
  `create operator ${op} (leftarg = ${l}, rightarg = ${r}, function = ${fname});`,
]
const cat = 'pg_catalog.textcat(a::text, b::text)'
/** Operators: what race's SQL combines (name || text in the footprint read, 'pg_class:' || oid in the guard...). */
const OPERATORS: [string, string, string, string, string, string][] = [
  ['||', 'sh_cat_nt', 'name', 'text', 'text', cat],
  ['||', 'sh_cat_tn', 'text', 'name', 'text', cat],
  ['||', 'sh_cat_to', 'text', 'oid', 'text', cat],
  ['||', 'sh_cat_tx', 'text', 'xid', 'text', cat],
  ['||', 'sh_cat_ti', 'text', 'integer', 'text', cat],
  ['||', 'sh_cat_tb', 'text', 'bigint', 'text', cat],
  ['=', 'sh_eq_or', 'oid', 'regclass', 'boolean', 'a operator(pg_catalog.=) b::oid'],
]
/** Functions, by name (each name race's SQL calls: see the grep below). */
const FUNCTIONS: Record<string, string[]> = {
  json_build_array: [fn('json_build_array', 'a text, b text, c boolean, d text, e text', 'json', 'pg_catalog.json_build_array(a, b, c, d, e)')],
  json_agg: [
    `create or replace function sh_agg(s json[], v json) returns json[] language plpgsql as $$ begin ${rec('json_agg')} return pg_catalog.array_append(s, v); end $$;`,
    `create or replace function sh_agg_end(s json[]) returns json language plpgsql as $$ begin return pg_catalog.array_to_json(s); end $$;`,
    `create or replace aggregate json_agg(json) (sfunc = sh_agg, stype = json[], finalfunc = sh_agg_end);`,
  ],
  string_agg: [
    `create or replace function sh_sagg(s text, v text, d text) returns text language plpgsql as $$ begin ${rec('string_agg')} return pg_catalog.concat_ws(d, s, v); end $$;`,
    `create or replace aggregate string_agg(text, text) (sfunc = sh_sagg, stype = text);`,
  ],
  count: [
    `create or replace function sh_count(s bigint) returns bigint language plpgsql as $$ begin ${rec('count')} return s + 1; end $$;`,
    `create or replace aggregate count(*) (sfunc = sh_count, stype = bigint, initcond = '0');`,
  ],
  format_type: [fn('format_type', 'o oid, t text', 'text', 'pg_catalog.format_type(o, t::integer)')],
  format: [
    fn('format', 'f text, a name', 'text', 'pg_catalog.format(f, a)'),
    fn('format', 'f text, a name, b name', 'text', 'pg_catalog.format(f, a, b)'),
    fn('format', 'f text, k text, a name, b name', 'text', 'pg_catalog.format(f, k, a, b)'),
    fn('format', 'f text, k text, a regclass', 'text', 'pg_catalog.format(f, k, a)'),
  ],
  unnest: [`create or replace function unnest(a integer[]) returns setof integer language plpgsql as $$ begin ${rec('unnest')} return query select pg_catalog.unnest(a); end $$;`],
  pg_blocking_pids: [fn('pg_blocking_pids', 'p text', 'integer[]', 'pg_catalog.pg_blocking_pids(p::integer)'), fn('pg_blocking_pids', 'p bigint', 'integer[]', 'pg_catalog.pg_blocking_pids(p::integer)')],
  pg_terminate_backend: [fn('pg_terminate_backend', 'p text', 'boolean', 'pg_catalog.pg_terminate_backend(p::integer)'), fn('pg_terminate_backend', 'p bigint', 'boolean', 'pg_catalog.pg_terminate_backend(p::integer)')],
  pg_cancel_backend: [fn('pg_cancel_backend', 'p text', 'boolean', 'pg_catalog.pg_cancel_backend(p::integer)'), fn('pg_cancel_backend', 'p bigint', 'boolean', 'pg_catalog.pg_cancel_backend(p::integer)')],
  pg_isolation_test_session_is_blocked: [fn('pg_isolation_test_session_is_blocked', 'p bigint, a integer[]', 'boolean', 'pg_catalog.pg_isolation_test_session_is_blocked(p::integer, a)')],
  regexp_replace: [fn('regexp_replace', 'a text, b text, c text', 'text', 'pg_catalog.regexp_replace(a, b, c)')],
  md5: [fn('md5', 'a text', 'text', 'pg_catalog.md5(a)')],
  age: [fn('age', 'a xid', 'integer', 'pg_catalog.age(a)')],
  set_config: [fn('set_config', 'a text, b text, c boolean', 'text', 'pg_catalog.set_config(a, b, c)'), fn('set_config', 'a text, b name, c boolean', 'text', 'pg_catalog.set_config(a, b, c)')],
  current_setting: [fn('current_setting', 'a text', 'text', 'pg_catalog.current_setting(a)'), fn('current_setting', 'a text, b boolean', 'text', 'pg_catalog.current_setting(a, b)')],
  quote_ident: [fn('quote_ident', 'a name', 'text', 'pg_catalog.quote_ident(a)')],
  split_part: [fn('split_part', 'a text, b text, c bigint', 'text', 'pg_catalog.split_part(a, b, c::integer)')],
  strpos: [fn('strpos', 'a text, b text', 'integer', 'pg_catalog.strpos(a, b)')],
  substr: [fn('substr', 'a text, b bigint', 'text', 'pg_catalog.substr(a, b::integer)')],
  to_regclass: [fn('to_regclass', 'a text', 'regclass', 'pg_catalog.to_regclass(a)')],
  shobj_description: [fn('shobj_description', 'a oid, b text', 'text', 'pg_catalog.shobj_description(a, b::name)')],
  pg_identify_object: [fn('pg_identify_object', 'a oid, b oid, c bigint', 'text', 'pg_catalog.pg_identify_object(a, b, c::integer)::text')],
  pg_describe_object: [fn('pg_describe_object', 'a oid, b oid, c bigint', 'text', 'pg_catalog.pg_describe_object(a, b, c::integer)')],
  host: [fn('host', 'a text', 'text', 'pg_catalog.host(a::inet)')],
  // No arguments: pg_catalog's is always an exact match, and pg_catalog comes first; shadowed all the same.
  current_database: [fn('current_database', '', 'name', 'pg_catalog.current_database()')],
  current_schema: [fn('current_schema', '', 'name', 'pg_catalog.current_schema()')],
  pg_backend_pid: [fn('pg_backend_pid', '', 'integer', 'pg_catalog.pg_backend_pid()')],
  pg_my_temp_schema: [fn('pg_my_temp_schema', '', 'oid', 'pg_catalog.pg_my_temp_schema()')],
  txid_current: [fn('txid_current', '', 'bigint', 'pg_catalog.txid_current()')],
  inet_server_addr: [fn('inet_server_addr', '', 'inet', 'pg_catalog.inet_server_addr()')],
  inet_server_port: [fn('inet_server_port', '', 'integer', 'pg_catalog.inet_server_port()')],
  pg_advisory_unlock_all: [
    `create or replace function pg_advisory_unlock_all() returns void language plpgsql as $$ begin ${rec('pg_advisory_unlock_all')} perform pg_catalog.pg_advisory_unlock_all(); end $$;`,
  ],
}

/** Every shadow, as setup statements (one per line: a spec block, or an application race's setup array). */
const SHADOWS = [...Object.values(FUNCTIONS).flat(), ...OPERATORS.flatMap((o) => op(...o))]
const DROP_OPERATORS = `drop operator if exists ${OPERATORS.map(([o, , l, r]) => `${o} (${l}, ${r})`).join(', ')}`

let server: TestServer
const targets: { name: string; url: string; admin: Sql }[] = []

before(async () => {
  server = await useServer()
  for (const [name, url] of await serverUrls(server)) {
    const admin = postgres(url, { max: 1, onnotice: () => {} })
    await admin.unsafe(`create schema ${mark}; create table ${mark}.calls (shadow text, who text, usr text);
      grant usage on schema ${mark} to public; grant insert on ${mark}.calls to public`)
    targets.push({ name, url, admin })
  }
})
after(async () => {
  for (const t of targets) {
    await t.admin.unsafe(`drop schema if exists ${mark} cascade`).catch(() => {})
    await t.admin.end()
  }
  await server.stop()
  fs.rmSync(dir, { recursive: true, force: true })
})

test('the shadows cover every function race names in its own SQL', () => {
  const text = SOURCES.map((f) => fs.readFileSync(path.join(ROOT, f), 'utf8')).join('\n')
  // SQL function calls: a lower-case name and '(' (JavaScript's own are listed apart; SQL keywords that take a
  // parenthesis are no functions).
  const KEYWORDS = new Set(['select', 'exists', 'in', 'coalesce', 'array', 'values', 'filter', 'any', 'case', 'cast', 'nullif', 'with', 'as', 'from', 'where', 'and', 'or', 'not', 'on', 'using', 'join', 'is', 'set', 'begin'])
  const called = new Set([...text.matchAll(/(?<![\w.$])([a-z_][a-z0-9_]*)\(/g)].map((m) => m[1]))
  const sqlNames = [...called].filter((n) => !KEYWORDS.has(n) && !JS_ONLY.has(n))
  // Of those, the ones pg_catalog has (the rest are TypeScript's: the check below asks the server which are SQL's).
  return (async () => {
    const [t] = targets
    const known = (await t.admin`select distinct proname from pg_catalog.pg_proc where pronamespace = 'pg_catalog'::regnamespace and proname = any(${sqlNames})`).map((r) => String(r.proname))
    const missing = known.filter((n) => !(n in FUNCTIONS)).sort()
    assert.deepEqual(missing, [], `race's SQL calls functions no shadow here covers: ${missing.join(', ')}`)
  })()
})

function spec(): string {
  const f = path.join(dir, `shadows-${tag}.spec`)
  fs.writeFileSync(
    f,
    `# Every function and operator race's own SQL names, shadowed in the run's schema (test/isolation/control-names.test.ts).
setup {
${SHADOWS.join('\n')}
}
setup { create table t (x int); }
teardown { drop table t; ${DROP_OPERATORS}; }

invariant "t is empty" { select count(*) = 0 from t }
expect held

session s1
step b1 { begin }
step r1 { select * from t }
step c1 { commit }

session s2
step b2 { begin }
step r2 { select * from t }
step c2 { commit }
`,
  )
  return f
}

function appRace(): string {
  const f = path.join(dir, `shadows-${tag}.race.mjs`)
  fs.writeFileSync(
    f,
    `export default { driver: 'pg', sessions: 2, expect: 'held',
  setup: ${JSON.stringify([...SHADOWS, 'create table t (x int)'])},
  invariant: 'select count(*) = 0 from t',
  session: async (db) => { await db.query('begin'); await db.query('select * from t'); await db.query('commit') } }
`,
  )
  return f
}

async function calls(admin: Sql): Promise<string[]> {
  const rows = await admin.unsafe(`select shadow, who, usr, count(*)::int as n from ${mark}.calls group by 1, 2, 3 order by 1, 2, 3`)
  return rows.map((r) => `${r.shadow} as ${r.who}/${r.usr} x${r.n}`)
}

for (const cmd of [['explore'], ['explore', '--exhaustive'], ['run', '--trials', '3'], ['spec'], ['spec', '--schema']]) {
  test(`race ${cmd.join(' ')} of a spec that shadows them calls no shadow`, async () => {
    const f = spec()
    for (const t of targets) {
      await t.admin.unsafe(`truncate ${mark}.calls`)
      const r = await race([cmd[0], f, ...cmd.slice(1), '--database-url', t.url], { timeoutMs: 120_000 })
      assert.equal(r.code, 0, `${t.name}: race ${cmd.join(' ')} exited ${r.code}: ${r.stdout.slice(-600)}${r.stderr.slice(-600)}`)
      assert.deepEqual(await calls(t.admin), [], `${t.name}: race ${cmd.join(' ')} called the run's shadows`)
    }
  })
}

test('race explore of an application race that shadows them calls no shadow', async () => {
  const f = appRace()
  for (const t of targets) {
    await t.admin.unsafe(`truncate ${mark}.calls`)
    const r = await race(['explore', f, '--database-url', t.url], { timeoutMs: 120_000 })
    assert.equal(r.code, 0, `${t.name}: exited ${r.code}: ${r.stdout.slice(-600)}${r.stderr.slice(-600)}`)
    assert.deepEqual(await calls(t.admin), [], `${t.name}: race explore called the run's shadows`)
  }
})
