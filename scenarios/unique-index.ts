// unique-index (advisory §5): the broken code, with a partial unique index on pending requests. The second
// insert waits for the first transaction, then fails with unique_violation (23505). Documented: held.
import { defineScenario, expectBy, replicate } from '../src/scenario.js'
import { checkExists, insertUnlessFound, invariant, partialUniqueIndex, table } from './_fixtures/setup-requests.js'

export default defineScenario({
  id: 'unique-index',
  title: 'a partial unique index holds the invariant even for the broken code',
  source: 'advisory-lock article §5',
  story: [
    "create unique index ... on setup_requests (user_id) where status = 'pending'.",
    'The broken check-then-insert races as before: both checks find nothing.',
    "The second insert waits on the first transaction's index entry; when that commits, it fails with unique_violation (23505).",
    'A constraint binds every write path (admin screens, future batch jobs); an advisory lock binds only code that takes it.',
  ],
  params: {},
  defaultN: 2,
  isolation: () => 'read committed',
  setup: [table, partialUniqueIndex],
  sessions: (_p, n) => replicate(n, {
    steps: { begin: 'begin', check: checkExists(), insert: insertUnlessFound, commit: 'commit' },
    racePoint: 'check',
  }),
  invariant,
  expect: expectBy({ lockstep: ['prevented'] }),
})
