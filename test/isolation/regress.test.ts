// race spec in pg_regress's role: each spec in a database of its own (as pg_isolation_regress creates its
// database), roles and schemas allowed, a damaged catalog dropped with the database, prepared transactions on
// race's own server, application_name isolation/<spec>, `unused step name:` lines in --results, one spec's
// refusal or failure never stopping the others, and the databases a killed run left reaped by the next run
// (never a live run's). Specs are this file's own, written to a temporary folder.
import assert from 'node:assert/strict'
import { spawn, type ChildProcess } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, test } from 'node:test'
import postgres, { type Sql } from 'postgres'
import { BIN, race, useServer, type TestServer } from '../support/server.js'

let server: TestServer
let admin: Sql
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'race-regress-test-'))
const tag = `${process.pid}_${Date.now().toString(36)}`
const role = `race_regress_role_${tag}`
const plain = `race_regress_plain_${tag}`

before(async () => {
  server = await useServer()
  admin = postgres(server.url, { max: 1, onnotice: () => {} })
})

after(async () => {
  await admin.unsafe(`drop role if exists "${role}"`).catch(() => {})
  await admin.unsafe(`drop owned by "${plain}"`).catch(() => {})
  await admin.unsafe(`drop role if exists "${plain}"`).catch(() => {})
  await admin.end({ timeout: 1 })
  await server.stop()
  fs.rmSync(dir, { recursive: true, force: true })
})

function spec(name: string, text: string): string {
  const f = path.join(dir, `${name}.spec`)
  fs.writeFileSync(f, text)
  return f
}

async function databaseExists(name: string): Promise<boolean> {
  return (await admin`select 1 from pg_database where datname = ${name}`).length > 0
}

/** The database a transcript says it ran in (its spec prints current_database() in a step named db). */
function databaseOf(out: string): string {
  const m = /^(race_spec_[0-9a-f]+|isolation_regression)\s*$/m.exec(out)
  assert.ok(m, `no database name in:\n${out}`)
  return m[1]
}

/**
 * race spec FILE on the test server, its stdout watched as it comes (`onOut` with all of it so far, and the child);
 * bounded: a race that never ends is killed, and the test fails on its exit code.
 */
async function watchSpec(f: string, onOut: (stdout: string, child: ChildProcess) => void): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1' }
  delete env.DATABASE_URL
  const child = spawn(process.execPath, [BIN, 'spec', f, '--database-url', server.url], { env, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stderr.on('data', (d) => (stderr += d))
  const code = await new Promise<number | null>((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 90_000)
    child.stdout.on('data', (d) => {
      stdout += d
      onOut(stdout, child)
    })
    child.on('close', (c) => (clearTimeout(timer), resolve(c)))
  })
  return { code, stdout, stderr }
}

test("on race's own server a spec runs as under pg_regress: its own database, public.x, pg_regress's settings, prepared transactions, isolation/<spec>", async () => {
  const f = spec(
    'own-server',
    `setup { create table x (a int); }
session a
step e { explain (costs off, verbose) select * from x; }
step s { select current_database(), current_setting('lc_messages') as msg, current_setting('bytea_output') as bytea,
                current_setting('timezone_abbreviations') as abbrev, current_setting('max_prepared_transactions') as prep; }
step b { begin; insert into x values (1); }
step p { prepare transaction 'race_regress_p'; }
session z
step app { select current_setting('application_name') as app, count(*) from x; }
step c { commit prepared 'race_regress_p'; }
step unused_one { select 1; }
permutation e s b p app c app
`,
  )
  const out = path.join(dir, 'out-own')
  const r = await race(['spec', f, '--results', out], { timeoutMs: 120_000 })
  assert.equal(r.code, 0, r.stderr + r.stdout)
  const text = fs.readFileSync(path.join(out, 'own-server.out'), 'utf8')
  // pg_regress captures isolationtester's stderr with its stdout: the unused step comes first, as it prints it.
  assert.ok(text.startsWith('unused step name: unused_one\nParsed test spec with 2 sessions\n'), text)
  assert.match(text, /^Seq Scan on public\.x\s*$/m)
  assert.match(text, /^isolation_regression\|C\s*\|hex\s*\|Default\s*\|\s*2$/m)
  assert.match(text, /^step p: prepare transaction 'race_regress_p';\nstep app:/m)
  assert.match(text, /^isolation\/own-server\/z\|\s*0$/m)
  assert.match(text, /^isolation\/own-server\/z\|\s*1$/m)
  assert.doesNotMatch(text, /ERROR|race_spec_|race:/)
})

test('a spec may create a role and a schema: it runs in a database race drops, with the role it left', async () => {
  const f = spec(
    'roles',
    `setup { create role "${role}"; create schema s1; create table s1.t (a int); grant usage on schema s1 to "${role}"; grant select on s1.t to "${role}"; }
session a
step db { select current_database(); }
step who { set role "${role}"; }
step r { select count(*) from s1.t; }
step back { reset role; }
`,
  )
  const out = path.join(dir, 'out-roles')
  const r = await race(['spec', f, '--results', out, '--database-url', server.url], { timeoutMs: 120_000 })
  assert.equal(r.code, 0, r.stderr + r.stdout)
  // pg_regress's conditions, said only on a terminal (the JSON's "in" says it); the fallback would be said always.
  assert.doesNotMatch(r.stderr, /schema of its own/)
  const text = fs.readFileSync(path.join(out, 'roles.out'), 'utf8')
  assert.match(text, /^step r: select count\(\*\) from s1\.t;\ncount\n-----\n {4}0\n\(1 row\)/m)
  const db = databaseOf(text)
  assert.equal(await databaseExists(db), false, `${db} was left`)
  assert.equal((await admin`select 1 from pg_roles where rolname = ${role}`).length, 0, `role ${role} was left`)
})

test('a spec that damages its catalog: the database is dropped all the same, and the next spec runs', async () => {
  const damage = spec(
    'damage',
    `setup { create table victim (a int); }
session a
step db { select current_database(); }
step kill { delete from pg_class where relname = 'victim'; }
step look { select * from victim; }
`,
  )
  const next = spec('after-damage', `session a\nstep db { select current_database(); }\n`)
  const out = path.join(dir, 'out-damage')
  const r = await race(['spec', damage, next, '--results', out, '--database-url', server.url], { timeoutMs: 120_000 })
  assert.equal(r.code, 0, r.stderr + r.stdout)
  assert.match(r.stdout, /^damage\s+\.\.\. ok/m)
  assert.match(r.stdout, /^after-damage\s+\.\.\. ok/m)
  for (const name of ['damage', 'after-damage']) {
    const db = databaseOf(fs.readFileSync(path.join(out, `${name}.out`), 'utf8'))
    assert.equal(await databaseExists(db), false, `${db} was left`)
  }
})

test('without CREATEDB a spec runs in a guarded schema; a refused spec in the middle of a call stops nothing, the summary says what happened to each', async () => {
  const password = `pw_${tag}`
  await admin.unsafe(`create role "${plain}" login password '${password}'`)
  const database = (await admin`select current_database() as d`)[0].d as string
  await admin.unsafe(`grant create on database "${database}" to "${plain}"`)
  const u = new URL(server.url)
  u.username = plain
  u.password = password
  const first = spec('first', `setup { create table t (a int); }\nsession a\nstep r { select count(*) from t; }\n`)
  const refused = spec('refused', `setup { create schema race_regress_refused_${tag}; }\nsession a\nstep r { select 1; }\n`)
  const broken = spec('broken', `session a\nstep r { select 1; \n`)
  const last = spec('last', `setup { create table t (a int); }\nsession a\nstep r { select count(*) from t; }\n`)
  const out = path.join(dir, 'out-plain')
  const r = await race(['spec', first, refused, broken, last, '--results', out, '--database-url', u.toString()], { timeoutMs: 120_000 })
  assert.equal(r.code, 2, r.stderr + r.stdout)
  assert.match(r.stderr, /^race spec: each spec runs in a schema of its own in .*this role may not create databases/m)
  assert.match(r.stdout, /^first\s+\.\.\. ok/m)
  assert.match(r.stdout, /^refused\s+\.\.\. error: .*refused\.spec:1: setup block 1 creates schema race_regress_refused_/m)
  assert.match(r.stdout, /^broken\s+\.\.\. error: .*broken\.spec/m)
  assert.match(r.stdout, /^last\s+\.\.\. ok/m)
  assert.match(r.stdout, /^4 specs: 2 ok, 2 error$/m)
  assert.match(fs.readFileSync(path.join(out, 'last.out'), 'utf8'), /^step r: select count\(\*\) from t;\ncount/m)
  assert.match(fs.readFileSync(path.join(out, 'refused.out'), 'utf8'), /^race: .*creates schema race_regress_refused_/m)
  assert.equal((await admin`select 1 from pg_namespace where nspname = ${`race_regress_refused_${tag}`}`).length, 0)
  assert.doesNotMatch(r.stdout + r.stderr, /\n\s+at /, 'no stack trace')
})

test("a database a killed run left is dropped by the next run; one whose run is alive is not", async () => {
  const dead = `race_spec_dead${tag.replace(/[^a-z0-9]/g, '')}`.slice(0, 60)
  const live = `race_spec_live${tag.replace(/[^a-z0-9]/g, '')}`.slice(0, 60)
  const [me] = await admin`select pg_backend_pid() as pid, (select backend_start::text from pg_stat_activity where pid = pg_backend_pid()) as started`
  const mark = (backend: number, start: string) => `race:${JSON.stringify({ pid: 1, host: 'x', backend, backendStart: start, keep: false })}`
  try {
    await admin.unsafe(`create database "${dead}" template template0`)
    // A backend that no longer exists: pid 0 never names one.
    await admin.unsafe(`comment on database "${dead}" is '${mark(0, '2000-01-01 00:00:00+00')}'`)
    await admin.unsafe(`create database "${live}" template template0`)
    await admin.unsafe(`comment on database "${live}" is '${mark(Number(me.pid), String(me.started))}'`)
    const f = spec('reaper', `session a\nstep r { select 1; }\n`)
    const r = await race(['spec', f, '--database-url', server.url], { timeoutMs: 120_000 })
    assert.equal(r.code, 0, r.stderr + r.stdout)
    assert.match(r.stderr, new RegExp(`removed \\d+ database\\(s\\) left by race runs that were killed: .*${dead}`))
    assert.equal(await databaseExists(dead), false)
    assert.equal(await databaseExists(live), true)
  } finally {
    await admin.unsafe(`drop database if exists "${dead}"`)
    await admin.unsafe(`drop database if exists "${live}"`)
  }
})

test('Ctrl-C while a step waits for a session that cannot go on: race ends its backends, drops the database and exits 130', async () => {
  const f = spec(
    'stuck',
    `setup { create table t (a int); }
session a
step db { select current_database(); }
step l { begin; lock t; }
step c { commit; }
session b
step w { begin; lock t; }
step w2 { select 1; }
permutation db l w w2 c
`,
  )
  // The step is reported waiting: the transcript says so before race polls the busy session.
  const { code, stdout, stderr } = await watchSpec(f, (out, child) => {
    if (out.includes('step w: begin; lock t; <waiting ...>')) child.kill('SIGINT')
  })
  assert.equal(code, 130, stdout + stderr)
  const db = databaseOf(stdout)
  assert.equal(await databaseExists(db), false, `${db} was left`)
})

test('what one spec leaves in its database (a table, a comment on a system function) is never seen by the next spec', async () => {
  const leave = spec('leave', `setup { create table leftover (a int); comment on function pg_catalog.now() is 'race was here'; }\nsession a\nstep r { select count(*) from leftover; }\n`)
  const tidy = spec('tidy', `setup { create table tidy (a int); }\nteardown { drop table tidy; }\nsession a\nstep r { select count(*) from tidy; }\n`)
  const look = spec('look', `session a\nstep t { select count(*) from leftover; }\nstep c { select coalesce(obj_description('pg_catalog.now()'::regprocedure, 'pg_proc'), 'none') as comment; }\n`)
  for (const url of [undefined, server.url]) {
    const out = path.join(dir, `out-leave-${url ? 'url' : 'own'}`)
    const r = await race(['spec', leave, look, tidy, look, '--results', out, ...(url ? ['--database-url', url] : [])], { timeoutMs: 120_000 })
    assert.equal(r.code, 0, r.stderr + r.stdout)
    const text = fs.readFileSync(path.join(out, 'look.out'), 'utf8') // the last look, after tidy; the first ran right after leave
    assert.match(text, /^ERROR: {2}relation "leftover" does not exist/m, text)
    assert.match(text, /^current transaction time\n\(1 row\)/m, text)
    assert.doesNotMatch(text, /race was here/)
  }
})

test("on a server of the user's a spec's database takes pg_regress's name while no database holds it (a spec may grant on it); else it keeps race_spec_<hex> and the other is untouched", async (t) => {
  if (await databaseExists('isolation_regression')) return t.skip('a database isolation_regression exists on this server (another run or pg_regress holds the name)')
  const f = spec('named', `session a\nstep db { select current_database(); }\nstep g { grant temp on database isolation_regression to public; }\n`)
  const out = path.join(dir, 'out-named')
  const r = await race(['spec', f, f, '--results', out, '--database-url', server.url], { timeoutMs: 120_000 })
  assert.equal(r.code, 0, r.stderr + r.stdout)
  const text = fs.readFileSync(path.join(out, 'named.out'), 'utf8')
  assert.equal(databaseOf(text), 'isolation_regression')
  assert.match(text, /^step g: grant temp on database isolation_regression to public;\n(?!ERROR)/m, text)
  assert.equal(await databaseExists('isolation_regression'), false, 'race dropped the database that held the name')
  // Someone else's isolation_regression (no race mark): race neither takes the name nor touches that database.
  await admin.unsafe(`create database isolation_regression template template0`)
  try {
    const which = spec('which', `session a\nstep db { select current_database(); }\n`)
    const r2 = await race(['spec', which, '--results', out, '--database-url', server.url], { timeoutMs: 120_000 })
    assert.equal(r2.code, 0, r2.stderr + r2.stdout)
    const db = databaseOf(fs.readFileSync(path.join(out, 'which.out'), 'utf8'))
    assert.match(db, /^race_spec_[0-9a-f]+$/)
    assert.equal(await databaseExists(db), false, `${db} was left`)
    assert.equal(await databaseExists('isolation_regression'), true, "the other database is left alone")
  } finally {
    await admin.unsafe(`drop database if exists isolation_regression`)
  }
})

test('race spec | head: the reader goes away, race stops quietly as under SIGPIPE (exit 141), its database dropped', async () => {
  const f = spec('piped', `session a\nstep db { select current_database(); }\nstep many { select g from generate_series(1, 20000) g; }\nstep more { select g from generate_series(1, 20000) g; }\n`)
  let db = ''
  const { code, stdout, stderr } = await watchSpec(f, (out, child) => {
    // As head does: read until the database's name is there, then close the pipe.
    const m = /^(race_spec_[0-9a-f]+|isolation_regression)\s*$/m.exec(out)
    if (m && !db) {
      db = m[1]
      child.stdout!.destroy()
    }
  })
  assert.ok(db, stdout)
  assert.equal(code, 141, stderr)
  assert.equal(stderr, '', 'nothing said: the reader asked for no more')
  assert.equal(await databaseExists(db), false, `${db} was left`)
})
