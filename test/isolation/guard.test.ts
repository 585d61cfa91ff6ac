// The spec setup guard against escapes (issue 20, cases 2 and 4), on the test server (embedded PostgreSQL 18
// or DATABASE_URL) and, when it answers, PostgreSQL 15 at 127.0.0.1:5432: a setup block's session state ends
// with the block; temporary objects, comments outside the schema, COPY to a file or a program and race spec's
// maintenance statements outside the schema are refused with one line, exit 2, and nothing outside changes.
// Each test works on objects of its own (a schema named with a random tag) and checks only them.
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, test } from 'node:test'
import postgres, { type Sql } from 'postgres'
import { race, schemasOf, useServer, type TestServer, serverUrls } from '../support/server.js'
import { digestSql, fingerprintSql, guardedSql, quickGuardedSql, schemaLiteral } from '../../src/specfile/guard.js'

const tag = randomBytes(4).toString('hex')
/** A schema of this test's own, outside any race run: what a spec must not touch. */
const outside = `race_test_guard_${tag}`
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'race-guard-'))

interface Target {
  name: string
  url: string
  admin: Sql
}
let server: TestServer
const targets: Target[] = []


before(async () => {
  server = await useServer()
  for (const [name, url] of await serverUrls(server)) {
    const admin = postgres(url, { max: 1, onnotice: () => {} })
    await admin.unsafe(`create schema ${outside}; create table ${outside}.accounts (id int); create index ${outside}_idx on ${outside}.accounts (id);
      create function ${outside}.f() returns int language sql as 'select 1'; comment on schema ${outside} is 'theirs'`)
    targets.push({ name, url, admin })
  }
})
after(async () => {
  for (const t of targets) {
    await t.admin.unsafe(`drop schema if exists ${outside} cascade`)
    await t.admin.end()
  }
  await server.stop()
  fs.rmSync(dir, { recursive: true, force: true })
})

function file(name: string, text: string): string {
  const f = path.join(dir, name)
  fs.writeFileSync(f, text)
  return f
}

/** Every object of the outside schema with its version and comment: equal before and after means untouched. */
async function state(t: Target): Promise<string> {
  const rows = await t.admin.unsafe(`
    select string_agg(x, ' ' order by x) as s from (
      select c.relname || ':' || c.xmin || ':' || coalesce(obj_description(c.oid, 'pg_class'), '') as x from pg_class c where c.relnamespace = '${outside}'::regnamespace
      union all select p.proname || ':' || p.xmin || ':' || coalesce(obj_description(p.oid, 'pg_proc'), '') from pg_proc p where p.pronamespace = '${outside}'::regnamespace
      union all select 'schema:' || coalesce(obj_description('${outside}'::regnamespace, 'pg_namespace'), '')
      union all select 'database:' || coalesce(shobj_description(d.oid, 'pg_database'), '') from pg_database d where d.datname = current_database()
      union all select 'role:' || coalesce(shobj_description(r.oid, 'pg_authid'), '') from pg_roles r where r.rolname = current_user) s`)
  return String(rows[0].s)
}

/** Runs race, expecting one refusal line on stderr matching `what`, exit 2, nothing outside changed and no schema left. */
async function refused(t: Target, args: string[], what: RegExp): Promise<void> {
  const was = await state(t)
  const r = await race(args, { url: t.url })
  const where = `${t.name}: race ${args.join(' ')}`
  assert.equal(r.code, 2, `${where}: ${r.stdout}${r.stderr}`)
  const lines = r.stderr.trim().split('\n')
  assert.equal(lines.length, 1, `${where}: ${r.stderr}`)
  assert.match(lines[0], what, where)
  assert.doesNotMatch(r.stderr, /\n\s+at /, 'no stack trace')
  assert.equal(await state(t), was, `${where}: nothing outside race's schema changed`)
  assert.deepEqual(await schemasOf(t.admin, r.pid), [], `${where}: the run schema is gone`)
}

test("a setup block's SET search_path ends with the block: the next block creates in race's schema, and the sessions' rows are judged", async () => {
  // The audit's case: the guard took its schema from current_schema(), so block 2 created orders outside,
  // left it behind, and the invariant read that empty table: HELD, MATCH, exit 0, with 5 sessions violating.
  const spec = file(
    'path.spec',
    `setup { create table kept (id int); set search_path = ${outside}; }
setup { create table orders (id int, status text) }
session s*
step ins { insert into orders values (1, 'open') }
invariant "at most one open order" { select count(*) <= 1 from orders where status = 'open' }
expect held
`,
  )
  for (const t of targets) {
    const was = await state(t)
    const r = await race(['run', spec, '--n', '5'], { url: t.url })
    assert.equal(r.code, 1, `${t.name}: ${r.stdout}${r.stderr}`)
    assert.match(r.stdout, /invariant {2}at most one open order: observed false {2}VIOLATED/, t.name)
    assert.match(r.stdout, /expected {3}held {2}DEVIATION/, t.name)
    assert.equal((await t.admin`select 1 from pg_class where relname = 'orders' and relnamespace = ${outside}::regnamespace`).length, 0, `${t.name}: no orders table outside`)
    assert.equal(await state(t), was, t.name)
    assert.deepEqual(await schemasOf(t.admin, r.pid), [], t.name)
  }
})

test('a setup block that sets default_transaction_read_only and holds a session advisory lock: both end with the block, the run judges, its schema is dropped', async () => {
  // The audit's case: read-only on control lost the results (exit 3) and the drop failed, leaving the schema.
  const spec = file(
    'ro.spec',
    `setup { create table orders (id int, status text); set default_transaction_read_only = on; select pg_advisory_lock(20) }
setup { create table more (id int) }
session s*
step lock { select pg_advisory_lock_shared(20) }
step ins { insert into orders values (1, 'open') }
invariant "at most one open order" { select count(*) <= 1 from orders where status = 'open' }
expect violated
`,
  )
  for (const t of targets) {
    const r = await race(['run', spec, '--n', '3'], { url: t.url })
    assert.equal(r.code, 0, `${t.name}: ${r.stdout}${r.stderr}`)
    assert.match(r.stdout, /expected {3}violated {2}MATCH/, t.name)
    assert.deepEqual(await schemasOf(t.admin, r.pid), [], t.name)
  }
})

test("the quick check every trial's setup runs first passes a clean block, and hands each block the whole check refuses back to it", async () => {
  // A trial's setup runs quickGuardedSql first (engine/run.ts): what it cannot show clean is rolled back and run
  // again under guardedSql, whose words are the run's. It must never pass a block the whole check refuses.
  const refusedBlocks = [
    `create table ${outside}.more (id int)`,
    `comment on schema ${outside} is 'mine'`,
    `alter function ${outside}.f() rename to g`,
    `drop index ${outside}.${outside}_idx`,
    `insert into ${outside}.accounts values (1)`,
    `create temp table zz (id int)`,
    `create temp table race_guard_before (id int)`,
    `select set_config('race.guard_schema', '${outside}', true)`,
    `do $$ begin execute 'create function ${outside}.h() returns int language sql as ''select 2'''; end $$`,
  ]
  assert.equal(quickGuardedSql('prepare p as select 1'), undefined, 'a block that prepares a statement runs under the whole check only')
  for (const t of targets) {
    const sql = postgres(t.url, { max: 1, onnotice: () => {} })
    const mine = `race_test_quick_${tag}`
    try {
      // Marked as a live run's schema is (its backend and that backend's start): with a mark that names no start, a
      // race run beside this file (npm test runs three at a time) takes it for a dead run's and reaps it mid-test.
      const [{ pid, started }] = await sql`select pg_backend_pid() as pid, (select backend_start::text from pg_stat_activity where pid = pg_backend_pid()) as started`
      const mark = JSON.stringify({ backend: Number(pid), backendStart: String(started), keep: false })
      await sql.unsafe(`create schema ${mine}; comment on schema ${mine} is 'race:${mark}'; set search_path to ${mine}`)
      const was = await state(t)
      const outcome = (text: string) => sql.unsafe(text).then(() => 'passed', (e: { code?: string }) => String(e.code))
      assert.equal(await outcome(quickGuardedSql('create table orders (id int); insert into orders values (1)')!), 'passed', `${t.name}: a clean block passes`)
      assert.equal((await sql.unsafe(`select count(*)::int as n from ${mine}.orders`))[0].n, 1, `${t.name}: and ran`)
      for (const block of refusedBlocks) {
        assert.notEqual(await outcome(guardedSql(block, 'test')), 'passed', `${t.name}: the whole check refuses ${block}`)
        assert.equal(await outcome(quickGuardedSql(block)!), 'RX002', `${t.name}: the quick check hands ${block} back`)
      }
      assert.equal(await state(t), was, `${t.name}: nothing outside changed`)
    } finally {
      await sql.unsafe(`drop schema if exists ${mine} cascade`).catch(() => {})
      await sql.end()
    }
  }
})

test("the quick check's digest covers exactly the whole check's fingerprint rows, each catalog read without a join to pg_namespace", async () => {
  // The digest needs each row's oid and version only; the schema's name (the join) is for the fingerprint's words.
  // Reading the catalogs alone makes the quick check (every first trial's setup) cheaper; the rows must stay the same.
  const schema = schemaLiteral(`race_test_digest_${tag}`)
  assert.doesNotMatch(digestSql(schema), /join pg_catalog\.pg_namespace/)
  for (const t of targets) {
    const [row] = await t.admin.begin('isolation level repeatable read', (sql) => [
      sql.unsafe(`select (select count(*)::text from (${fingerprintSql(schema)}) f) as fingerprint, pg_catalog.split_part(${digestSql(schema)}, '/', 1) as digest`),
    ])
    const [{ fingerprint, digest }] = row as unknown as { fingerprint: string; digest: string }[]
    assert.ok(Number(fingerprint) > 1000, `${t.name}: ${fingerprint} rows`)
    assert.equal(digest, fingerprint, `${t.name}: the digest counts the fingerprint's rows`)
  }
})

test("a block that moves the guard's own record of the schema is refused", async () => {
  const spec = file(
    'moved.spec',
    `setup { create table mine (id int); select set_config('race.guard_schema', '${outside}', true) }
setup { create table accounts2 (id int) }
session s1
step a { select 1 }
`,
  )
  for (const t of targets) await refused(t, ['run', spec], /setup block 1 sets race\.guard_schema, which race's guard keeps: leave it alone; nothing was changed$/)
})

test('a temporary table in setup, which would shadow the invariant, is refused with one line', async () => {
  const spec = file(
    'temp.spec',
    `setup { create table orders (id int, status text) }
setup { create temp table orders (id int, status text) }
session s*
step ins { insert into orders values (1, 'open') }
invariant "at most one open order" { select count(*) <= 1 from orders where status = 'open' }
expect held
`,
  )
  for (const t of targets) {
    for (const cmd of ['run', 'spec']) await refused(t, cmd === 'spec' ? [cmd, spec, '--schema'] : [cmd, spec], /setup block 2 creates temporary table orders.*nothing was changed$/)
  }
})

test('comments outside the schema (a schema, a function, the database, a role) are refused, and each comment stays as it was', async () => {
  const cases: [string, string, RegExp][] = [
    ['schema', `comment on schema ${outside} is 'changed'`, new RegExp(`changes the comment on schema ${outside}`)],
    ['function', `comment on function ${outside}.f() is 'changed'`, new RegExp(`creates the comment on function ${outside}\\.f\\(\\)`)],
    ['database', `do $$ begin execute format('comment on database %I is %L', current_database(), 'race-guard-${tag}'); end $$`, /the comment on database /],
    ['role', `do $$ begin execute format('comment on role %I is %L', current_user, 'race-guard-${tag}'); end $$`, /the comment on role /],
  ]
  for (const [what, sql, says] of cases) {
    const spec = file(`comment-${what}.spec`, `setup { create table mine (id int); ${sql}; }\nsession s1\nstep a { select 1 }\n`)
    for (const t of targets) {
      // race run's setup runs as the run role, which the server refuses first (db/run-role.ts); race spec's is guarded.
      for (const cmd of ['run', 'spec']) await refused(t, cmd === 'spec' ? [cmd, spec, '--schema'] : [cmd, spec], cmd === 'run' ? new RegExp(`${says.source}|setup block was refused by the server: .*\\(42501`) : says)
    }
  }
})

test('COPY to a program or a server file is refused before it runs, also from inside a DO block', async () => {
  const mark = path.join(dir, `ran-${tag}`)
  const cases: [string, string, RegExp][] = [
    ['program', `copy (select 1) to program 'touch ${mark}'`, /setup block 1 runs a program on the server/],
    ['file', `copy (select 1) to '${mark}'`, /setup block 1 writes a file on the server/],
    ['do', `do $$ begin execute 'copy (select 1) to ''${mark}'''; end $$`, /setup block 1 writes a file on the server/],
  ]
  for (const [what, sql, says] of cases) {
    const spec = file(`copy-${what}.spec`, `setup { create table mine (id int); ${sql}; }\nsession s1\nstep a { select 1 }\n`)
    for (const t of targets) {
      for (const cmd of ['run', 'spec']) await refused(t, cmd === 'spec' ? [cmd, spec, '--schema'] : [cmd, spec], says)
    }
  }
  assert.ok(!fs.existsSync(mark), 'no program ran and no file was written')
})

test("race spec: maintenance blocks, which run outside a transaction, are refused when they reach outside race's schema", async () => {
  const cases: [string, string, RegExp][] = [
    ['vacuum', 'vacuum full', /setup block 2 vacuums every table of the database/],
    ['reindex', `reindex schema concurrently ${outside}`, /setup block 2 reindexes a whole schema/],
  ]
  for (const [what, sql, says] of cases) {
    const spec = file(`maint-${what}.spec`, `setup { create table mine (id int) }\nsetup { ${sql} }\nsession s1\nstep a { select 1 }\n`)
    for (const t of targets) await refused(t, ['spec', spec, '--schema'], says)
  }
  // A search_path set in block 1 no longer reaches block 2: the index outside is not found, and stays.
  const drop = file('maint-drop.spec', `setup { create table mine (id int); set search_path = ${outside} }\nsetup { drop index concurrently ${outside}_idx }\nsession s1\nstep a { select 1 }\n`)
  // Naming its own table, a maintenance block runs.
  const own = file('maint-own.spec', `setup { create table mine (id int) }\nsetup { vacuum full mine }\nsetup { create index concurrently mine_id on mine (id) }\nsetup { drop index concurrently mine_id }\nsession s1\nstep a { select count(*) from mine }\n`)
  for (const t of targets) {
    const was = await state(t)
    const r = await race(['spec', drop, '--schema'], { url: t.url })
    assert.match(r.stdout + r.stderr, new RegExp(`setup failed: ERROR:  index "${outside}_idx" does not exist`), `${t.name}: ${r.stdout}${r.stderr}`)
    assert.equal(await state(t), was, `${t.name}: the index outside is still there`)
    assert.deepEqual(await schemasOf(t.admin, r.pid), [], t.name)
    const ok = await race(['spec', own, '--schema'], { url: t.url })
    assert.equal(ok.code, 0, `${t.name}: ${ok.stdout}${ok.stderr}`)
    assert.match(ok.stdout, /step a: select count\(\*\) from mine/, t.name)
  }
})
