// read-skew (isolation-levels article, non-repeatable read (read skew), on two rows): T1 reads account 1, T2
// moves 100 from account 1 to account 2 and commits, T1 reads account 2. READ COMMITTED: T1 sees 500 + 600 =
// 1100, a total that never existed (violated). REPEATABLE READ and SERIALIZABLE: 500 + 500 from one snapshot.
import { anomaly, clean, defineScenario, levelParam, serialized, type SessionSpec } from '../src/scenario.js'
import { begin, isolationParam, readsOf, readsTable, recordRead, otherLevels } from './_shared/isolation.js'
import { M, keep, myBegin, myReadsOf, myReadsTable } from './_shared/innodb.js'

const BOTH = { t1: 'committed', t2: 'committed' }

/** InnoDB form: each read is a plain SELECT, written down by the next step (keep). */
function innodb(level: string): Record<string, SessionSpec> {
  return {
    t1: {
      steps: {
        begin: myBegin(level),
        read1: 'select balance as value from accounts where id = 1',
        keep1: keep('read1'),
        read2: 'select balance as value from accounts where id = 2',
        keep2: keep('read2'),
        commit: 'commit',
      },
    },
    t2: {
      steps: {
        begin: myBegin(level),
        debit: 'update accounts set balance = balance - 100 where id = 1',
        credit: 'update accounts set balance = balance + 100 where id = 2',
        commit: 'commit',
      },
    },
  }
}

export default defineScenario({
  id: 'read-skew',
  title: 'read skew: two rows read at different moments add up to a total that never existed',
  source: { article: 'isolation-levels', section: 'Anomalies: non-repeatable read (read skew)' },
  story: [
    'Accounts 1 and 2 hold 500 each: 1000 in total, always. T1 reads account 1; T2 transfers 100 from 1 to 2 and',
    'commits; T1 reads account 2. READ COMMITTED: T1 saw 500 + 600 = 1100 (a backup or report that does not add up).',
    'REPEATABLE READ and SERIALIZABLE: 500 + 500 from one snapshot. The invariant adds up what T1 read.',
  ],
  params: isolationParam(),
  sessionCount: { default: 2, min: 2, max: 2 },
  isolation: levelParam,
  setup: ({ engine }) => [`create table accounts (id int primary key, balance int not null)`, `insert into accounts values (1, 500), (2, 500)`, engine === 'mysql' ? myReadsTable : readsTable],
  sessions: ({ params, engine }): Record<string, SessionSpec> => (engine === 'mysql' ? innodb(String(params.isolation)) : {
    t1: {
      steps: {
        begin: begin(params),
        read1: recordRead('read1', 'select balance as value from accounts where id = 1'),
        read2: recordRead('read2', 'select balance as value from accounts where id = 2'),
        commit: 'commit',
      },
    },
    t2: {
      steps: {
        begin: begin(params),
        debit: 'update accounts set balance = balance - 100 where id = 1',
        credit: 'update accounts set balance = balance + 100 where id = 2',
        commit: 'commit',
      },
    },
  }),
  permutation: ({ engine }) =>
    engine === 'mysql'
      ? 't1.begin t1.read1 t1.keep1 t2.begin t2.debit t2.credit t2.commit t1.read2 t1.keep2 t1.commit'
      : 't1.begin t1.read1 t2.begin t2.debit t2.credit t2.commit t1.read2 t1.commit',
  defaultSchedule: 'lockstep',
  invariant: {
    description: 'what T1 read adds up to the total that always exists (1000)',
    sql: ({ engine }) =>
      engine === 'mysql'
        ? `select first + second = total as held, first, second, total
  from (select ${myReadsOf('t1', 'read1', 'read2')}, (select cast(sum(balance) as signed) from accounts) as total) x`
        : `select first + second = total as held, first, second, total
  from (select ${readsOf('t1', 'read1', 'read2')}, (select sum(balance)::int from accounts) as total) x`,
    observed: (r) => `T1 read ${r.first ?? '-'} + ${r.second ?? '-'}, total ${r.total}`,
  },
  documented: {
    postgres: {
      levels: {
        'read committed': anomaly('each statement sees a new snapshot (13.2.1)', BOTH),
        'repeatable read': clean('one snapshot per transaction (13.2.2)', BOTH),
        serializable: clean('one snapshot per transaction', BOTH),
      },
      serial: clean('T1 read both rows before T2 began', BOTH),
    },
    mysql: {
      levels: {
        'read uncommitted': anomaly(`${M.RU}: T1 sees 500 + 600`, BOTH),
        'read committed': anomaly(M.RC, BOTH),
        'repeatable read': clean(M.RR, BOTH),
        serializable: serialized(`${M.SER}: T2's debit waits for T1's shared lock on account 1`, BOTH),
      },
      serial: clean('T1 read both rows before T2 began', BOTH),
    },
  },
  checks: otherLevels(),
})
