// gap-lock (isolation-levels article, InnoDB gap locks): s1 locks the range 10 < id < 20 of orders FOR UPDATE, where
// no row exists yet; s2 inserts id 15 into that gap. At REPEATABLE READ (InnoDB's default) and SERIALIZABLE the
// range lock includes the gap: s2's INSERT waits until s1 commits, and s1's second locking count of the range is
// still 0 (held, serialized). At READ COMMITTED and READ UNCOMMITTED InnoDB takes no gap locks: s2 inserts at once,
// and s1's second locking count sees the new row: a phantom in locking reads (violated). InnoDB only.
import { anomaly, clean, defineScenario, levelParam, serialized } from '../src/scenario.js'
import { isolationParam } from './_shared/isolation.js'
import { INNODB_LEVELS, M, keep, myBegin, myReadsOf, myReadsTable } from './_shared/innodb.js'

const BOTH = { s1: 'committed', s2: 'committed' }
const range = 'select count(*) as value from orders where id > 10 and id < 20 for update'
const NO_GAPS = `${M.GAP}: s2 inserts at once, and s1's second locking count sees id 15`

export default defineScenario({
  id: 'gap-lock',
  title: 'a range locked FOR UPDATE blocks inserts into its gap at REPEATABLE READ, not at READ COMMITTED (InnoDB)',
  source: { article: 'isolation-levels', section: 'Lock internals: InnoDB gap locks' },
  story: [
    'orders holds ids 10, 20 and 30. s1 locks 10 < id < 20 FOR UPDATE (no row there) and counts it: 0.',
    "s2 inserts id 15 into that gap. At REPEATABLE READ (InnoDB's default) the range lock covers the gap: s2 waits,",
    "s1 counts again under its lock (0) and commits, then s2's insert goes in. At READ COMMITTED InnoDB takes no gap",
    'locks: s2 inserts and commits at once, and s1 counts 1: a phantom in locking reads. Each count is written down.',
  ],
  params: { ...isolationParam('repeatable read'), isolation: { ...isolationParam('repeatable read').isolation, choices: INNODB_LEVELS } },
  sessionCount: { default: 2, min: 2, max: 2 },
  isolation: levelParam,
  setup: [`create table orders (id int primary key, amount int not null)`, `insert into orders values (10, 100), (20, 200), (30, 300)`, myReadsTable],
  sessions: ({ params }) => ({
    s1: {
      steps: { begin: myBegin(String(params.isolation)), lock: range, keep1: keep('lock'), again: range, keep2: keep('again'), commit: 'commit' },
    },
    s2: { steps: { begin: myBegin(String(params.isolation)), insert: 'insert into orders values (15, 150)', commit: 'commit' } },
  }),
  permutation: 's1.begin s1.lock s1.keep1 s2.begin s2.insert s2.commit s1.again s1.keep2 s1.commit',
  defaultSchedule: 'lockstep',
  invariant: {
    description: "s1's two locking counts of the range it locked agree",
    sql: `select first = second as held, first, second from (select ${myReadsOf('s1', 'lock', 'again')}) x`,
    observed: (r) => `s1 counted ${r.first ?? '-'} then ${r.second ?? '-'} rows in 10 < id < 20`,
  },
  documented: {
    mysql: {
      levels: {
        'read uncommitted': anomaly(NO_GAPS, BOTH),
        'read committed': anomaly(NO_GAPS, BOTH),
        'repeatable read': serialized(`${M.GAP}: s2's INSERT (an insert intention lock) waits for s1's gap lock`, BOTH),
        serializable: serialized(`${M.GAP}: s2's INSERT waits for s1's gap lock`, BOTH),
      },
      serial: clean('s1 counted twice before s2 inserted', BOTH),
    },
  },
  unavailable: {
    postgres: 'PostgreSQL has no gap locks: FOR UPDATE locks only the rows it returns, and an insert into the range never waits',
  },
  checks: (['read uncommitted', 'read committed', 'serializable'] as const).map((l) => ({ label: l, params: { isolation: l } })),
})
