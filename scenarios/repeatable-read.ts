// repeatable-read (advisory-locks §5.2): the advisory-lock code on connections whose default isolation is
// REPEATABLE READ. With the guard line (SET TRANSACTION ISOLATION LEVEL READ COMMITTED) it holds; with
// --no-guard the snapshot is taken before the lock wait, and the check misses the winner's row: violated.
import { anomaly, clean, defineScenario, replicate, serialized } from '../src/scenario.js'
import { LIMIT, advisoryParams, advisorySteps, binds, invariant, oneByOne, table } from './_shared/setup-requests.js'

export default defineScenario({
  id: 'repeatable-read',
  title: 'the advisory-lock pattern needs READ COMMITTED: the guard line keeps it safe',
  source: { article: 'advisory-locks', section: '5.2' },
  story: [
    "The sessions' default isolation is REPEATABLE READ (default_transaction_isolation, as an engine-wide setting would do).",
    'At REPEATABLE READ the snapshot is fixed by the first statement, before the advisory-lock wait.',
    "Without the guard (--no-guard) the session that waited checks that old snapshot, misses the winner's row, and inserts: violated.",
    'With the guard, SET TRANSACTION ISOLATION LEVEL READ COMMITTED as the first statement, the check after the lock sees it: held.',
  ],
  params: {
    ...advisoryParams,
    guard: {
      flag: '--no-guard',
      description: 'leave out SET TRANSACTION ISOLATION LEVEL READ COMMITTED',
      kind: 'boolean',
      default: true,
    },
  },
  sessionCount: { default: 2 },
  // The connections default to REPEATABLE READ; the guard line makes each transaction READ COMMITTED.
  isolation: ({ params }) => (params.guard ? 'read committed' : 'repeatable read'),
  setup: [table],
  binds,
  sessions: ({ params, n }) =>
    replicate(n, {
      steps: advisorySteps(params, Boolean(params.guard)),
      racePoint: 'check',
      connection: { default_transaction_isolation: 'repeatable read' },
    }),
  invariant: invariant(':maxPending'),
  documented: {
    postgres: {
      lockstep: (v) => {
        const max = Number(v.params.maxPending)
        if (v.n === 1) return clean('one request alone', { committed: 1 })
        if (v.params.guard) return serialized('READ COMMITTED: the check after the lock wait sees what the winner committed', oneByOne(v, max, LIMIT))
        // Every snapshot was taken (by set_config) before the lock wait: every check counts 0.
        return v.n > max
          ? anomaly('REPEATABLE READ: each check reads the snapshot taken before it waited for the lock, and inserts', { committed: v.n })
          : serialized('everyone may insert anyway', { committed: v.n })
      },
      serial: (v) => clean('one request after another: each snapshot is taken after the earlier commits', oneByOne(v, Number(v.params.maxPending), LIMIT)),
      barrier: (v) => {
        const max = Number(v.params.maxPending)
        const apart = clean('the sessions happened not to overlap', oneByOne(v, max, LIMIT))
        if (v.params.guard || v.n <= max) return [serialized('the lock serialized them', oneByOne(v, max, LIMIT)), apart]
        // A session whose snapshot came after an earlier commit counts it; one whose snapshot came before does not.
        return [anomaly('REPEATABLE READ: a snapshot taken before the lock wait misses rows committed during it', { committed: [max + 1, v.n], [`rejected: ${LIMIT}`]: [0, v.n - max - 1] }), apart]
      },
    },
  },
  checks: [{ label: 'no guard', params: { guard: false } }],
  unavailable: { mysql: 'not written for InnoDB: its story is the snapshot set_config takes before the lock wait, and an InnoDB read view starts only at the first consistent read' },
})
