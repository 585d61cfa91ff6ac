// The isolation-levels article's scenarios, the anomaly x level matrix, and explicit permutations, against a
// real server (DATABASE_URL, else embedded PostgreSQL 18).
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { run } from '../../src/engine/run.js'
import { UsageError } from '../../src/errors.js'
import { cellOf } from '../../src/commands/matrix.js'
import { matrixRows } from '../../src/commands/matrix.js'
import { plan } from '../../src/plan.js'
import { clean, defineScenario } from '../../src/scenario.js'
import type { SessionReport } from '../../src/engine/types.js'
import { count, race, runScenario, useLab } from '../support/server.js'

const ctx = useLab()

const s = (o: Partial<SessionReport>): SessionReport =>
  ({ name: 't1', pid: 1, outcome: 'committed', waitedMs: 0, ms: 1, retries: 0, errors: [], isolation: null, commitTag: null, ...o }) as SessionReport
const ok = { matched: true, deviations: [] }

test('matrix cells (pure): the SQLSTATE a session failed with is in the cell; the comparison decides the deviation', () => {
  const docs = [{ verdict: 'prevented' as const, who: { t1: 'committed', t2: '40001' }, why: 'x' }]
  const prevented = { verdict: 'prevented' as const, sessions: [s({}), s({ name: 't2', outcome: 'failed', sqlstate: '40001', errors: ['40001'] })], comparison: ok }
  assert.deepEqual(cellOf(prevented, docs), { happened: 'prevented 40001', verdict: 'prevented', documented: 'prevented 40001', deviation: false, deviations: [] })
  const bad = { matched: false, deviations: ['t2: documented 40001, got 40P01'] }
  const deadlock = { verdict: 'prevented' as const, sessions: [s({ name: 't2', outcome: 'failed', sqlstate: '40P01', errors: ['40P01'] })], comparison: bad }
  assert.deepEqual(cellOf(deadlock, docs).deviations, ['t2: documented 40001, got 40P01'])
  assert.equal(cellOf(deadlock, docs).happened, 'prevented 40P01')
  const retried = { verdict: 'prevented' as const, sessions: [s({ retries: 1, errors: ['40001'] })], comparison: ok }
  assert.equal(cellOf(retried, docs).happened, 'prevented 40001')
  assert.equal(cellOf({ verdict: 'clean', sessions: [], comparison: ok }, [{ verdict: 'clean', who: {}, why: '' }]).documented, 'clean')
})

test('every cell of the matrix behaves exactly as documented', async () => {
  const deviations: string[] = []
  for (const scenario of await matrixRows([])) {
    for (const level of ['read committed', 'repeatable read', 'serializable']) {
      const [t] = (await runScenario(ctx.lab, scenario, { params: { isolation: level } })).trials
      if (!t.comparison.matched) deviations.push(`${scenario.id} at ${level}: ${t.comparison.deviations.join('; ')} (${t.why}; ${t.invariant.observed})`)
      assert.ok(t.sessions.every((x) => x.isolation === level), `${scenario.id}: every session ran at ${level}`)
    }
  }
  assert.deepEqual(deviations, [])
})

test('the anomalies show the article numbers', async () => {
  const obs = async (id: string, isolation: string) => (await runScenario(ctx.lab, id, { params: { isolation } })).trials[0].invariant.observed
  assert.match(await obs('non-repeatable-read', 'read committed'), /read 100 then 50/)
  assert.match(await obs('phantom', 'read committed'), /counted 3 then 4/)
  assert.match(await obs('phantom', 'repeatable read'), /counted 3 then 3/)
  assert.match(await obs('lost-update', 'read committed'), /^balance 70,.*should be 120/)
  assert.match(await obs('write-skew', 'repeatable read'), /^0 on call/)
  assert.match(await obs('dirty-read', 'read uncommitted'), /T2 read 100, committed 100/)
  assert.match(await obs('lost-update-version', 'read committed'), /t2 -30 \(attempt 2\)/)
})

test('serializable-retry: money conserved, every transfer applied, 40001 retried and counted', async () => {
  // 5 retries for 6 sessions: each 40001 is another transfer's commit, so all 6 commit whatever the timing.
  const [t] = (await runScenario(ctx.lab, 'serializable-retry', { n: 6, params: { retries: 5 } })).trials
  assert.equal(t.invariant.held, true, t.invariant.observed)
  assert.match(t.invariant.observed, /total 300 of 300, 6 transfers applied, 0 accounts off/)
  assert.ok(t.sessions.every((x) => x.outcome === 'committed'), t.sessions.map((x) => x.outcome).join())
  assert.ok(t.sessions.some((x) => x.retries > 0 && x.errors.every((e) => e === '40001')))
  assert.equal(t.verdict, 'prevented')
  const [rc] = (await runScenario(ctx.lab, 'serializable-retry', { params: { isolation: 'read committed' } })).trials
  assert.equal(rc.verdict, 'serialized')
  assert.ok(rc.sessions.every((x) => x.retries === 0))
})

test('serializable-retry: without retries the losers are reported, and money is still conserved', async () => {
  const [t] = (await runScenario(ctx.lab, 'serializable-retry', { params: { retries: 0 } })).trials
  assert.equal(t.invariant.held, true)
  assert.ok(count(t.sessions, (x) => x.outcome === 'failed' && x.sqlstate === '40001') >= 1)
})

test('skip-locked: every job once, nobody waits; --no-skip-locked queues the workers', async () => {
  const [t] = (await runScenario(ctx.lab, 'skip-locked', { n: 5 })).trials
  assert.equal(t.verdict, 'clean', t.why)
  assert.match(t.invariant.observed, /5 processed, 5 distinct, 0 still pending/)
  assert.ok(t.sessions.every((x) => x.waitedMs === 0))
  const [q] = (await runScenario(ctx.lab, 'skip-locked', { n: 5, params: { skipLocked: false } })).trials
  assert.equal(q.verdict, 'serialized')
  assert.equal(q.invariant.held, true)
  assert.ok(count(q.sessions, (x) => x.waitedMs > 0) >= 3, 'the workers queued behind one another')
})

test('row-deadlock: 40P01 for one, the other commits; the fixed order has none', async () => {
  const [t] = (await runScenario(ctx.lab, 'row-deadlock')).trials
  assert.equal(count(t.sessions, (x) => x.sqlstate === '40P01'), 1)
  assert.equal(count(t.sessions, (x) => x.outcome === 'committed'), 1)
  assert.equal(t.invariant.held, true)
  const [o] = (await runScenario(ctx.lab, 'row-deadlock', { params: { ordered: true } })).trials
  assert.equal(o.verdict, 'serialized')
  assert.ok(o.sessions.every((x) => x.outcome === 'committed'))
})

test('pool-isolation-leak: the session form leaks SERIALIZABLE to the next borrower; per transaction and DISCARD ALL do not', async () => {
  const [leak] = (await runScenario(ctx.lab, 'pool-isolation-leak')).trials
  assert.equal(leak.verdict, 'anomaly')
  assert.match(leak.invariant.observed, /B ran at serializable, a fresh connection gets read committed/)
  for (const form of ['transaction', 'discard']) {
    const [ok] = (await runScenario(ctx.lab, 'pool-isolation-leak', { params: { form } })).trials
    assert.equal(ok.verdict, 'clean', form)
  }
})

test('a permutation that deadlocks ends as 40P01 detected by PostgreSQL, not a hang', async () => {
  const permutation = 't1.begin t2.begin t2.first t1.first t2.second t1.second t2.commit t1.commit'
  const started = Date.now()
  const [t] = (await runScenario(ctx.lab, 'row-deadlock', { schedule: 'permutation', permutation, stepTimeoutMs: 8000 })).trials
  assert.ok(Date.now() - started < 8000, 'well within the step timeout')
  assert.equal(count(t.sessions, (x) => x.sqlstate === '40P01'), 1)
  assert.ok(t.events.some((e) => e.kind === 'wait'), 'waits shown')
})

test('a blocked step is deferred and the permutation goes on with the other session (isolationtester rule)', async () => {
  const permutation = 't1.begin t1.read t2.begin t2.read t2.update t2.commit t1.update t1.commit'
  const [t] = (await runScenario(ctx.lab, 'lost-update-for-update', { schedule: 'permutation', permutation })).trials
  assert.equal(t.verdict, 'serialized')
  const order = t.events.filter((e) => e.kind === 'ok').map((e) => `${e.session}.${e.step}`)
  assert.ok(t.events.some((e) => e.session === 't2' && e.step === 'read' && e.kind === 'wait'), 't2.read shown waiting')
  assert.ok(order.indexOf('t1.update') < order.indexOf('t2.read'), 't1 went on while t2.read waited')
  assert.ok(order.indexOf('t1.commit') < order.indexOf('t2.update'), "t2's deferred steps ran after t1 committed")
  assert.match(t.invariant.observed, /^balance 120/)
})

test('a permutation that can never finish is refused with a clear message, not left to time out', async () => {
  // s1 takes a session-level advisory lock and has no steps left; s2 waits for it: nothing can ever move.
  const stuck = defineScenario({
    id: 'stuck',
    title: 'stuck',
    source: { article: 'advisory-locks', section: '3.2' },
    story: [],
    params: {},
    sessionCount: { default: 2 },
    isolation: 'read committed',
    setup: [],
    sessions: () => ({
      s1: { steps: { lock: 'select pg_advisory_lock(4242)', done: 'select 1' } },
      s2: { steps: { lock: 'select pg_advisory_lock(4242)', done: 'select 1' } },
    }),
    invariant: { description: 'x', sql: 'select true as held' },
    documented: { postgres: { lockstep: clean('x', { committed: 2 }), serial: clean('x', { committed: 2 }) } },
  })
  const started = Date.now()
  await assert.rejects(
    run(ctx.lab, {
      context: ctx.lab.context,
      plan: plan(stuck, { params: {}, n: 2, engine: 'postgres' }),
      schedule: 'permutation',
      permutation: 's1.lock s1.done s2.lock s2.done',
      trials: 1,
      stepTimeoutMs: 20_000,
      connectTimeoutMs: 5000,
      keep: false,
    }),
    (e: Error) => e instanceof UsageError && /cannot finish: s2\.lock waits for s1/.test(e.message),
  )
  assert.ok(Date.now() - started < 5000, 'refused at once, not after the step timeout')
  const left = await ctx.lab.control`select count(*)::int as n from pg_stat_activity where application_name like 'race stuck%'`
  assert.equal(left[0].n, 0, 'no session left behind')
})

test('CLI: unknown step or session in --schedule, and a bad --isolation, are exit 2 with one line', async () => {
  for (const args of [
    ['run', 'write-skew', '--schedule', 't1.begin t2.begin t1.check t2.check t1.nope t1.commit t2.off t2.commit'],
    ['run', 'write-skew', '--schedule', 't1.begin t3.begin'],
    ['run', 'write-skew', '--isolation', 'snapshot'],
    ['run', 'skip-locked', '--isolation', 'read uncommitted'],
    ['matrix', 'advisory'],
    ['show', 'write-skew', '--isolation', 'snapshot'],
  ]) {
    const r = await race(args, { url: ctx.server.url })
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`)
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr)
    assert.doesNotMatch(r.stderr, /at .*\.js/, 'no stack trace')
  }
})

test('CLI: the check-then-insert family on the isolation grid: race matrix broken for-update unique-index, race run broken --isolation serializable (issue 23)', async () => {
  const m = await race(['matrix', 'broken', 'for-update', 'unique-index', '--json'], { url: ctx.server.url })
  assert.equal(m.code, 0, m.stdout + m.stderr)
  const doc = JSON.parse(m.stdout)
  assert.equal(doc.deviations, 0)
  const row = (id: string) => {
    const cells = doc.rows.find((x: { scenario: string }) => x.scenario === id).cells
    return ['read committed', 'repeatable read', 'serializable'].map((l) => cells[l].happened)
  }
  assert.deepEqual(row('broken'), ['anomaly', 'anomaly', 'prevented 40001'])
  assert.deepEqual(row('for-update'), ['anomaly', 'anomaly', 'prevented 40001'])
  assert.deepEqual(row('unique-index'), ['prevented 23505', 'prevented 23505', 'prevented 40001'])
  const r = await race(['run', 'broken', '--isolation', 'serializable', '--n', '3', '--schedule', 'lockstep', '--json'], { url: ctx.server.url })
  assert.equal(r.code, 0, r.stdout + r.stderr)
  const run = JSON.parse(r.stdout)
  assert.equal(run.verdict, 'prevented')
  assert.deepEqual(run.sessions.map((x: { isolation: string }) => x.isolation), ['serializable', 'serializable', 'serializable'])
  assert.deepEqual(run.sessions.map((x: { outcome: string; sqlstate: string | null }) => x.sqlstate ?? x.outcome).sort(), ['40001', '40001', 'committed'])
  // The article's code, at its own level, is still the plain begin.
  const show = await race(['show', 'broken'], { env: { COLUMNS: '200' } })
  assert.match(show.stdout, /step begin +\{ begin \}/)
})

test('CLI: race show prints the default interleaving like a spec', async () => {
  const r = await race(['show', 'lost-update'], { env: { COLUMNS: '260' } })
  assert.equal(r.code, 0)
  assert.match(r.stdout, /permutation t1\.begin t1\.read t2\.begin t2\.read t1\.update t1\.commit t2\.update t2\.commit/)
  assert.match(r.stdout, /session t2\n  step begin +\{ begin isolation level read committed \}/)
  assert.match(r.stdout, /^ {2}T1 +T2$/m)
  // Narrower than the two columns need: one row per step, the session in front, the SQL whole.
  const narrow = await race(['show', 'write-skew'], { env: { COLUMNS: '80' } })
  assert.match(narrow.stdout, /^ {2}t1 {2}off {4}update doctors set on_call = false where id = 1$/m)
  assert.match(narrow.stdout, /^ {2}t2 {2}off {4}update doctors set on_call = false where id = 2$/m)
  assert.match(r.stdout, /documented/)
  const ser = await race(['show', 'write-skew', '--isolation', 'serializable'])
  assert.match(ser.stdout, /step begin +\{ begin isolation level serializable \}/)
  assert.match(ser.stdout, /lockstep: prevented: t1 committed, t2 40001/)
})

test('CLI: race matrix --json: one grid, every cell as documented, exit 0', async () => {
  const r = await race(['matrix', '--json'], { url: ctx.server.url, timeoutMs: 120_000 })
  assert.equal(r.code, 0, r.stderr)
  const doc = JSON.parse(r.stdout)
  assert.equal(doc.cells, (await matrixRows([])).length * 3)
  assert.equal(doc.deviations, 0)
  assert.deepEqual(doc.levels, ['read committed', 'repeatable read', 'serializable'])
  const lost = doc.rows.find((x: { scenario: string }) => x.scenario === 'lost-update').cells['repeatable read']
  assert.equal(lost.happened, 'prevented 40001')
  assert.deepEqual(lost.documented[0].who, { t1: 'committed', t2: '40001' })
})
