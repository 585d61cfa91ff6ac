// for-update (advisory-locks §2): the broken code with FOR UPDATE on the check. FOR UPDATE locks the rows the
// SELECT returns; the check returns none, so nothing is locked and every session inserts.
import { defineScenario, replicate } from '../src/scenario.js'
import { checkThenInsert, invariant, myCheckThenInsert, myTable, racesThrough, table } from './_fixtures/setup-requests.js'

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
  params: {},
  sessionCount: { default: 2 },
  isolation: 'read committed',
  setup: ({ engine }) => [engine === 'mysql' ? myTable : table],
  sessions: ({ n, engine }) => replicate(n, { steps: engine === 'mysql' ? myCheckThenInsert(true) : checkThenInsert('begin', true), racePoint: 'check' }),
  invariant: invariant(),
  documented: {
    postgres: racesThrough('FOR UPDATE locks only rows the check returns, and it returns none: nobody waits, every session inserts'),
    // InnoDB at READ COMMITTED takes no gap locks ("InnoDB locks only index records, not the gaps before them"):
    // the empty check locks nothing. (At REPEATABLE READ it would lock the gap: see gap-lock.)
    mysql: racesThrough('READ COMMITTED: a locking read locks only the index records it finds, no gaps (InnoDB: Transaction Isolation Levels), and it finds none'),
  },
})
