// A spec that names pg_regress's database (PostgreSQL's intra-grant-inplace-db grants on isolation_regression and
// expects its own VACUUM (FREEZE) to wait for that grant) against the real isolationtester on the same server.
// race spec on a server of the user's takes that name for the spec's database while it is free; while another
// database holds it, the spec's statements would act on that other database and its VACUUM would not wait: race
// refuses the spec in one line (exit 3) and leaves that database alone, rather than print a transcript
// isolationtester would not; given that database itself (--database-url .../isolation_regression), race runs the spec
// in it, as isolationtester does. The spec is this file's own; the database holding the name is the test's own.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, test } from 'node:test'
import postgres, { type Sql } from 'postgres'
import { REGRESS_DATABASE, REGRESS_DATABASE_SETTINGS } from '../../src/tester/database.js'
import { NATIVE, regressEnv, runTo, testerFor } from '../support/conformance.js'
import { BIN, useServer, type TestServer } from '../support/server.js'

let server: TestServer
let admin: Sql
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'race-regress-name-'))
/** The oid of the isolation_regression this test made, while it exists. */
let ours = 0

before(async () => {
  server = await useServer()
  admin = postgres(server.url, { max: 1, onnotice: () => {} })
})

/** Drops the database this test made, by its oid (whatever holds the name now is left alone). */
async function dropOurs(): Promise<void> {
  if (!ours) return
  const [d] = await admin`select datname from pg_catalog.pg_database where oid = ${ours}`
  if (d) await admin.unsafe(`drop database "${String(d.datname).replace(/"/g, '""')}" with (force)`)
  ours = 0
}

after(async () => {
  await dropOurs().catch(() => {})
  await admin.end({ timeout: 1 })
  await server.stop()
  fs.rmSync(dir, { recursive: true, force: true })
})

// s1 changes the row of pg_database that names pg_regress's database and holds it uncommitted; s2's
// VACUUM (FREEZE) of its own database updates that database's row in place, so it waits for s1 only when the
// two are the same database.
const SPEC = `session s1
step b1 { begin; }
step alter1 { alter database ${REGRESS_DATABASE} connection limit 77; }
step c1 { commit; }
session s2
step vac2 { vacuum (freeze); }
permutation b1 alter1 vac2(c1) c1
`

test("a spec naming pg_regress's database: race prints isolationtester's transcript, in that database when it is the one given, or refuses while another database holds the name (never acts on it)", async (t) => {
  const [v] = await admin`select current_setting('server_version_num')::int as v, (select rolsuper or rolcreatedb from pg_catalog.pg_roles where rolname = current_user) as may`
  const tester = testerFor(Number(v.v))
  if (!tester || !v.may) {
    t.skip(!tester ? `no isolationtester for this server's version on this machine` : 'this role may not create a database')
    return
  }
  const file = path.join(dir, 'names-regress-db.spec')
  fs.writeFileSync(file, SPEC)
  const raceEnv: NodeJS.ProcessEnv = { ...regressEnv(), PGAPPNAME: 'isolation/names-regress-db' }
  const env = { ...raceEnv, LD_LIBRARY_PATH: path.join(NATIVE, 'lib') }

  // As pg_regress makes it: from template0, with its settings. Held by someone else: nothing here can be compared.
  try {
    await admin.unsafe(`create database ${REGRESS_DATABASE} template template0`)
  } catch (e) {
    if ((e as { code?: string }).code === '42P04') {
      t.skip(`another client holds ${REGRESS_DATABASE} on this server`)
      return
    }
    throw e
  }
  const [d] = await admin`select oid::int as oid from pg_catalog.pg_database where datname = ${REGRESS_DATABASE}`
  ours = Number(d.oid)
  await admin.unsafe(REGRESS_DATABASE_SETTINGS.map(([k, val]) => `alter database ${REGRESS_DATABASE} set ${k} to '${val}'`).join(';'))

  // The real isolationtester in it, as pg_isolation_regress runs it.
  const u = new URL(server.url)
  u.pathname = `/${REGRESS_DATABASE}`
  const oracleFile = path.join(dir, 'isolationtester.out')
  assert.equal(await runTo(tester, [u.toString()], env, file, oracleFile, 120_000), 0, fs.readFileSync(oracleFile, 'latin1'))
  const oracle = fs.readFileSync(oracleFile, 'latin1')
  assert.match(oracle, /step vac2: vacuum \(freeze\); <waiting \.\.\.>\n/, `the spec shows the wait under isolationtester:\n${oracle}`)
  await admin.unsafe(`alter database ${REGRESS_DATABASE} connection limit -1`)

  // While the test's database holds the name: refused in one line, and the test's database untouched.
  const heldOut = path.join(dir, 'race-held.out')
  const held = await runTo(process.execPath, [BIN, 'spec', file, '--database-url', server.url], raceEnv, null, heldOut, 120_000)
  const heldText = fs.readFileSync(heldOut, 'utf8')
  assert.equal(held, 3, heldText)
  assert.match(heldText, new RegExp(`^race: .*names-regress-db\\.spec: the spec names pg_regress's database ${REGRESS_DATABASE}, and another database on .* has that name \\(not this run's\\)`, 'm'))
  assert.doesNotMatch(heldText, /step vac2/, 'no transcript that isolationtester would not print')
  const [still] = await admin`select oid::int as oid, datconnlimit from pg_catalog.pg_database where datname = ${REGRESS_DATABASE}`
  assert.deepEqual({ oid: Number(still?.oid), limit: Number(still?.datconnlimit) }, { oid: ours, limit: -1 }, "the test's database is the same one, unchanged")

  // Given that database itself (as pg_isolation_regress gives isolationtester its database): the spec runs in it and
  // race prints what isolationtester printed there.
  const givenOut = path.join(dir, 'race-given.out')
  const given = await runTo(process.execPath, [BIN, 'spec', file, '--database-url', u.toString()], raceEnv, null, givenOut, 120_000)
  const givenText = fs.readFileSync(givenOut, 'latin1')
  assert.equal(given, 0, givenText)
  assert.equal(givenText, oracle)
  const [same] = await admin`select oid::int as oid, datconnlimit from pg_catalog.pg_database where datname = ${REGRESS_DATABASE}`
  assert.deepEqual({ oid: Number(same?.oid), limit: Number(same?.datconnlimit) }, { oid: ours, limit: 77 }, 'the spec ran in the database given (its ALTER DATABASE is there, as under isolationtester)')
  await admin.unsafe(`alter database ${REGRESS_DATABASE} connection limit -1`)

  // The name free: race's database takes it, and race prints what isolationtester printed.
  await dropOurs()
  const freeOut = path.join(dir, 'race-free.out')
  const free = await runTo(process.execPath, [BIN, 'spec', file, '--database-url', server.url], raceEnv, null, freeOut, 120_000)
  const freeText = fs.readFileSync(freeOut, 'latin1')
  if (free === 3 && /has that name \(not this run's\)/.test(freeText)) {
    // Another client took the name between the two: refused as above, never a different transcript.
    t.diagnostic(`another client took ${REGRESS_DATABASE} meanwhile: ${freeText.trim()}`)
    return
  }
  assert.equal(free, 0, freeText)
  assert.equal(freeText, oracle)
})
