// Every scenario, every case race check runs, in its deterministic interleaving and one session after
// another: each trial must equal its whole documented outcome (verdict, every session's ending and SQLSTATE,
// the isolation level each session really ran at). A deviation lists what differs.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { checkCases } from '../../src/commands/check.js'
import { runScenario, useLab } from '../support/server.js'

const ctx = useLab()

for (const schedule of ['lockstep', 'serial'] as const) {
  test(`every scenario and check case, ${schedule}: exactly as documented`, async () => {
    const deviations: string[] = []
    const cases = await checkCases([])
    for (const k of cases) {
      const { trials } = await runScenario(ctx.lab, k.scenario, { params: k.params, n: k.n, schedule })
      const [t] = trials
      if (!t.comparison.matched) deviations.push(`${k.scenario.id} (${k.label}): ${t.verdict}; ${t.comparison.deviations.join('; ') || t.why}`)
    }
    assert.deepEqual(deviations, [])
    assert.ok(cases.length > 60, `${cases.length} cases`)
  })
}
