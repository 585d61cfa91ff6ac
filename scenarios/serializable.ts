// serializable (advisory §5.1): the broken code at SERIALIZABLE. SSI sees the read/write dependencies and
// fails the loser with serialization_failure (40001). With --retries the loser retries the whole
// transaction and is then rejected by the business rule. Documented: held.
import { defineScenario, expectBy, replicate } from '../src/scenario.js'
import { checkExists, insertUnlessFound, invariant, table } from './_fixtures/setup-requests.js'

export default defineScenario({
  id: 'serializable',
  title: 'SERIALIZABLE (SSI) detects the check-then-insert race',
  source: 'advisory-lock article §5.1',
  story: [
    'The broken code, unchanged, but begin isolation level serializable.',
    'Each transaction read the (empty) set the other one writes into: a read/write dependency cycle.',
    'PostgreSQL fails one of them with serialization_failure (40001): one pending request remains.',
    'The price is a retry loop around the whole transaction (--retries K: exponential backoff with jitter, 40001 only); the retried loser then sees the row and gets 409.',
  ],
  params: {
    retries: {
      flag: '--retries <k>',
      description: 'retry a transaction that failed with 40001 up to k times',
      kind: 'whole',
      default: 0,
      min: 0,
    },
  },
  defaultN: 2,
  isolation: () => 'serializable',
  setup: [table],
  sessions: (p, n) => replicate(n, {
    steps: { begin: 'begin isolation level serializable', check: checkExists(), insert: insertUnlessFound, commit: 'commit' },
    racePoint: 'check',
    retries: Number(p.retries),
  }),
  invariant,
  expect: expectBy({ lockstep: ['prevented'] }),
  checks: [{ label: 'retries=3', params: { retries: 3 } }],
})
