// The run role (db/run-role.ts): a race's setup, sessions and invariant run as a role race creates for the run, so
// what a spec, a scenario module or an application race may do outside its schema is what PostgreSQL lets a role
// of no privilege do, however the SQL is spelled. Each attack here got past the text guard (finding 13): a COPY to
// a dollar-quoted or U&'' file name, quoted function names (pg_terminate_backend killed an unrelated client), SQL
// assembled at run time, the catalog changes the fingerprint missed, and an invariant nothing checked. After each,
// the world outside the run is checked: the file, the backend, the slot, the role, the parameter, the large object.
// On the test server (embedded or DATABASE_URL) and PostgreSQL 15 at 127.0.0.1:5432 when it answers.
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, test } from 'node:test'
import postgres, { type Sql } from 'postgres'
import { race, schemasOf, useServer, type TestServer, serverUrls } from '../support/server.js'
import { dropRoleSql, makeRunRole } from '../../src/db/run-role.js'

const tag = randomBytes(4).toString('hex')
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'race-role-'))
/** Files a server process could write (/tmp is everyone's): none may appear. */
const mark = (what: string) => `/tmp/race-role-${tag}-${what}`
const victimRole = `race_test_victim_${tag}`
const slot = `race_test_slot_${tag}`

interface Target {
  name: string
  url: string
  admin: Sql
  /** An unrelated client's connection, and its backend. */
  victim: Sql
  victimPid: number
  /** A large object of someone else's. */
  lo: number
  version: number
}
let server: TestServer
const targets: Target[] = []


before(async () => {
  server = await useServer()
  for (const [name, url] of await serverUrls(server)) {
    const admin = postgres(url, { max: 1, onnotice: () => {} })
    const victim = postgres(url, { max: 1, onnotice: () => {}, connection: { application_name: 'race test victim' } })
    const [{ pid }] = await victim`select pg_backend_pid() as pid`
    await admin.unsafe(`create role ${victimRole} login password 'theirs'`)
    const [{ lo, version }] = await admin`select lo_from_bytea(0, 'theirs')::int as lo, current_setting('server_version_num')::int as version`
    targets.push({ name, url, admin, victim, victimPid: Number(pid), lo: Number(lo), version: Number(version) })
  }
})
after(async () => {
  for (const t of targets) {
    await t.admin.unsafe(`drop role if exists ${victimRole}`).catch(() => {})
    await t.admin`select lo_unlink(${t.lo})`.catch(() => {})
    await t.victim.end({ timeout: 1 })
    await t.admin.end()
  }
  await server.stop()
  fs.rmSync(dir, { recursive: true, force: true })
  for (const f of fs.readdirSync('/tmp').filter((f) => f.startsWith(`race-role-${tag}`))) fs.rmSync(path.join('/tmp', f), { force: true })
})

function file(name: string, text: string): string {
  const f = path.join(dir, name)
  fs.writeFileSync(f, text)
  return f
}

/**
 * Everything outside the run an attack here aims at, as one string: equal before and after means untouched. Only
 * this test's own objects: other clients (other tests, other runs) change the server's meanwhile.
 */
async function world(t: Target): Promise<string> {
  const [r] = await t.admin.unsafe(`select
      (select count(*) from pg_stat_activity where pid = ${t.victimPid}) as victim,
      (select coalesce(rolpassword, '') from pg_authid where rolname = '${victimRole}') as password,
      (select count(*) from pg_replication_slots where slot_name = '${slot}') as slot,
      (select count(*) from pg_subscription) as subscriptions,
      ${t.version >= 150000 ? "(select count(*) from pg_parameter_acl where parname = 'work_mem')" : '0'} as parameter_acls,
      (select encode(lo_get(${t.lo}), 'escape')) as lo,
      (select count(*) from pg_db_role_setting where setrole = (select oid from pg_roles where rolname = '${victimRole}')) as settings`)
  const files = fs.readdirSync('/tmp').filter((f) => f.startsWith(`race-role-${tag}`))
  return JSON.stringify({ ...r, files })
}

/** Runs race; the run may fail (the server refuses what the role may not do), but nothing outside changes. */
async function harmless(t: Target, args: string[], what: string): Promise<void> {
  const was = await world(t)
  const r = await race(args, { url: t.url })
  const where = `${t.name}: ${what}`
  assert.doesNotMatch(r.stderr, /\n\s+at /, `${where}: no stack trace`)
  assert.notEqual(r.code, null, `${where}: race ended`)
  assert.equal(await world(t), was, `${where}: nothing outside the run changed\n${r.stdout}${r.stderr}`)
  assert.deepEqual(await schemasOf(t.admin, r.pid), [], `${where}: the run schema is gone`)
  const [victim] = await t.victim`select 1 as ok`
  assert.equal(victim.ok, 1, `${where}: the unrelated client still works`)
}

/** The attacks, as SQL for a target (its victim's backend, its large object). */
function attacks(t: Target): [string, string][] {
  const all: [string, string][] = [
    ['copy to a dollar-quoted file name', `copy (select 1) to $f$${mark('dollar')}$f$`],
    ['copy to a U& file name', `copy (select 1) to U&'${mark('unicode').replace(/\//g, '\\002f')}'`],
    ['a quoted pg_terminate_backend', `select "pg_terminate_backend"(${t.victimPid})`],
    ['a quoted lo_export', `select "lo_export"(${t.lo}, '${mark('lo')}')`],
    ['a quoted pg_create_physical_replication_slot', `select "pg_create_physical_replication_slot"('${slot}')`],
    ['copy to program assembled at run time', `do $$ begin execute format('copy (select 1) to program %L', 'touch ${mark('program')}'); end $$`],
    ['alter role password', `alter role ${victimRole} password 'mine'`],
    ['create subscription', `create subscription race_sub_${tag} connection 'dbname=nowhere' publication p with (connect = false)`],
    ['lo_put on their large object', `select lo_put(${t.lo}, 0, 'MINE')`],
    ['alter role set', `alter role ${victimRole} set work_mem = '1MB'`],
    // Two spellings of our own: a file name split into adjacent string literals, and a U&"" function name.
    ['copy to a file name in two adjacent literals', `copy (select 1) to '/tmp/'\n'race-role-${tag}-adjacent'`],
    ['a U&"" pg_terminate_backend', `select U&"pg\\0074erminate_backend"(${t.victimPid})`],
  ]
  if (t.version >= 150000) all.push(['grant set on parameter', 'grant set on parameter work_mem to public'])
  return all
}

test('a spec whose setup attacks the outside by spellings the text guard missed changes nothing outside the run (race run)', async () => {
  for (const t of targets) {
    for (const [what, sql] of attacks(t)) {
      const spec = file(`setup-${what.replace(/\W+/g, '-')}.spec`, `setup { create table mine (id int); }\nsetup { ${sql}; }\nsession s1\nstep a { select 1 }\n`)
      await harmless(t, ['run', spec, '--trials', '1'], `setup: ${what}`)
    }
  }
})

test("a spec's invariant runs as the run role: its attacks change nothing outside the run", async () => {
  for (const t of targets) {
    for (const [what, sql] of attacks(t).filter(([, s]) => s.startsWith('select'))) {
      const spec = file(`inv-${what.replace(/\W+/g, '-')}.spec`, `setup { create table mine (id int); }\nsession s1\nstep a { select 1 }\ninvariant "harmless" { ${sql.replace(/^select /, 'select true as held, ')} }\n`)
      await harmless(t, ['run', spec, '--trials', '1'], `invariant: ${what}`)
    }
  }
})

test("an application race's setup and invariant attack the outside: nothing outside the run changes", async () => {
  for (const t of targets) {
    for (const [what, sql] of attacks(t)) {
      const name = what.replace(/\W+/g, '-')
      const setup = file(`setup-${name}.race.mjs`, `export default { driver: 'postgres', sessions: 2, expect: 'held',
  setup: ['create table mine (id int)', ${JSON.stringify(sql)}],
  session: async (sql) => { await sql\`select 1\` },
  invariant: 'select true as held' }\n`)
      await harmless(t, ['run', setup, '--trials', '1'], `app setup: ${what}`)
      if (!sql.startsWith('select')) continue
      const inv = file(`inv-${name}.race.mjs`, `export default { driver: 'postgres', sessions: 2, expect: 'held',
  setup: ['create table mine (id int)'],
  session: async (sql) => { await sql\`select 1\` },
  invariant: ${JSON.stringify(sql.replace(/^select /, 'select true as held, '))} }\n`)
      await harmless(t, ['run', inv, '--trials', '1'], `app invariant: ${what}`)
    }
  }
})

test("an application race's session cannot give itself the control role back: it logs in as the run role", async () => {
  for (const t of targets) {
    const out = mark('session')
    const f = file('session-reset.race.mjs', `export default { driver: 'postgres', sessions: 1, expect: 'held',
  setup: ['create table mine (id int)'],
  session: async (sql) => { await sql.unsafe("reset role; reset session authorization"); await sql.unsafe(${JSON.stringify(`copy (select 1) to '${out}'`)}) },
  invariant: "select session_user like 'race\\\\_r\\\\_%' as held" }\n`)
    const r = await race(['run', f, '--trials', '1'], { url: t.url })
    assert.ok(!fs.existsSync(out), `${t.name}: no file written`)
    assert.deepEqual(await schemasOf(t.admin, r.pid), [], `${t.name}: the run schema is gone`)
  }
})

test('a run killed with SIGKILL leaves its role, and the next run drops it by its oid', async () => {
  for (const t of targets) {
    const spec = file('slow.spec', `setup { create table mine (id int); }\nsession s1\nstep a { select pg_sleep(30) }\n`)
    const before = await t.admin`select oid::int from pg_roles where rolname like 'race\\_r\\_%'`
    const { spawn } = await import('node:child_process')
    const { BIN } = await import('../support/server.js')
    const child = spawn(process.execPath, [BIN, 'run', spec, '--trials', '1'], { env: { ...process.env, DATABASE_URL: t.url }, stdio: 'ignore' })
    let made: number[] = []
    for (let i = 0; i < 100 && !made.length; i++) {
      await new Promise((r) => setTimeout(r, 100))
      const now = await t.admin`select oid::int from pg_roles where rolname like 'race\\_r\\_%'`
      made = now.map((r) => r.oid).filter((o) => !before.some((b) => b.oid === o))
    }
    assert.ok(made.length, `${t.name}: the run made a role`)
    child.kill('SIGKILL')
    await new Promise((r) => child.on('close', r))
    // The killed run's backends end when the server notices their client is gone.
    // Only the killed run's own: its role's backends and its control backend (named in the role's mark).
    await t.admin`select pg_terminate_backend(pid) from pg_stat_activity where usesysid = any(${made}::oid[])
      or pid in (select (substr(description, 6)::jsonb ->> 'backend')::int from pg_shdescription where objoid = any(${made}::oid[]))`.catch(() => {})
    await new Promise((r) => setTimeout(r, 300))
    const r = await race(['run', 'advisory', '--n', '2', '--trials', '1'], { url: t.url })
    assert.equal(r.code, 0, r.stderr)
    const left = await t.admin`select oid from pg_roles where oid = any(${made}::oid[])`
    assert.equal(left.length, 0, `${t.name}: the killed run's role was dropped`)
  }
})

test("a control role that may not create roles: the run says so in one line and runs as before, under the text guard", async () => {
  for (const t of targets) {
    const plain = `race_test_plain_${tag}`
    const password = randomBytes(8).toString('hex')
    await t.admin.unsafe(`create role ${plain} login password '${password}'; grant create on database "${(await t.admin`select current_database() as d`)[0].d}" to ${plain}`)
    try {
      const u = new URL(t.url)
      u.username = plain
      u.password = password
      // A spec of the user's (race's own scenarios run as the control role in any case).
      const spec = file('plain.spec', `setup { create table mine (id int); }\nsession s1\nstep a { insert into mine values (1) }\n`)
      const r = await race(['run', spec, '--trials', '1'], { url: u.toString() })
      assert.equal(r.code, 0, `${t.name}: ${r.stdout}${r.stderr}`)
      assert.match(r.stderr.trim(), new RegExp(`^race: this role may not create the run role race runs as \\(no CREATEROLE\\): the run's SQL runs as ${plain}, checked by the text guard only$`), t.name)
    } finally {
      const [{ d }] = await t.admin`select current_database() as d`
      await t.admin.unsafe(`drop owned by ${plain}; revoke create on database "${d}" from ${plain}; drop role ${plain}`).catch(() => {})
    }
  }
})

test("race's own scenarios run as the control role, a user's spec as the run role: seen from the server, by each session's login", async () => {
  const { spawn } = await import('node:child_process')
  const { BIN } = await import('../support/server.js')
  const spec = file('held.spec', `setup { create table mine (id int); }\nsession s1\nstep a { insert into mine values (1) }\nstep b { select 1 }\n`)
  for (const t of targets) {
    const [{ me }] = await t.admin`select current_user as me`
    for (const [what, args, app, role] of [
      ['built-in advisory', ['run', 'advisory', '--n', '2'], 'race advisory s1', (u: string) => u === me],
      ['a spec file', ['run', spec], 'race held s1', (u: string) => /^race_r_[0-9a-f]+$/.test(u)],
    ] as const) {
      const child = spawn(process.execPath, [BIN, ...args, '--hold', '20s', '--run-timeout', '1m'], { env: { ...process.env, DATABASE_URL: t.url }, stdio: 'ignore' })
      let users: string[] = []
      for (let i = 0; i < 300 && !users.length; i++) {
        users = (await t.admin`select usename from pg_stat_activity where application_name = ${app} and backend_type = 'client backend'`).map((r) => String(r.usename))
        if (!users.length) await new Promise((r) => setTimeout(r, 50))
      }
      child.kill('SIGINT')
      await new Promise((r) => child.on('close', r))
      assert.equal(users.length, 1, `${t.name}, ${what}: its session was seen`)
      assert.ok(role(users[0]), `${t.name}, ${what}: logged in as ${users[0]}`)
    }
  }
})

test('the run role is created, marked and its oid read in one statement list, and logged in with one statement: a round trip each', async () => {
  for (const t of targets) {
    const control = postgres(t.url, { max: 1, onnotice: () => {} })
    const sent: string[] = []
    // The real connection, its statements counted as they are sent.
    const counted = new Proxy(control, {
      get: (o, k) => (k === 'unsafe' ? (text: string, ...rest: never[]) => (sent.push(text), o.unsafe(text, ...rest)) : Reflect.get(o, k)),
    })
    const made = await makeRunRole({ target: { kind: 'url', url: t.url, label: t.name }, control: counted, connectTimeoutMs: 5000, roleMark: () => ({ test: tag }) }, `race_test_role_${tag}`)
    try {
      assert.ok(made && 'oid' in made, `${t.name}: ${JSON.stringify(made)}`)
      assert.equal(sent.length, 1, `${t.name}: control was sent ${sent.length} statement lists`)
      const [row] = await t.admin`select oid::int as oid from pg_catalog.pg_roles where rolname = ${made.name}`
      assert.equal(made.oid, row?.oid, t.name)
      // Its login's first statement carried the query for its array types too (one message, one round trip): the
      // server's last statement of that backend is both.
      const [last] = await t.admin`select query from pg_catalog.pg_stat_activity where pid = ${made.pid}`
      assert.match(String(last?.query), /pg_type[\s\S]*;\s*select pg_catalog\.pg_backend_pid\(\) as pid$/, `${t.name}: ${last?.query}`)
    } finally {
      if (made && 'oid' in made) {
        await made.sql.end({ timeout: 1 })
        await t.admin.unsafe(dropRoleSql(made.oid))
      }
      await control.end({ timeout: 1 })
    }
  }
})
