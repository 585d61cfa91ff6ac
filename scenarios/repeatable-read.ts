// repeatable-read (advisory §5.2): the advisory-lock code on connections whose default isolation is
// REPEATABLE READ. With the guard line (SET TRANSACTION ISOLATION LEVEL READ COMMITTED) it holds; with
// --no-guard the snapshot is taken before the lock wait, the check misses the winner's row: violated.
import { defineScenario, expectBy, replicate } from '../src/scenario.js'
import { advisoryParams, advisorySteps, invariant, table } from './_fixtures/setup-requests.js'

export default defineScenario({
  id: 'repeatable-read',
  title: 'the advisory-lock pattern needs READ COMMITTED: the guard line keeps it safe',
  source: 'advisory-lock article §5.2',
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
  defaultN: 2,
  isolation: (p) => (p.guard ? 'repeatable read by default; read committed by the guard' : 'repeatable read'),
  setup: [table],
  sessions: (p, n) => replicate(n, {
    steps: advisorySteps(p, Boolean(p.guard)),
    racePoint: 'check',
    connection: { default_transaction_isolation: 'repeatable read' },
  }),
  invariant,
  expect: (ctx) => expectBy({ lockstep: [ctx.params.guard ? 'serialized' : 'anomaly'] })(ctx),
  checks: [{ label: 'no guard', params: { guard: false } }],
})
