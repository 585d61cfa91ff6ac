// phantom (isolation-levels article, phantom read): T1 counts accounts with balance > 100 twice; T2 inserts a
// matching row and commits in between. READ COMMITTED: 3 then 4 (violated). REPEATABLE READ: 3 and 3, which
// the SQL standard would allow to differ but PostgreSQL does not (Table 13.1). SERIALIZABLE: 3 and 3.
import { anomaly, clean, defineScenario, levelParam, serialized, type SessionSpec } from '../src/scenario.js'
import { begin, isolationParam, readsOf, readsTable, recordRead, otherLevels } from './_shared/isolation.js'
import { M, keep, myBegin, myReadsOf, myReadsTable } from './_shared/innodb.js'

const count = 'select count(*) as value from accounts where balance > 100'
const BOTH = { t1: 'committed', t2: 'committed' }

export default defineScenario({
  id: 'phantom',
  title: 'phantom read: the same query returns a different set of rows',
  source: { article: 'isolation-levels', section: 'Anomalies: phantom read' },
  story: [
    'Three accounts have more than 100. T1 counts them (3); T2 inserts (4, 200) and commits; T1 counts again.',
    'READ COMMITTED: 4, a phantom. REPEATABLE READ: 3, the standard allows a phantom here, PostgreSQL does not.',
    'SERIALIZABLE: 3. Both counts are kept in the reads table; the invariant compares them.',
  ],
  params: isolationParam(),
  sessionCount: { default: 2, min: 2, max: 2 },
  isolation: levelParam,
  setup: ({ engine }) => [
    `create table accounts (id int primary key, balance int not null)`,
    `insert into accounts values (1, 150), (2, 300), (3, 120), (5, 80)`,
    engine === 'mysql' ? myReadsTable : readsTable,
  ],
  sessions: ({ params, engine }): Record<string, SessionSpec> =>
    engine === 'mysql'
      ? {
          t1: { steps: { begin: myBegin(String(params.isolation)), count1: count, keep1: keep('count1'), count2: count, keep2: keep('count2'), commit: 'commit' } },
          t2: { steps: { begin: myBegin(String(params.isolation)), insert: 'insert into accounts values (4, 200)', commit: 'commit' } },
        }
      : {
          t1: { steps: { begin: begin(params), count1: recordRead('count1', count), count2: recordRead('count2', count), commit: 'commit' } },
          t2: { steps: { begin: begin(params), insert: 'insert into accounts values (4, 200)', commit: 'commit' } },
        },
  permutation: ({ engine }) =>
    engine === 'mysql'
      ? 't1.begin t1.count1 t1.keep1 t2.begin t2.insert t2.commit t1.count2 t1.keep2 t1.commit'
      : 't1.begin t1.count1 t2.begin t2.insert t2.commit t1.count2 t1.commit',
  defaultSchedule: 'lockstep',
  invariant: {
    description: "T1's two counts of the same predicate agree",
    sql: ({ engine }) => `select first = second as held, first, second from (select ${(engine === 'mysql' ? myReadsOf : readsOf)('t1', 'count1', 'count2')}) x`,
    observed: (r) => `counted ${r.first ?? '-'} then ${r.second ?? '-'}`,
  },
  documented: {
    postgres: {
      // Table 13.1 phantom read: possible at READ COMMITTED; "Allowed, but not in PG" at REPEATABLE READ.
      levels: {
        'read committed': anomaly('each statement sees a new snapshot (13.2.1)', BOTH),
        'repeatable read': clean('phantom "allowed, but not in PG" (Table 13.1)', BOTH),
        serializable: clean('one snapshot per transaction', BOTH),
      },
      serial: clean('T1 counted twice before T2 began', BOTH),
    },
    mysql: {
      levels: {
        'read uncommitted': anomaly(`${M.RU}: the second count sees the new row`, BOTH),
        'read committed': anomaly(M.RC, BOTH),
        'repeatable read': clean(`${M.RR}: no phantom in consistent reads`, BOTH),
        // The first count is a shared locking read of the whole range (next-key locks): T2's INSERT waits.
        serializable: serialized(`${M.SER}; ${M.GAP}: T2's INSERT waits until T1 commits`, BOTH),
      },
      serial: clean('T1 counted twice before T2 began', BOTH),
    },
  },
  checks: otherLevels(),
})
