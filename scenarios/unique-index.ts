// unique-index (advisory-locks §5): the broken code, with a partial unique index on pending requests. The
// second insert waits for the first transaction, then fails with unique_violation (23505): held.
import { clean, defineScenario, prevented, replicate } from '../src/scenario.js'
import { EXISTS, checkThenInsert, invariant, myCheckThenInsert, myPendingUnique, myTable, oneByOne, partialUniqueIndex, table } from './_fixtures/setup-requests.js'
import { DUPLICATE } from './_fixtures/innodb.js'

const WHY = "every insert after the first waits on the first one's index entry, then fails with unique_violation"
const WHY_MY = "every insert after the first waits on the first one's unique key entry, then fails with 1062 ER_DUP_ENTRY"

export default defineScenario({
  id: 'unique-index',
  title: 'a partial unique index holds the invariant even for the broken code',
  source: { article: 'advisory-locks', section: '5' },
  story: [
    "create unique index ... on setup_requests (user_id) where status = 'pending'.",
    'The broken check-then-insert races as before: both checks find nothing.',
    "The second insert waits on the first transaction's index entry; when that commits, it fails with unique_violation (23505).",
    'A constraint binds every write path (admin screens, future batch jobs); an advisory lock binds only code that takes it.',
  ],
  params: {},
  sessionCount: { default: 2 },
  isolation: 'read committed',
  setup: ({ engine }) => (engine === 'mysql' ? [myTable, myPendingUnique] : [table, partialUniqueIndex]),
  sessions: ({ n, engine }) => replicate(n, { steps: engine === 'mysql' ? myCheckThenInsert() : checkThenInsert(), racePoint: 'check' }),
  invariant: invariant(),
  documented: {
    postgres: {
      lockstep: ({ n }) => (n > 1 ? prevented(WHY, { committed: 1, '23505': n - 1 }) : clean('one request alone', { committed: 1 })),
      serial: (v) => clean('each check sees the requests committed before it', oneByOne(v, 1, EXISTS)),
      // Free-running: a session whose check comes after the first commit is told no instead.
      barrier: (v) =>
        v.n > 1
          ? [prevented(WHY, { committed: 1, '23505': [1, v.n - 1], [`rejected: ${EXISTS}`]: [0, v.n - 2] }), clean('the sessions happened not to overlap', oneByOne(v, 1, EXISTS))]
          : clean('one request alone', { committed: 1 }),
    },
    // MySQL's form: a stored generated column, the user id while pending (NULL otherwise), with a unique key.
    // The second INSERT finds the first one's uncommitted key, waits for it (a shared lock on the duplicate), and
    // fails with 1062 ER_DUP_ENTRY (SQLSTATE 23000) when it commits (InnoDB: Locks Set by Different SQL Statements).
    mysql: {
      lockstep: ({ n }) => (n > 1 ? prevented(WHY_MY, { committed: 1, [DUPLICATE]: n - 1 }) : clean('one request alone', { committed: 1 })),
      serial: (v) => clean('each check sees the requests committed before it', oneByOne(v, 1, EXISTS)),
      barrier: (v) =>
        v.n > 1
          ? [prevented(WHY_MY, { committed: 1, [DUPLICATE]: [1, v.n - 1], [`rejected: ${EXISTS}`]: [0, v.n - 2] }), clean('the sessions happened not to overlap', oneByOne(v, 1, EXISTS))]
          : clean('one request alone', { committed: 1 }),
    },
  },
})
