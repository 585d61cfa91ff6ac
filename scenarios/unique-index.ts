// unique-index (advisory-locks §5): the broken code, with a partial unique index on pending requests. The
// second insert waits for the first transaction, then fails with unique_violation (23505): held.
// --isolation (a row of race matrix): 23505 at READ COMMITTED and REPEATABLE READ; at SERIALIZABLE PostgreSQL
// reports the same conflict as 40001 (the other row was inserted by a concurrent serializable transaction). On
// InnoDB 1062 up to REPEATABLE READ; at SERIALIZABLE the checks lock the empty range and the inserts deadlock.
import { defineScenario, levelParam, replicate } from '../src/scenario.js'
import { isolationParam, otherLevels } from './_shared/isolation.js'
import { DEADLOCK, DUPLICATE, M } from './_shared/innodb.js'
import { beginAt, checkThenInsert, invariant, myCheckThenInsert, myPendingUnique, myTable, onTheGrid, partialUniqueIndex, table } from './_shared/setup-requests.js'

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
  params: isolationParam(),
  sessionCount: { default: 2 },
  isolation: levelParam,
  setup: ({ engine }) => (engine === 'mysql' ? [myTable, myPendingUnique] : [table, partialUniqueIndex]),
  sessions: ({ n, engine, params }) =>
    replicate(n, { steps: engine === 'mysql' ? myCheckThenInsert(false, String(params.isolation)) : checkThenInsert(beginAt(params)), racePoint: 'check' }),
  invariant: invariant(),
  documented: {
    postgres: onTheGrid({
      'read committed': { prevented: WHY, losers: '23505' },
      'repeatable read': { prevented: `${WHY} (REPEATABLE READ too: the index is checked against what is committed, not the snapshot)`, losers: '23505' },
      serializable: { prevented: "SERIALIZABLE reports the same unique-index conflict as serialization_failure (40001): the other row was inserted by a concurrent serializable transaction", losers: '40001' },
    }),
    // MySQL's form: a stored generated column, the user id while pending (NULL otherwise), with a unique key.
    // The second INSERT finds the first one's uncommitted key, waits for it (a shared lock on the duplicate), and
    // fails with 1062 ER_DUP_ENTRY (SQLSTATE 23000) when it commits (InnoDB: Locks Set by Different SQL Statements).
    mysql: onTheGrid({
      'read uncommitted': { prevented: WHY_MY, losers: DUPLICATE },
      'read committed': { prevented: WHY_MY, losers: DUPLICATE },
      'repeatable read': { prevented: WHY_MY, losers: DUPLICATE },
      serializable: { prevented: `${M.SER}: each check locks the empty range, each INSERT waits for the other's lock; ${M.DEADLOCK}`, losers: DEADLOCK, wait: true },
    }),
  },
  // race check runs the whole column of the matrix for it.
  checks: [...otherLevels(), { label: 'read uncommitted', params: { isolation: 'read uncommitted' }, engines: ['mysql'] }],
})
