// locking-read (isolation-levels article, MySQL InnoDB: "locking-read inconsistency"): in one REPEATABLE READ
// transaction a plain SELECT reads the snapshot and SELECT ... FOR UPDATE reads the newest committed row, so the same
// WHERE clause returns different values (violated). READ COMMITTED: both read the newest committed row (held).
// SERIALIZABLE: the plain SELECT is a shared locking read; T2's UPDATE waits for it, T1's FOR UPDATE queues behind
// T2's request, and InnoDB rolls T2 back from the deadlock (held, prevented). InnoDB only.
import { anomaly, clean, defineScenario, levelParam, prevented } from '../src/scenario.js'
import { isolationParam } from './_shared/isolation.js'
import { DEADLOCK, INNODB_LEVELS, M, keep, myBegin, myReadsOf, myReadsTable } from './_shared/innodb.js'

const BOTH = { t1: 'committed', t2: 'committed' }
const plain = 'select balance as value from accounts where id = 1'

export default defineScenario({
  id: 'locking-read',
  title: 'at REPEATABLE READ a plain SELECT and a SELECT ... FOR UPDATE in one transaction see different rows (InnoDB)',
  source: { article: 'isolation-levels', section: 'Common pitfalls: 2. MySQL REPEATABLE READ does not prevent write skew' },
  story: [
    'Account 1 holds 100. T1 reads it (100); T2 sets it to 50 and commits; T1 reads it again with a plain SELECT and',
    'then with SELECT ... FOR UPDATE, in the same transaction. At REPEATABLE READ the plain SELECT reads the snapshot',
    '(100) and the locking read the newest committed row (50): the same WHERE clause, two answers. This is the',
    "article's \"locking-read inconsistency\", and why FOR UPDATE fixes write skew on MySQL. Each read is written down.",
  ],
  params: { ...isolationParam('repeatable read'), isolation: { ...isolationParam('repeatable read').isolation, choices: INNODB_LEVELS } },
  sessionCount: { default: 2, min: 2, max: 2 },
  isolation: levelParam,
  setup: [`create table accounts (id int primary key, balance int not null)`, `insert into accounts values (1, 100)`, myReadsTable],
  sessions: ({ params }) => ({
    t1: {
      steps: {
        begin: myBegin(String(params.isolation)),
        first: plain,
        keep1: keep('first'),
        plain,
        keep2: keep('plain'),
        locking: `${plain} for update`,
        keep3: keep('locking'),
        commit: 'commit',
      },
    },
    t2: { steps: { begin: myBegin(String(params.isolation)), update: 'update accounts set balance = 50 where id = 1', commit: 'commit' } },
  }),
  permutation: 't1.begin t1.first t1.keep1 t2.begin t2.update t2.commit t1.plain t1.keep2 t1.locking t1.keep3 t1.commit',
  defaultSchedule: 'lockstep',
  invariant: {
    description: "T1's plain read and its locking read of the same row, one after the other, agree",
    sql: `select first = second as held, first, second from (select ${myReadsOf('t1', 'plain', 'locking')}) x`,
    observed: (r) => `plain SELECT ${r.first ?? '-'}, SELECT ... FOR UPDATE ${r.second ?? '-'}`,
  },
  documented: {
    mysql: {
      levels: {
        'read uncommitted': clean(`${M.RU}; both read the newest row, 50`, BOTH),
        'read committed': clean(`${M.RC}; both read the newest committed row, 50`, BOTH),
        'repeatable read': anomaly(`${M.RR}, but ${M.LOCKING}: 100, then 50`, BOTH),
        // T1 holds a shared lock (its plain reads), T2's UPDATE waits for it, and T1's FOR UPDATE asks for an exclusive
        // lock behind T2's waiting request: the manual's own deadlock example ("An InnoDB Deadlock Example"), in which
        // the waiting writer is rolled back. T1 read 100 both ways.
        serializable: prevented(`${M.SER}; T1's FOR UPDATE queues behind T2's waiting UPDATE: a deadlock, and InnoDB rolls back T2 (1213)`, {
          t1: 'committed',
          t2: DEADLOCK,
        }),
      },
      serial: clean('T1 read everything before T2 began', BOTH),
    },
  },
  unavailable: {
    postgres: "PostgreSQL's REPEATABLE READ does not read a newer row under FOR UPDATE: it fails with 40001 instead (lost-update-for-update shows it)",
  },
  checks: (['read uncommitted', 'read committed', 'serializable'] as const).map((l) => ({ label: l, params: { isolation: l } })),
})
