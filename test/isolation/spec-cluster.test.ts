// race spec --database-url (a database per spec, on a server others share) never drops or changes what race did
// not create (finding 14): a role is the spec's by identity (new since the spec began, and something in the spec's
// database depends on it), never because its name appears in the spec's text; every cluster-wide change the spec
// left is reported, one line each; after a kill -9, the next run drops the killed spec's role by that identity.
// On the test server (embedded or DATABASE_URL) and PostgreSQL 15 at 127.0.0.1:5432 when it answers.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, test } from 'node:test'
import postgres, { type Sql } from 'postgres'
import { BIN, ROOT, race, useServer, type TestServer, serverUrls } from '../support/server.js'

const tag = randomBytes(4).toString('hex')
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'race-spec-cluster-'))
let server: TestServer
const targets: { name: string; url: string; admin: Sql; db: string }[] = []


before(async () => {
  server = await useServer()
  for (const [name, url] of await serverUrls(server)) {
    const admin = postgres(url, { max: 1, onnotice: () => {} })
    const [{ db }] = await admin`select current_database() as db`
    targets.push({ name, url, admin, db: String(db) })
  }
})
after(async () => {
  for (const t of targets) {
    for (const r of await t.admin`select rolname from pg_roles where rolname like ${`%${tag}%`}`) await t.admin.unsafe(`drop owned by "${r.rolname}"; drop role "${r.rolname}"`).catch(() => {})
    await t.admin.unsafe(`drop database if exists "race_test_db_${tag}"`).catch(() => {})
    await t.admin.unsafe(`alter database "${t.db}" reset "race_test_${tag}.x"`).catch(() => {})
    await t.admin.end()
  }
  await server.stop()
  fs.rmSync(dir, { recursive: true, force: true })
})

function spec(name: string, text: string): string {
  const f = path.join(dir, `${name}.spec`)
  fs.writeFileSync(f, text)
  return f
}

test("a role another client creates while a spec runs stays, though the spec's text contains its name", async () => {
  for (const t of targets) {
    const theirs = `ad${tag}`
    // The spec's step waits (bounded) until the role exists; the test makes it once it sees the step running in
    // pg_stat_activity: made while the spec runs, not guessed from time. The comment says its name too, as
    // "already" says "ad".
    const wait = `do $$ begin for i in 1..3000 loop exit when exists (select 1 from pg_roles where rolname = 'ad${tag}'); perform pg_sleep(0.01); end loop; end $$;`
    const f = spec(`mention-${t.name.replace(/\W/g, '')}`, `# already: ad${tag} is named here\nsetup { create table x (a int); }\nsession s\nstep w { ${wait} }\n`)
    const run = race(['spec', f, '--database-url', t.url], { timeoutMs: 60_000 })
    let running = false
    for (let i = 0; i < 600 && !running; i++) {
      running = (await t.admin`select 1 from pg_stat_activity where state = 'active' and pid <> pg_backend_pid() and query like ${`%rolname = 'ad${tag}'%`}`).length > 0
      if (!running) await new Promise((r) => setTimeout(r, 50))
    }
    assert.ok(running, `${t.name}: the spec's step runs`)
    await t.admin.unsafe(`create role "${theirs}"`)
    const r = await run
    assert.equal(r.code, 0, `${t.name}: ${r.stdout}${r.stderr}`)
    assert.equal((await t.admin`select 1 from pg_roles where rolname = ${theirs}`).length, 1, `${t.name}: the other client's role is still there`)
    assert.match(r.stderr, new RegExp(`role ${theirs} appeared while the spec ran`), `${t.name}: reported, not dropped`)
    await t.admin.unsafe(`drop role "${theirs}"`)
  }
})

test('a database made ahead for a next spec that never began drops no role: two specs leave every role of the server alone', async () => {
  for (const t of targets) {
    const victim = `race_victim_${tag}`
    await t.admin.unsafe(`create role "${victim}"`)
    // A first spec whose database is not reused (a session fails with 40001), so the next is made ahead.
    const one = path.join(ROOT, 'conformance', 'specs', 'ssi-write-skew.spec')
    const two = spec(`second-${t.name.replace(/\W/g, '')}`, 'setup { create table y (a int); }\nsession s\nstep b { select 2; }\n')
    const r = await race(['spec', one, two, '--database-url', t.url], { timeoutMs: 60_000 })
    assert.equal(r.code, 0, `${t.name}: ${r.stdout}${r.stderr}`)
    assert.doesNotMatch(r.stderr, /which the spec created/, `${t.name}: no role is said to be a spec's`)
    assert.equal((await t.admin`select 1 from pg_roles where rolname = ${victim}`).length, 1, `${t.name}: a role race did not create is still there`)
    await t.admin.unsafe(`drop role "${victim}"`)
  }
})

test('every cluster-wide change a spec leaves is reported, one line each, and none is undone', async () => {
  for (const t of targets) {
    const f = spec(
      `cluster-${t.name.replace(/\W/g, '')}`,
      `setup { do $$ begin execute format('create role %I', 'race_built_' || '${tag}'); end $$; }
setup { alter role race_built_${tag} set work_mem = '2MB'; }
setup { alter database "${t.db}" set "race_test_${tag}.x" = '1'; }
session s
step c { create database race_test_db_${tag}; }
`,
    )
    const r = await race(['spec', f, '--database-url', t.url], { timeoutMs: 60_000 })
    assert.equal(r.code, 0, `${t.name}: ${r.stdout}${r.stderr}`)
    const lines = r.stderr.split('\n')
    const one = (re: RegExp) => assert.equal(lines.filter((l) => re.test(l)).length, 1, `${t.name}: one line ${re}:\n${r.stderr}`)
    one(new RegExp(`role race_built_${tag} appeared`))
    one(new RegExp(`settings of role race_built_${tag}`))
    one(new RegExp(`settings of database ${t.db}`))
    one(new RegExp(`database race_test_db_${tag} appeared`))
    assert.equal((await t.admin`select 1 from pg_database where datname = ${`race_test_db_${tag}`}`).length, 1, 'reported, left alone')
    await t.admin.unsafe(`drop database "race_test_db_${tag}"`)
    await t.admin.unsafe(`alter database "${t.db}" reset "race_test_${tag}.x"; drop role race_built_${tag}`)
  }
})

test("a spec's role, which something in its database depends on, is dropped; after a kill -9 the next run drops it by its oid", async () => {
  for (const t of targets) {
    const role = `race_owner_${tag}`
    const make = `setup { create role ${role}; create table x (a int); alter table x owner to ${role}; }\n`
    // Dropped at the end of a spec that ran to its end.
    const done = await race(['spec', spec(`owner-${t.name.replace(/\W/g, '')}`, `${make}session s\nstep a { select 1; }\n`), '--database-url', t.url], { timeoutMs: 60_000 })
    assert.equal(done.code, 0, done.stderr)
    assert.equal((await t.admin`select 1 from pg_roles where rolname = ${role}`).length, 0, `${t.name}: the spec's role was dropped`)
    // Killed mid-spec: the next run drops it.
    const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1' }
    delete env.DATABASE_URL
    const child = spawn(process.execPath, [BIN, 'spec', spec(`killed-${t.name.replace(/\W/g, '')}`, `${make}session s\nstep w { select pg_sleep(20); }\n`), '--database-url', t.url], { env, stdio: 'ignore' })
    let oid: number | undefined
    for (let i = 0; i < 150 && oid === undefined; i++) {
      await new Promise((r) => setTimeout(r, 100))
      const [row] = await t.admin`select r.oid::int from pg_roles r where rolname = ${role} and exists (select 1 from pg_shdepend d where d.refobjid = r.oid)`
      oid = row?.oid
    }
    assert.ok(oid, `${t.name}: the spec made its role`)
    await new Promise((r) => setTimeout(r, 300))
    child.kill('SIGKILL')
    await new Promise((r) => child.on('close', r))
    // The killed run's backends: those in its database, and its control backend (named in the database's mark).
    await t.admin`select pg_terminate_backend(a.pid) from pg_stat_activity a where a.datname in
      (select d.datname from pg_database d where shobj_description(d.oid, 'pg_database') like ${`%"pid":${child.pid},%`})
      or a.pid in (select (substr(shobj_description(d.oid, 'pg_database'), 6)::jsonb ->> 'backend')::int from pg_database d
                    where shobj_description(d.oid, 'pg_database') like ${`%"pid":${child.pid},%`})`
    await new Promise((r) => setTimeout(r, 500))
    const next = await race(['spec', spec('next', `session s\nstep a { select 1; }\n`), '--database-url', t.url], { timeoutMs: 60_000 })
    assert.equal(next.code, 0, next.stderr)
    assert.equal((await t.admin`select 1 from pg_roles where oid = ${oid}`).length, 0, `${t.name}: the killed spec's role was dropped by the next run`)
  }
})
