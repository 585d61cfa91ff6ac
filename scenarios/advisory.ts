// advisory (advisory-locks §4): pg_advisory_xact_lock on the user's namespaced key serializes check-then-insert.
// Held: n=2 gives 1 committed + 1 rejected; n=5 with --max-pending 3 gives 3 committed + 2 rejected.
import { clean, defineScenario, replicate, serialized } from '../src/scenario.js'
import { LIMIT, advisoryParams, advisorySteps, binds, invariant, myAdvisory, myTable, oneByOne, table } from './_shared/setup-requests.js'

export default defineScenario({
  id: 'advisory',
  title: 'pg_advisory_xact_lock serializes check-then-insert',
  source: { article: 'advisory-locks', section: '4' },
  story: [
    "Every request takes the same advisory key for its user before it checks: sha256('setup_request:<user>'), first 8 bytes, signed.",
    'The first session gets the lock; the others wait in pg_advisory_xact_lock until it commits.',
    'READ COMMITTED (set explicitly, §5.2): the check after the lock sees the rows committed while waiting.',
    'So each check counts every earlier insert: exactly max-pending commit, the rest get 409. lock_timeout bounds the wait (55P03).',
  ],
  params: { ...advisoryParams },
  sessionCount: { default: 2 },
  isolation: 'read committed',
  setup: ({ engine }) => [engine === 'mysql' ? myTable : table],
  binds,
  sessions: ({ params, n, engine }) => replicate(n, engine === 'mysql' ? myAdvisory(params) : { steps: advisorySteps(params), racePoint: 'check' }),
  invariant: invariant(':maxPending'),
  documented: {
    postgres: {
      lockstep: (v) =>
        v.n > 1
          ? serialized('each request waits for the key; its check then counts every insert committed before it', oneByOne(v, Number(v.params.maxPending), LIMIT))
          : clean('one request alone', { committed: 1 }),
      serial: (v) => clean('one request after another: each check counts the earlier ones', oneByOne(v, Number(v.params.maxPending), LIMIT)),
    },
    // MySQL: GET_LOCK instead of pg_advisory_xact_lock; the same serialization, released by the application.
    mysql: {
      lockstep: (v) =>
        v.n > 1
          ? serialized("each request waits in GET_LOCK (PROCESSLIST state 'User lock') until the holder releases it after COMMIT", oneByOne(v, Number(v.params.maxPending), LIMIT))
          : clean('one request alone', { committed: 1 }),
      serial: (v) => clean('one request after another: each check counts the earlier ones', oneByOne(v, Number(v.params.maxPending), LIMIT)),
    },
  },
  // Transaction-level locks only: unchanged through a transaction pooler (advisory-locks §6).
  pooled: { modes: ['transaction', 'session'] },
  // On MySQL/MariaDB race reads each holder's isolation level from INNODB_TRX before its COMMIT, inside the window
  // in which it holds the user lock: up to one refresh of InnoDB's transaction cache, which other readers of it on
  // the server can delay (bounded by the step timeout, 10 s). Four holders' windows then need more than the 2 s
  // default, or the fifth GET_LOCK times out because of race's observation, not the code's: the lock timeout is
  // above the step timeout there, so that a wait too long is race's step timeout (undecided), never a "busy".
  checks: [
    { label: 'n=5 max-pending=3', n: 5, params: { maxPending: 3 }, engines: ['postgres'] },
    { label: 'n=5 max-pending=3', n: 5, params: { maxPending: 3, lockTimeout: 40_000 }, engines: ['mysql'] },
  ],
})
