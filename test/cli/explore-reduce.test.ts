// race explore's reduced search against its exhaustive one (--exhaustive, the oracle) on a real server: on examples
// and scenarios whose every order fits, the reduced search finds every outcome group the exhaustive one finds (the
// verdict and each session's ending) and the same fewest switches of a violating order, in fewer runs. That the
// comparison can fail is shown without a server (test/pure/reduce.test.ts: a relation that forgets read-write
// conflicts misses outcomes). The same races, with wall times, are printed by speed/explore.ts.
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { outcomes, RACES } from '../../speed/explore.js'
import { useServer, type TestServer } from '../support/server.js'

let server: TestServer
before(async () => {
  server = await useServer()
})
after(async () => {
  await server.stop()
})

// A spec, its fix, an application race and its lock fix over node-postgres, the withdrawal, and built-ins at READ
// COMMITTED and REPEATABLE READ (lost-update), with a deadlock, and at SERIALIZABLE.
const CHOSEN = ['explore-orders.spec', 'explore-orders-fixed.spec', 'app/orders (node-postgres)', 'app/orders-locked', 'app/withdraw-ledger, 2 sessions', 'lost-update', 'lost-update, RR', 'deadlock', 'serializable']

for (const name of CHOSEN) {
  const race = RACES.find((r) => r.name === name)!
  test(`reduced finds every outcome group and the same shortest violation as --exhaustive: ${name}`, async () => {
    const { explore } = await import('../../src/index.js')
    const o = { ...race.options, databaseUrl: server.url }
    const red = await explore(race.scenario, o)
    const all = await explore(race.scenario, { ...o, reduce: undefined, exhaustive: true })
    assert.equal(red.search, 'reduced')
    assert.equal(all.search, 'exhaustive')
    assert.equal(red.complete, true)
    assert.equal(red.diverged, 0)
    assert.deepEqual(outcomes(red), outcomes(all))
    assert.ok(red.runs < all.runs, `${red.runs} reduced runs, ${all.runs} exhaustive`)
  })
}
