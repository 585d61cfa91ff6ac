// non-repeatable-read (isolation-levels article, non-repeatable read): T1 reads a balance twice; T2 updates it
// and commits in between. READ COMMITTED: the second read returns 50 (violated). REPEATABLE READ and
// SERIALIZABLE: both reads return 100 from one snapshot (held, nobody waits).
import { anomaly, clean, defineScenario, levelParam, serialized, type SessionSpec } from '../src/scenario.js'
import { begin, isolationParam, readsOf, readsTable, recordRead, otherLevels } from './_shared/isolation.js'
import { M, keep, myBegin, myReadsOf, myReadsTable } from './_shared/innodb.js'

const read = 'select balance as value from accounts where id = 1'
const BOTH = { t1: 'committed', t2: 'committed' }

export default defineScenario({
  id: 'non-repeatable-read',
  title: 'non-repeatable read: the same row read twice returns different values',
  source: { article: 'isolation-levels', section: 'Anomalies: non-repeatable read (read skew)' },
  story: [
    'T1 reads account 1 (100); T2 sets it to 50 and commits; T1 reads it again.',
    'READ COMMITTED takes a new snapshot per statement: the second read returns 50.',
    'REPEATABLE READ and SERIALIZABLE read from one snapshot: 100 both times.',
    'Both reads are kept in the reads table by the statements themselves; the invariant compares them.',
  ],
  params: isolationParam(),
  sessionCount: { default: 2, min: 2, max: 2 },
  isolation: levelParam,
  setup: ({ engine }) => [`create table accounts (id int primary key, balance int not null)`, `insert into accounts values (1, 100)`, engine === 'mysql' ? myReadsTable : readsTable],
  sessions: ({ params, engine }): Record<string, SessionSpec> =>
    engine === 'mysql'
      ? {
          t1: { steps: { begin: myBegin(String(params.isolation)), read1: read, keep1: keep('read1'), read2: read, keep2: keep('read2'), commit: 'commit' } },
          t2: { steps: { begin: myBegin(String(params.isolation)), update: 'update accounts set balance = 50 where id = 1', commit: 'commit' } },
        }
      : {
          t1: { steps: { begin: begin(params), read1: recordRead('read1', read), read2: recordRead('read2', read), commit: 'commit' } },
          t2: { steps: { begin: begin(params), update: 'update accounts set balance = 50 where id = 1', commit: 'commit' } },
        },
  permutation: ({ engine }) =>
    engine === 'mysql'
      ? 't1.begin t1.read1 t1.keep1 t2.begin t2.update t2.commit t1.read2 t1.keep2 t1.commit'
      : 't1.begin t1.read1 t2.begin t2.update t2.commit t1.read2 t1.commit',
  defaultSchedule: 'lockstep',
  invariant: {
    description: "T1's two reads of the same row agree",
    sql: ({ engine }) => `select first = second as held, first, second from (select ${(engine === 'mysql' ? myReadsOf : readsOf)('t1', 'read1', 'read2')}) x`,
    observed: (r) => `read ${r.first ?? '-'} then ${r.second ?? '-'}`,
  },
  documented: {
    postgres: {
      // Table 13.1 nonrepeatable read: possible at READ COMMITTED only.
      levels: {
        'read committed': anomaly('each statement sees a new snapshot (13.2.1)', BOTH),
        'repeatable read': clean('one snapshot per transaction (13.2.2)', BOTH),
        serializable: clean('one snapshot per transaction', BOTH),
      },
      serial: clean('T1 read twice before T2 began', BOTH),
    },
    mysql: {
      levels: {
        'read uncommitted': anomaly(`${M.RU}: the second read sees 50`, BOTH),
        'read committed': anomaly(M.RC, BOTH),
        'repeatable read': clean(M.RR, BOTH),
        // T1's first read is a shared locking read: T2's UPDATE waits until T1 commits.
        serializable: serialized(`${M.SER}: T2's UPDATE waits for T1's shared lock`, BOTH),
      },
      serial: clean('T1 read twice before T2 began', BOTH),
    },
  },
  checks: otherLevels(),
})
