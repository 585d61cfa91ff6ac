// for-update (advisory §2): the broken code with FOR UPDATE on the check. FOR UPDATE locks the rows the
// SELECT returns; the check returns none, so nothing is locked and both insert. Documented: violated.
import { defineScenario, expectBy, replicate } from '../src/scenario.js'
import { checkExists, insertUnlessFound, invariant, table } from './_fixtures/setup-requests.js'

export default defineScenario({
  id: 'for-update',
  title: 'FOR UPDATE on the check does not help: it locks no row that does not exist',
  source: 'advisory-lock article §2',
  story: [
    'The first fix everyone tries: SELECT ... FOR UPDATE on the check.',
    'FOR UPDATE locks only rows the SELECT returns. The check returns no row, so it locks nothing.',
    'Both sessions go on to insert, as in broken: two pending requests.',
    'Locking the parent users row would serialize them (parent-row), at the price of blocking unrelated updates of that user.',
  ],
  params: {},
  defaultN: 2,
  isolation: () => 'read committed',
  setup: [table],
  sessions: (_p, n) => replicate(n, {
    steps: { begin: 'begin', check: checkExists(true), insert: insertUnlessFound, commit: 'commit' },
    racePoint: 'check',
  }),
  invariant,
  expect: expectBy({ lockstep: ['anomaly'] }),
})
