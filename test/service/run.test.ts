// The run service called directly (CONTRIBUTING.md, "Layout": run/), not through the CLI: a request checked by
// validateRun, executed by executeRun on the file's embedded server (withLab opens it), and race check's cases run by
// runChecks. What is asserted is what the server did: each session's ending and SQLSTATE, the verdicts, the counts.
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { RunContext } from '../../src/lifecycle.js'
import { findScenario } from '../../src/registry.js'
import { caseName, casesFor, placeCases, runChecks } from '../../src/run/check.js'
import { executeRun } from '../../src/run/execute.js'
import { withLab } from '../../src/run/lab.js'
import { NAMES, paramsOf } from '../../src/run/params.js'
import { validateRun, type RunRequest } from '../../src/run/request.js'
import { useServer, type TestServer } from '../support/server.js'

let server: TestServer
before(async () => {
  server = await useServer()
})
after(async () => {
  await server?.stop()
})

const BOUNDS = { connectTimeout: '10s', stepTimeout: '30s', runTimeout: '3m' }

/** One run through the service as run() makes it: the request checked, executed in a context of its own, cleaned up. */
async function runService(id: string, o: Partial<Omit<RunRequest, 'scenario' | 'engine' | 'params'>> & { params?: Record<string, unknown> } = {}) {
  const scenario = await findScenario(id)
  const { params, ...rest } = o
  const ctx = new RunContext()
  try {
    const checked = validateRun({ scenario, engine: 'postgres', params: paramsOf(scenario, params ?? {}, 'postgres'), databaseUrl: server.url, ...BOUNDS, ...rest }, NAMES)
    return await executeRun(ctx, checked)
  } finally {
    assert.deepEqual(await ctx.cleanupAll(), [], 'the run cleaned up without an error')
  }
}

const endings = (t: { sessions: { name: string; outcome: string; sqlstate: string | null }[] }) => t.sessions.map((s) => `${s.name} ${s.outcome}${s.sqlstate ? ` ${s.sqlstate}` : ''}`)

test('broken, lockstep: both sessions check before either inserts, both commit, the invariant is violated (as documented: exit 0)', async () => {
  const { view, code } = await runService('broken', { schedule: 'lockstep', trials: 3 })
  assert.equal(view.trials.length, 3)
  for (const t of view.trials) {
    assert.equal(t.verdict, 'anomaly', t.why)
    assert.deepEqual(endings(t), ['s1 committed', 's2 committed'])
  }
  assert.equal(view.summary.violations, 3)
  assert.equal(view.summary.matched, true)
  assert.equal(code, 0)
})

test('broken, serial: the second session sees the first one\'s row and rejects; no violation', async () => {
  const { view, code } = await runService('broken', { schedule: 'serial' })
  const [t] = view.trials
  assert.notEqual(t.verdict, 'anomaly', t.why)
  assert.equal(view.summary.violations, 0)
  assert.deepEqual(t.sessions.map((s) => s.outcome).sort(), ['committed', 'rejected'])
  // The exit code says whether the trial matched the documented outcome for this schedule.
  assert.equal(code, view.summary.matched ? 0 : 1)
})

test('a permutation given as the schedule decides who wins: s2 whole before s1, s1 is the one rejected', async () => {
  const { view } = await runService('broken', { schedule: 's2.begin s2.check s2.insert s2.commit s1.begin s1.check s1.insert s1.commit' })
  const [t] = view.trials
  assert.equal(t.verdict === 'anomaly', false, t.why)
  assert.deepEqual(Object.fromEntries(t.sessions.map((s) => [s.name, s.outcome])), { s1: 'rejected', s2: 'committed' })
})

test('serializable, lockstep: SSI cancels one session with 40001, the other commits; the anomaly is prevented', async () => {
  const { view, code } = await runService('serializable', { schedule: 'lockstep' })
  const [t] = view.trials
  assert.equal(t.verdict, 'prevented', t.why)
  const ends = endings(t).sort()
  assert.equal(ends.filter((e) => / committed$/.test(e)).length, 1, ends.join(', '))
  assert.equal(ends.filter((e) => / failed 40001$/.test(e)).length, 1, ends.join(', '))
  assert.equal(code, 0)
})

test('the run service refuses bad input before any server is touched, naming the option as the API spells it', async () => {
  const scenario = await findScenario('broken')
  assert.throws(() => validateRun({ scenario, engine: 'postgres', params: paramsOf(scenario, {}, 'postgres'), databaseUrl: server.url, ...BOUNDS, trials: 0 }, NAMES), /trials/)
})

test('race check\'s service: every case placed runs once on the open target, judged against its documentation', async () => {
  const request = { ids: ['broken', 'advisory', 'serializable'], engine: 'postgres' as const, databaseUrl: server.url }
  const placed = placeCases(request, await casesFor(request))
  assert.equal(placed.own.length + placed.skipped.length, 0)
  const ctx = new RunContext()
  const bounds = { connectTimeoutMs: 10_000, stepTimeoutMs: 30_000, runTimeoutMs: 180_000 }
  try {
    const result = await withLab(ctx, server.url, bounds, (lab, _target, via) => runChecks(ctx, lab, via, request, placed, { bounds }))
    // Every case placed ran once, in its own row.
    assert.deepEqual(result.rows.map((r) => caseName(r.k)), placed.shared.map(caseName))
    assert.deepEqual([...new Set(result.rows.map((r) => r.k.scenario.id))].sort(), ['advisory', 'broken', 'serializable'])
    for (const r of result.rows) assert.equal(r.summary.matched, true, `${caseName(r.k)}: ${r.summary.deviations.join('; ')}`)
    const rowsOf = (id: string) => result.rows.filter((r) => r.k.scenario.id === id).map((r) => r.t)
    assert.ok(rowsOf('broken').some((t) => t.verdict === 'anomaly'), 'broken violates in one of its cases')
    assert.ok(rowsOf('serializable').some((t) => t.verdict === 'prevented' && t.sessions.some((s) => s.sqlstate === '40001')), 'SSI cancels a session with 40001')
    // advisory serializes the sessions: never a violation, and a session waited on the other's lock.
    for (const t of rowsOf('advisory')) assert.notEqual(t.verdict, 'anomaly')
    assert.ok(rowsOf('advisory').some((t) => t.sessions.some((s) => s.waitedMs > 0)), 'a session waited on the advisory lock')
    assert.equal(result.code, 0)
  } finally {
    assert.deepEqual(await ctx.cleanupAll(), [])
  }
})
