// race check as a role that is not a superuser, on the PostgreSQL 15 server of this machine (a role of this
// test's own, created and dropped here): a case whose sessions set deadlock_timeout (superuser-only) is skipped
// with its reason, in the table, the JSON and the JUnit file, and the other cases run; a skipped case is not a
// pass (only skipped cases: exit 3); a role granted SET on the parameter (PostgreSQL 15+) runs it.
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, test } from 'node:test'
import postgres, { type Sql } from 'postgres'
import { race, schemasOf } from '../support/server.js'
import { NEEDS, junitProblems } from '../support/tools.js'

const PG15 = process.env.RACE_TEST_PG15_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const role = `race_test_plain_${randomBytes(4).toString('hex')}`
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'race-check-role-'))
let admin: Sql | undefined
let why: string | undefined
let roleUrl = ''

before(async () => {
  const sql = postgres(PG15, { max: 1, onnotice: () => {}, connect_timeout: 5 })
  try {
    const [r] = await sql`select current_setting('server_version_num')::int as v, (select rolsuper from pg_roles where rolname = current_user) as su, current_database() as db`
    if (!r.su) why = `${PG15} is not a superuser connection: it cannot create the test's role`
    else if (Number(r.v) < 150000) why = `${PG15} is PostgreSQL ${r.v}: the GRANT SET ON PARAMETER case needs 15+`
    else {
      await sql.unsafe(`create role ${role} login; grant create on database "${r.db}" to ${role}`)
      const u = new URL(PG15)
      u.username = role
      u.password = ''
      roleUrl = u.toString()
      admin = sql
      return
    }
  } catch (e) {
    why = `PostgreSQL 15 at ${PG15} does not answer (${(e as Error).message})`
  }
  await sql.end({ timeout: 1 })
})

after(async () => {
  if (admin) {
    await admin.unsafe(`drop owned by ${role}; drop role ${role}`)
    await admin.end({ timeout: 1 })
  }
  fs.rmSync(dir, { recursive: true, force: true })
})

interface CheckDoc {
  results: { scenario: string; case: string; matched: boolean }[]
  skipped: { scenario: string; case: string; why: string }[]
  exitCode: number
}

test('a case needing deadlock_timeout is skipped with its reason (JSON, JUnit) while the others run and match', async (t) => {
  if (why) return t.skip(why)
  const junit = path.join(dir, 'one.xml')
  const r = await race(['check', 'deadlock', 'advisory', '--json', '--junit', junit], { url: roleUrl, timeoutMs: 300_000 })
  assert.equal(r.code, 0, r.stdout + r.stderr)
  const doc = JSON.parse(r.stdout) as CheckDoc
  assert.deepEqual(doc.results.map((x) => [x.scenario, x.matched]), [['advisory', true], ['advisory', true]])
  const skipped = doc.skipped.filter((x) => x.scenario === 'deadlock')
  assert.deepEqual(skipped.map((x) => x.case), ['default', 'ordered'])
  for (const x of skipped) assert.match(x.why, /sets? deadlock_timeout, which only a superuser may set .*GRANT SET ON PARAMETER deadlock_timeout/)
  const xml = fs.readFileSync(junit, 'utf8')
  assert.match(xml, /<testsuite [^>]*tests="4" failures="0" errors="0" skipped="2"/)
  assert.match(xml, /<testcase classname="race\.check\.deadlock" name="default" time="0\.000">\n\s*<skipped message="its sessions set deadlock_timeout/)
  if (!NEEDS.xmllint) assert.equal(junitProblems(junit), '', 'the JUnit file with <skipped> is valid against the schema')
  assert.deepEqual(await schemasOf(admin!, r.pid), [])
})

test('only cases this role cannot run: nothing was checked, exit 3 (a skip is never a pass); the table says why', async (t) => {
  if (why) return t.skip(why)
  const r = await race(['check', 'deadlock'], { url: roleUrl, timeoutMs: 300_000 })
  assert.equal(r.code, 3, r.stdout + r.stderr)
  assert.match(r.stdout, /skipped: deadlock \(default\): its sessions set deadlock_timeout/)
  assert.match(r.stdout, /nothing could be checked: all 2 skipped/)
})

test('granted SET ON PARAMETER deadlock_timeout, the same role runs the deadlock cases', async (t) => {
  if (why) return t.skip(why)
  await admin!.unsafe(`grant set on parameter deadlock_timeout to ${role}`)
  const r = await race(['check', 'deadlock', '--json'], { url: roleUrl, timeoutMs: 300_000 })
  assert.equal(r.code, 0, r.stdout + r.stderr)
  const doc = JSON.parse(r.stdout) as CheckDoc
  assert.deepEqual(doc.skipped, [])
  assert.deepEqual(doc.results.map((x) => [x.case, x.matched]), [['default', true], ['ordered', true]])
})
