// Every scenario, every case race check runs, in its deterministic interleaving and one session after
// another: each trial must equal its whole documented outcome (verdict, every session's ending and SQLSTATE,
// the isolation level each session really ran at). A deviation lists what differs.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { checkCases } from '../../src/run/check.js'
import type { PostgresLab } from '../../src/db/postgres.js'
import type { Scenario } from '../../src/scenario.js'
import { openOwnLab, runScenario, useLab } from '../support/server.js'

const ctx = useLab()

for (const schedule of ['lockstep', 'serial'] as const) {
  test(`every scenario and check case, ${schedule}: exactly as documented`, async () => {
    const deviations: string[] = []
    const cases = await checkCases([])
    // A scenario with a server of its own (lock-limit) runs on one, as race check runs it.
    const own = new Map<Scenario, { lab: PostgresLab; stop: () => Promise<void> }>()
    try {
      for (const k of cases) {
        if (k.scenario.ownServer && !own.has(k.scenario)) own.set(k.scenario, await openOwnLab(k.scenario))
        const lab = own.get(k.scenario)?.lab ?? ctx.lab
        let [t] = (await runScenario(lab, k.scenario, { params: k.params, n: k.n, schedule })).trials
        // On a server other runs share, an invariant may be undecided because of them (vacuum-horizon: another
        // backend's old snapshot holds VACUUM back too): run it again, at most twice. A deviation is not retried.
        for (let i = 0; i < 2 && t.invariant.held === null && t.verdict === 'unknown'; i++) {
          ;[t] = (await runScenario(lab, k.scenario, { params: k.params, n: k.n, schedule })).trials
        }
        if (!t.comparison.matched) deviations.push(`${k.scenario.id} (${k.label}): ${t.verdict}; ${t.comparison.deviations.join('; ') || t.why}`)
      }
    } finally {
      for (const o of own.values()) await o.stop()
    }
    assert.deepEqual(deviations, [])
    assert.ok(cases.length > 60, `${cases.length} cases`)
  })
}
