// One chooser for every trial runner: the engine's run() takes `chooser: (trial) => Chooser` for a scenario's
// declared steps as it does for an application race's queries (test/app/app-races.test.ts). The chooser sees the
// same Moment (who is ready with which step, who waits, who is done, the order so far) and picks by index or name.
// On the test server (embedded PostgreSQL 18, or DATABASE_URL).
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { run } from '../../src/engine/run.js'
import type { Moment } from '../../src/engine/types.js'
import { UsageError } from '../../src/errors.js'
import { plan } from '../../src/plan.js'
import { findScenario } from '../../src/registry.js'
import { defaultParams } from '../../src/scenario.js'
import { useLab } from '../support/server.js'

const ctx = useLab()

async function broken() {
  const scenario = await findScenario('broken')
  return plan(scenario, { params: defaultParams(scenario, {}), n: 2, engine: 'postgres' })
}

test("a scenario's declared steps driven by a chooser: it sees each ready session's next step and its SQL, and the order it chose runs", async () => {
  const p = await broken()
  const moments: Moment[] = []
  const out = await run(ctx.lab, {
    context: ctx.lab.context,
    plan: p,
    schedule: 'lockstep',
    trials: 2,
    stepTimeoutMs: 10_000,
    connectTimeoutMs: 5000,
    keep: false,
    // Trial 0: s1 runs all its steps first (by name); trial 1: always the last ready one (by index).
    chooser: (k) => (m) => {
      moments.push(m)
      return k === 0 ? (m.ready.some((r) => r.session === 's1') ? 's1' : 's2') : m.ready.length - 1
    },
  })
  assert.equal(out.trials.length, 2)
  const first = moments[0]
  assert.deepEqual(first.ready.map((r) => r.label), p.sessions.map((s) => `${s.name}.${s.steps[0].name}`))
  assert.equal(first.ready[0].sql, p.sessions[0].steps[0].def.sql)
  assert.deepEqual(first.order, [])
  // Trial 0: serial, s1 then s2: the moment before s2's first step has s1 done and every s1 step in the order.
  const s2first = moments.find((m) => !m.ready.some((r) => r.session === 's1'))!
  assert.deepEqual(s2first.done, ['s1'])
  assert.deepEqual(s2first.order, p.sessions[0].steps.map((s) => `s1.${s.name}`))
  assert.equal(moments.filter((m) => m.order.length === 0).length, 2, 'each trial starts from an empty order')
  // Serial at READ COMMITTED: the second sees the first's request, so the invariant holds in trial 0.
  assert.equal(out.trials[0].invariant.held, true)
})

test('a chooser that picks no ready session ends the run as bad input', async () => {
  const p = await broken()
  await assert.rejects(
    run(ctx.lab, { context: ctx.lab.context, plan: p, schedule: 'lockstep', trials: 1, stepTimeoutMs: 10_000, connectTimeoutMs: 5000, keep: false, chooser: () => () => 'nobody' }),
    (e: unknown) => e instanceof UsageError && /the chooser picked "nobody", which is not one of the ready sessions \(s1, s2\)/.test(e.message),
  )
})
