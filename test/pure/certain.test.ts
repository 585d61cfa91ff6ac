// What race check documents must be a fact of the server, not of how fast the machine is: a CI check that goes
// red when the runner is busy is worse than none. These read the documented outcomes themselves (no server):
// where an outcome is certain only with enough retries, or only when a wait is shorter than a timeout, the
// check case must be the certain one.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { checkCases } from '../../src/run/check.js'
import { documentedFor } from '../../src/plan.js'
import { findScenario } from '../../src/registry.js'
import { defaultParams, type Params } from '../../src/scenario.js'

const lockstep = async (id: string, params: Params, n: number) => {
  const s = await findScenario(id)
  return documentedFor(s, { params: defaultParams(s, params), n, engine: 'postgres', schedule: 'lockstep', windowMs: 0 })
}

test('serializable-retry: "every transfer commits" is documented only where the retries cover n - 1 losses', async () => {
  // Each 40001 is caused by another session's commit after that attempt's snapshot, a different one each time:
  // n - 1 retries always suffice, fewer may not (n=8 with 4 retries ran out on a busy machine).
  for (const k of (await checkCases(['serializable-retry'])).filter((c) => c.params.isolation !== 'read committed')) {
    const retries = Number(k.params.retries)
    const n = k.n ?? 4
    for (const d of documentedFor(k.scenario, { params: k.params, n, engine: 'postgres', schedule: 'lockstep', windowMs: 0 })) {
      if (d.who.committed === n && d.who['40001'] === undefined) assert.ok(retries >= n - 1, `${k.label}: all ${n} documented to commit with only ${retries} retries`)
    }
  }
  // The n=8 case race check runs is one where all 8 commit whatever the timing.
  const eight = (await checkCases(['serializable-retry'])).find((c) => c.label === 'n=8')!
  assert.ok(Number(eight.params.retries) >= 7, `n=8 with ${eight.params.retries} retries`)
  // Fewer retries: at least retries + 1 commit (a session that gave up saw that many others commit), the rest may fail.
  assert.deepEqual((await lockstep('serializable-retry', { retries: 4 }, 8)).map((d) => d.who), [{ committed: [5, 8], '40001': [0, 3] }])
  assert.deepEqual((await lockstep('serializable-retry', { retries: 0 }, 4)).map((d) => d.who), [{ committed: [1, 4], '40001': [0, 3] }])
  assert.deepEqual((await lockstep('serializable-retry', { retries: 3 }, 4)).map((d) => d.who), [{ committed: 4 }])
})
