// The check-then-insert family (advisory-locks §1-§5) against a real server (DATABASE_URL, else embedded
// PostgreSQL 18): the numbers the article tells, and the race under free-running schedules.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { count, runScenario, useLab } from '../support/server.js'

const ctx = useLab()

const outcomes = (t: { sessions: { outcome: string }[] }) => t.sessions.map((s) => s.outcome).sort().join(',')

test('broken: lockstep violates, two pending, both committed (§1)', async () => {
  const [t] = (await runScenario(ctx.lab, 'broken')).trials
  assert.equal(t.verdict, 'anomaly')
  assert.equal(t.invariant.observed, '2 pending')
  assert.equal(outcomes(t), 'committed,committed')
  assert.deepEqual(t.comparison.deviations, [])
})

test('for-update: FOR UPDATE locks nothing that does not exist: still violated, nobody waits (§2)', async () => {
  const [t] = (await runScenario(ctx.lab, 'for-update')).trials
  assert.equal(t.verdict, 'anomaly')
  assert.ok(t.sessions.every((s) => s.waitedMs === 0), 'nobody waited: no row was locked')
})

test('advisory: n=2 gives 1 committed + 1 rejected, the second having waited (§4)', async () => {
  const [t] = (await runScenario(ctx.lab, 'advisory')).trials
  assert.equal(t.verdict, 'serialized')
  assert.equal(outcomes(t), 'committed,rejected')
  assert.ok(t.sessions[1].waitedMs > 0)
  assert.equal(t.comparison.matched, true)
})

test('advisory: n=5 with max-pending 3 gives exactly 3 committed and 2 rejected, lockstep and barrier', async () => {
  for (const schedule of ['lockstep', 'barrier'] as const) {
    const [t] = (await runScenario(ctx.lab, 'advisory', { n: 5, params: { maxPending: 3 }, schedule })).trials
    assert.equal(count(t.sessions, (s) => s.outcome === 'committed'), 3, schedule)
    assert.equal(count(t.sessions, (s) => s.reason === 'pending limit reached'), 2, schedule)
    assert.equal(t.invariant.held, true)
    assert.equal(new Set(t.sessions.map((s) => s.pid)).size, 5, 'five distinct backends')
    assert.deepEqual(t.comparison.deviations, [], schedule)
  }
})

test('unique-index: the loser fails with 23505 unique_violation (§5)', async () => {
  const [t] = (await runScenario(ctx.lab, 'unique-index')).trials
  assert.equal(t.verdict, 'prevented')
  const loser = t.sessions.find((s) => s.outcome === 'failed')!
  assert.equal(loser.sqlstate, '23505')
  assert.equal(loser.condition, 'unique_violation')
})

test('serializable: the loser fails with 40001; with retries it is rejected by the rule (§5.1)', async () => {
  const [t] = (await runScenario(ctx.lab, 'serializable')).trials
  assert.equal(t.verdict, 'prevented')
  assert.equal(t.sessions.find((s) => s.outcome === 'failed')?.sqlstate, '40001')
  const [r] = (await runScenario(ctx.lab, 'serializable', { params: { retries: 3 } })).trials
  assert.equal(outcomes(r), 'committed,rejected')
  assert.ok(r.sessions.some((s) => s.retries >= 1 && s.errors.includes('40001')))
  assert.equal(r.invariant.held, true)
})

test('repeatable-read: held with the guard (each session ran at READ COMMITTED), violated without it (at REPEATABLE READ)', async () => {
  const [g] = (await runScenario(ctx.lab, 'repeatable-read')).trials
  assert.equal(g.verdict, 'serialized')
  assert.deepEqual(g.sessions.map((s) => s.isolation), ['read committed', 'read committed'])
  const [ng] = (await runScenario(ctx.lab, 'repeatable-read', { params: { guard: false } })).trials
  assert.equal(ng.verdict, 'anomaly')
  assert.deepEqual(ng.sessions.map((s) => s.isolation), ['repeatable read', 'repeatable read'])
})

test('lockstep is deterministic: broken violated in 20 of 20 trials', async () => {
  const { trials } = await runScenario(ctx.lab, 'broken', { trials: 20 })
  assert.equal(count(trials, (t) => t.verdict === 'anomaly'), 20)
})

test('advisory holds in 20 of 20 barrier trials with a 50ms window, exactly as documented each time', async () => {
  const { trials } = await runScenario(ctx.lab, 'advisory', { trials: 20, schedule: 'barrier', windowMs: 50 })
  assert.equal(count(trials, (t) => t.invariant.held === true), 20)
  assert.ok(trials.every((t) => t.verdict === 'serialized' && t.comparison.matched), trials.map((t) => t.verdict).join(','))
})

test('broken with a 300ms window violates under the barrier, as the article measured (§1)', async () => {
  const { trials } = await runScenario(ctx.lab, 'broken', { trials: 3, schedule: 'barrier', windowMs: 300 })
  assert.equal(count(trials, (t) => t.verdict === 'anomaly' && t.comparison.matched), 3)
})

test('free-running (barrier, no window): every trial is one of the documented outcomes', async () => {
  for (const [id, n] of [['broken', 5], ['unique-index', 3], ['serializable', 3], ['advisory', 5], ['try-advisory', 4]] as const) {
    const { trials } = await runScenario(ctx.lab, id, { trials: 5, schedule: 'barrier', n })
    for (const t of trials) assert.equal(t.comparison.matched, true, `${id} n=${n}: ${t.verdict}, ${t.comparison.deviations.join('; ')}`)
  }
})

test('the run schema is gone after a run', async () => {
  const out = await runScenario(ctx.lab, 'advisory')
  const rows = await ctx.lab.control`select 1 from pg_namespace where nspname = ${out.schema}`
  assert.equal(rows.length, 0)
})
