// What the code under test does to the whole process is contained to its session: process.exit does not exit race
// (the session fails, "called process.exit(0)", the run is undecided and cleans up, process.exit is restored), an
// uncaught exception or unhandled rejection from a session is that session's failure (never race's "internal
// error"), and under run() an exception from elsewhere in the caller's process is not the race's failure: the race
// goes on and the process's own listener gets it. Against the test server (DATABASE_URL, else embedded), and the
// embedded server race starts itself (its folder must be gone after).
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import { after, before, test } from 'node:test'
import { run } from '../../src/index.js'
import { leftBy, useOutside } from '../support/faults.js'
import { runDirsOf } from '../support/procs.js'
import { ROOT, race } from '../support/server.js'

const ctx = useOutside()
let dir: string
before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'race-app-contain-'))
})
after(() => fs.rmSync(dir, { recursive: true, force: true }))

function moduleFile(name: string, session: string): string {
  const file = path.join(dir, name)
  fs.writeFileSync(
    file,
    `export default {
  driver: 'pg',
  sessions: 2,
  setup: ['create table t (id int)'],
  session: ${session},
  invariant: 'select true',
  expect: 'held',
}
`,
  )
  return file
}

const EXITS = `async (db, ctx) => {
    await db.query('insert into t values (1)')
    if (ctx.index === 0) process.exit(0)
    await db.query('select 1')
  }`

test('process.exit(0) in a session does not exit race: the session fails, the run is undecided (exit 3), the schema is dropped', async () => {
  const file = moduleFile('exit.race.mjs', EXITS)
  const r = await race(['run', file, '--database-url', ctx.server.url])
  assert.equal(r.code, 3, r.stdout + r.stderr)
  assert.match(r.stdout, /s1 called process\.exit\(0\) in step q1/)
  assert.match(r.stdout, /s2\s+│\s*\d+\s*│ committed/)
  assert.doesNotMatch(r.stderr, /internal error/)
  assert.deepEqual(await leftBy(ctx.sql, r.pid), [])
})

test('process.exit(0) in a session on the embedded server: race stops it and removes its folder', async () => {
  const file = moduleFile('exit-embedded.race.mjs', EXITS)
  const r = await race(['run', file], { timeoutMs: 120_000 })
  assert.equal(r.code, 3, r.stdout + r.stderr)
  assert.match(r.stdout, /PostgreSQL \d+\S* \(embedded/, 'the server race started itself')
  assert.match(r.stdout, /called process\.exit\(0\)/)
  assert.deepEqual(runDirsOf(r.pid), [], 'the embedded server and its folder are gone')
})

test('an uncaught exception or unhandled rejection from a session is that session failure, named; not an internal error', async () => {
  const thrower = moduleFile(
    'uncaught.race.mjs',
    `async (db, ctx) => {
    await db.query('insert into t values (1)')
    if (ctx.index === 0) setTimeout(() => { throw new TypeError('boom from a timer') }, 1)
    await new Promise((r) => setTimeout(r, 50))
    await db.query('select 1')
  }`,
  )
  const r = await race(['run', thrower, '--database-url', ctx.server.url])
  assert.equal(r.code, 3, r.stdout + r.stderr)
  assert.match(r.stdout, /s1 left an uncaught exception TypeError: boom from a timer/)
  assert.doesNotMatch(r.stderr, /internal error|please report/)
  assert.deepEqual(await leftBy(ctx.sql, r.pid), [])
  const rejecter = moduleFile(
    'unhandled.race.mjs',
    `async (db, ctx) => {
    await db.query('insert into t values (1)')
    if (ctx.index === 1) Promise.reject(new RangeError('nobody awaits me'))
    await new Promise((r) => setTimeout(r, 50))
    await db.query('select 1')
  }`,
  )
  const u = await race(['run', rejecter, '--database-url', ctx.server.url])
  assert.equal(u.code, 3, u.stdout + u.stderr)
  assert.match(u.stdout, /s2 left an unhandled rejection RangeError: nobody awaits me/)
  assert.doesNotMatch(u.stderr, /internal error|please report/)
})

test('run(): process.exit in a session leaves the caller running; undecided (exit 3), process.exit restored, nothing left', async () => {
  const exit = process.exit
  const file = moduleFile('exit-api.race.mjs', EXITS)
  const r = await run(file, { databaseUrl: ctx.server.url })
  assert.equal(r.exitCode, 3, r.text)
  assert.equal(r.ok, false)
  assert.match(r.text, /called process\.exit\(0\)/)
  assert.equal(process.exit, exit, 'process.exit is the process own again')
  assert.deepEqual(await leftBy(ctx.sql, process.pid), [])
})

test('run(): an exception from elsewhere in the caller process is not the race failure; the process own listener gets it', () => {
  // In a process of its own: the test runner's listeners would take the exception for this test's failure.
  const file = moduleFile(
    'plain.race.mjs',
    `async (db) => {
    await db.query('insert into t values (1)')
    await new Promise((r) => setTimeout(r, 100))
    await db.query('select 1')
  }`,
  )
  const script = path.join(dir, 'caller.mjs')
  fs.writeFileSync(
    script,
    `import { run } from ${JSON.stringify(pathToFileURL(path.join(ROOT, 'dist', 'src', 'index.js')).href)}
const seen = []
process.on('uncaughtException', (e) => seen.push('uncaught ' + e.message))
process.on('unhandledRejection', (e) => seen.push('unhandled ' + e.message))
// Not the race's: started by the caller, outside any session.
setTimeout(() => { throw new Error('unrelated exception') }, 30)
setTimeout(() => { Promise.reject(new Error('unrelated rejection')) }, 40)
try {
  const r = await run(${JSON.stringify(file)}, { databaseUrl: ${JSON.stringify(ctx.server.url)} })
  console.log(JSON.stringify({ exitCode: r.exitCode, verdict: r.verdict, seen }))
} catch (e) {
  console.log(JSON.stringify({ error: e.message, seen }))
}
`,
  )
  const p = spawnSync(process.execPath, [script], { encoding: 'utf8', timeout: 60_000 })
  const out = JSON.parse(p.stdout.trim().split('\n').pop() ?? '{}')
  assert.equal(out.error, undefined, p.stdout + p.stderr)
  assert.equal(out.exitCode, 0, p.stdout + p.stderr)
  assert.deepEqual(out.seen, ['uncaught unrelated exception', 'unhandled unrelated rejection'])
  assert.equal(p.status, 0)
})
