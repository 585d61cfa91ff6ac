// broken (advisory §1): check-then-insert in one READ COMMITTED transaction. Both sessions see no pending
// request and both insert: two pending rows for one user. Documented: violated.
import { defineScenario, expectBy, replicate } from '../src/scenario.js'
import { checkExists, insertUnlessFound, invariant, table } from './_fixtures/setup-requests.js'

export default defineScenario({
  id: 'broken',
  title: 'check-then-insert in one READ COMMITTED transaction (TOCTOU)',
  source: 'advisory-lock article §1',
  story: [
    'Rule: one pending setup request per user; a second request gets 409.',
    'Each session checks for a pending request, finds none, and inserts one.',
    "READ COMMITTED: each statement sees what was committed when it started, so neither check sees the other's uncommitted insert.",
    'A transaction around check and insert does not help: both commit, and the user has two pending requests.',
  ],
  params: {},
  defaultN: 2,
  isolation: () => 'read committed',
  setup: [table],
  sessions: (_p, n) => replicate(n, {
    steps: { begin: 'begin', check: checkExists(), insert: insertUnlessFound, commit: 'commit' },
    racePoint: 'check',
  }),
  invariant,
  expect: expectBy({ lockstep: ['anomaly'] }),
})
