/* eslint-disable @typescript-eslint/no-explicit-any -- the drivers are the user's, untyped here */
// Issue 39, "Every verdict earned": application races whose code does something race saw but must not call a
// success. A query error the function swallows (not a rejection), a query sent after the function returned (not a
// step of the next trial), a COMMIT re-sent after the transaction was rolled back (not a commit).
// Against a real server (DATABASE_URL, else embedded PostgreSQL).
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, test } from 'node:test'
import { appScenario } from '../../src/app/scenario.js'
import type { AppRace } from '../../src/app/types.js'
import type { Scenario, Schedule } from '../../src/scenario.js'
import { race, runScenario, useLab } from '../support/server.js'

const ctx = useLab()
const TABLE = 'create table orders (id bigserial primary key, user_id text not null, status text not null)'
const AT_MOST_ONE = "select count(*) <= 1 from orders where status = 'pending'"

let dir: string
before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'race-app-earned-'))
})
after(() => fs.rmSync(dir, { recursive: true, force: true }))

function moduleFile(name: string, body: string): string {
  const file = path.join(dir, name)
  fs.writeFileSync(file, body)
  return file
}

function pgRace(over: Partial<AppRace> & Pick<AppRace, 'session' | 'expect'>, name = 'earned.race.mjs'): Scenario {
  return appScenario({ driver: 'pg', setup: [TABLE], invariant: AT_MOST_ONE, ...over }, path.join(dir, name))
}

const go = (s: Scenario, n: number, schedule: Schedule, o: { permutation?: string; trials?: number } = {}) => runScenario(ctx.lab, s, { n, schedule, ...o })

// ---- item 1: a swallowed undeclared error ---------------------------------------------------------------------------

/** The review's f1: a typo'd table (ordrs) whose 42P01 the code catches, rolls back and returns. */
const SWALLOW = `export default {
  driver: 'pg',
  sessions: 2,
  setup: ['${TABLE}'],
  session: async (db, ctx) => {
    try {
      await db.query('begin')
      const { rows } = await db.query('select count(*)::int as n from ordrs where user_id = $1', [ctx.user])
      if (rows[0].n === 0) await db.query("insert into orders (user_id, status) values ($1, 'pending')", [ctx.user])
      await db.query('commit')
    } catch (e) {
      await db.query('rollback')
    }
  },
  invariant: "${AT_MOST_ONE}",
  expect: 'held',
}
`

test('item 1: a 42P01 the function catches and returns from is no rejection: the trial is unknown, naming it', async () => {
  const swallow = pgRace({
    session: async (db: any, c: any) => {
      try {
        await db.query('begin')
        await db.query('select count(*) from ordrs where user_id = $1', [c.user])
        await db.query('commit')
      } catch {
        await db.query('rollback')
      }
    },
    expect: 'held',
  })
  const [t] = (await go(swallow, 2, 'lockstep')).trials
  assert.deepEqual(t.sessions.map((x) => x.outcome), ['failed', 'failed'])
  assert.deepEqual(t.sessions.map((x) => x.sqlstate), ['42P01', '42P01'])
  assert.equal(t.sessions[0].step, 'q2')
  assert.equal(t.verdict, 'unknown')
  assert.match(t.why, /^s1 caught 42P01 undefined_table \(in step q2\) and returned/)
  assert.equal(t.comparison.matched, false)
  // The same shape with an error the race expects is the application's answer: a 40001 (concurrency control), or a
  // 23505 the module declares as its prevention.
  const unique = pgRace({
    setup: ['create table orders (id bigserial primary key, user_id text not null unique, status text not null)'],
    session: async (db: any, c: any) => {
      try {
        await db.query('begin')
        await db.query("insert into orders (user_id, status) values ($1, 'pending')", [c.user])
        await db.query('commit')
        return 'ok'
      } catch {
        await db.query('rollback')
        return 'conflict'
      }
    },
    prevention: ['23505'],
    expect: 'held',
  })
  const [u] = (await go(unique, 2, 'lockstep')).trials
  assert.deepEqual(u.sessions.map((x) => x.outcome), ['committed', 'rejected'])
  assert.equal(u.verdict, 'prevented', u.why)
})

test('item 1 (CLI): race run and race explore of the swallowed typo exit 3 naming 42P01; nothing says it was retried', async () => {
  const file = moduleFile('f1-swallow-typo.race.mjs', SWALLOW)
  for (const cmd of ['run', 'explore']) {
    const r = await race([cmd, file], { url: ctx.server.url, timeoutMs: 240_000 })
    assert.equal(r.code, 3, `${cmd}: ${r.stdout}${r.stderr}`)
    assert.match(r.stdout + r.stderr, /s1 caught 42P01 undefined_table \(in step q2\) and returned/, cmd)
    assert.doesNotMatch(r.stdout + r.stderr, /retried|\bMATCH\b|HELD in all/, cmd)
  }
})

// ---- item 2: a query sent after the function returned --------------------------------------------------------------

test('item 2: an insert sent from a timer after the function returned makes the trial unknown, and is no step of the next trial', async () => {
  const timer = pgRace({
    session: async (db: any, c: any) => {
      const { rows } = await db.query("select count(*)::int as n from orders where user_id = $1 and status = 'pending'", [c.user])
      if (rows[0].n === 0) setTimeout(() => void db.query("insert into orders (user_id, status) values ($1, 'pending')", [c.user]).catch(() => {}), 50)
    },
    expect: 'held',
  })
  const { trials } = await go(timer, 2, 'lockstep', { trials: 3 })
  for (const t of trials) {
    assert.deepEqual(t.order, ['s1.q1', 's2.q1'])
    assert.deepEqual(t.sessions.map((x) => x.thrown), ['sent a query (q2) after its function returned', 'sent a query (q2) after its function returned'])
    assert.equal(t.verdict, 'unknown')
    assert.match(t.why, /^s1 sent a query \(q2\) after its function returned/)
  }
})

test('item 2: a query an earlier trial left waiting on a promise, run while a later trial holds the connection, is not its step', async () => {
  // Trial 1's s1 leaves a query behind a promise; trial 2's s1 lets it go (its callback runs in trial 1's context).
  let leftOver: (() => void) | undefined
  let trial = 0
  const s = pgRace({
    session: async (db: any, c: any) => {
      if (c.index !== 0) return void (await db.query('select 1'))
      trial++
      if (trial === 1) {
        void new Promise<void>((r) => (leftOver = r)).then(() => db.query('select 2').catch(() => {}))
        await db.query('select 1')
        return
      }
      leftOver?.()
      await new Promise<void>((r) => setImmediate(r))
      await db.query('select 1')
    },
    expect: 'held',
  })
  const { trials } = await go(s, 2, 'lockstep', { trials: 2 })
  assert.equal(trials[0].verdict, 'clean', trials[0].why)
  assert.deepEqual(trials[1].order, ['s1.q1', 's2.q1'])
  assert.equal(trials[1].verdict, 'unknown')
  assert.match(trials[1].why, /^s1 met a query of an earlier trial's s1, sent after that function returned/)
})

test('item 2 (CLI): race run --trials 5 and race explore of the timer insert exit 3, naming the late query', async () => {
  const file = moduleFile(
    'f3-settimeout.race.mjs',
    `export default {
  driver: 'pg',
  sessions: 2,
  setup: ['${TABLE}'],
  session: async (db, ctx) => {
    const { rows } = await db.query("select count(*)::int as n from orders where user_id = $1 and status = 'pending'", [ctx.user])
    if (rows[0].n === 0) setTimeout(() => { db.query("insert into orders (user_id, status) values ($1, 'pending')", [ctx.user]).catch(() => {}) }, 50)
  },
  invariant: "${AT_MOST_ONE}",
  expect: 'held',
}
`,
  )
  for (const args of [['run', file, '--trials', '5', '--json'], ['explore', file]]) {
    const r = await race(args, { url: ctx.server.url, timeoutMs: 240_000 })
    assert.equal(r.code, 3, `${args[0]}: ${r.stdout}${r.stderr}`)
    if (args[0] === 'run') {
      const j = JSON.parse(r.stdout)
      assert.deepEqual(j.trialVerdicts, ['unknown', 'unknown', 'unknown', 'unknown', 'unknown'])
      assert.equal(j.order, 's1.q1 s2.q1')
      assert.match(j.why, /^s1 sent a query \(q2\) after its function returned/)
    } else assert.match(r.stdout + r.stderr, /s1 sent a query \(q2\) after its function returned/)
  }
})
