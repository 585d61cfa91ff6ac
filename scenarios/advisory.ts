// advisory (advisory §4): pg_advisory_xact_lock on the user's namespaced key serializes check-then-insert.
// Held: n=2 gives 1 committed + 1 rejected; n=5 with --max-pending 3 gives 3 committed + 2 rejected.
import { defineScenario, expectBy, replicate } from '../src/scenario.js'
import { advisoryParams, advisorySteps, invariant, table } from './_fixtures/setup-requests.js'

export default defineScenario({
  id: 'advisory',
  title: 'pg_advisory_xact_lock serializes check-then-insert',
  source: 'advisory-lock article §4, §8.1',
  story: [
    "Every request takes the same advisory key for its user before it checks: sha256('setup_request:<user>'), first 8 bytes, signed.",
    'The first session gets the lock; the others wait in pg_advisory_xact_lock until it commits.',
    'READ COMMITTED (set explicitly, §5.2): the check after the lock sees the rows committed while waiting.',
    'So each check counts every earlier insert: exactly max-pending commit, the rest get 409. lock_timeout bounds the wait (55P03).',
  ],
  params: { ...advisoryParams },
  defaultN: 2,
  isolation: () => 'read committed',
  setup: [table],
  sessions: (p, n) => replicate(n, { steps: advisorySteps(p), racePoint: 'check' }),
  invariant,
  expect: expectBy({ lockstep: ['serialized'] }),
  checks: [{ label: 'n=5 max-pending=3', n: 5, params: { maxPending: 3 } }],
})
