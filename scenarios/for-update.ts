// for-update (advisory-locks §2): the broken code with FOR UPDATE on the check. FOR UPDATE locks the rows the
// SELECT returns; the check returns none, so nothing is locked and every session inserts.
// --isolation (a row of race matrix): REPEATABLE READ races through as well on PostgreSQL; SERIALIZABLE fails the
// losers with 40001 (SSI). On InnoDB REPEATABLE READ and SERIALIZABLE lock the empty range (gap locks): the
// inserts wait for each other, a deadlock.
import { defineScenario, levelParam, replicate } from '../src/scenario.js'
import { isolationParam, otherLevels } from './_shared/isolation.js'
import { DEADLOCK, M } from './_shared/innodb.js'
import { beginAt, checkThenInsert, invariant, myCheckThenInsert, myTable, onTheGrid, table } from './_shared/setup-requests.js'

const PG_RC = 'FOR UPDATE locks only rows the check returns, and it returns none: nobody waits, every session inserts'
const MY_RC = 'READ COMMITTED: a locking read locks only the index records it finds, no gaps (InnoDB: Transaction Isolation Levels), and it finds none'
const MY_GAP = `${M.GAP}: each check locks the empty range, each INSERT waits for the other's gap lock; ${M.DEADLOCK}`

export default defineScenario({
  id: 'for-update',
  title: 'FOR UPDATE on the check does not help: it locks no row that does not exist',
  source: { article: 'advisory-locks', section: '2' },
  story: [
    'The first fix everyone tries: SELECT ... FOR UPDATE on the check.',
    'FOR UPDATE locks only rows the SELECT returns. The check returns no row, so it locks nothing.',
    'Both sessions go on to insert, as in broken: two pending requests.',
    'Locking the parent users row would serialize them (parent-row), at the price of blocking unrelated updates of that user.',
  ],
  params: isolationParam(),
  sessionCount: { default: 2 },
  isolation: levelParam,
  setup: ({ engine }) => [engine === 'mysql' ? myTable : table],
  sessions: ({ n, engine, params }) =>
    replicate(n, { steps: engine === 'mysql' ? myCheckThenInsert(true, String(params.isolation)) : checkThenInsert(beginAt(params), true), racePoint: 'check' }),
  invariant: invariant(),
  documented: {
    postgres: onTheGrid({
      'read committed': { races: PG_RC },
      'repeatable read': { races: `REPEATABLE READ: ${PG_RC} (13.2.2)` },
      serializable: { prevented: 'SSI: each check read the empty set the others write into (FOR UPDATE or not); the first to commit wins, the rest fail with 40001 (13.2.3)', losers: '40001' },
    }),
    // InnoDB at READ COMMITTED takes no gap locks ("InnoDB locks only index records, not the gaps before them"):
    // the empty check locks nothing. (At REPEATABLE READ it would lock the gap: see gap-lock.)
    mysql: onTheGrid({
      'read uncommitted': { races: MY_RC.replace('READ COMMITTED', 'READ UNCOMMITTED') },
      'read committed': { races: MY_RC },
      'repeatable read': { prevented: MY_GAP, losers: DEADLOCK, wait: true },
      serializable: { prevented: MY_GAP, losers: DEADLOCK, wait: true },
    }),
  },
  // race check runs the whole column of the matrix for it.
  checks: [...otherLevels(), { label: 'read uncommitted', params: { isolation: 'read uncommitted' }, engines: ['mysql'] }],
})
