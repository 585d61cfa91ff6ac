// lost-update (isolation-levels article, 更新の消失): T1 and T2 read 100; T1 writes 150 and commits; T2 writes 70.
// READ COMMITTED: balance 70, T1's deposit lost (violated). REPEATABLE READ and SERIALIZABLE: T2's UPDATE
// fails with 40001 (first updater wins), balance 150 = 100 + the one committed deposit (held, prevented).
import { anomaly, defineScenario, levelParam } from '../src/scenario.js'
import { isolationParam, otherLevels } from './_shared/isolation.js'
import { BOTH, documented, invariant, myLostUpdate, myPermutation, myReadModifyWrite, myTables, readModifyWrite, tables } from './_shared/lost-update.js'

export default defineScenario({
  id: 'lost-update',
  title: 'lost update: read-modify-write overwrites a concurrent update',
  source: { article: 'isolation-levels', section: 'Anomalies: lost update' },
  story: [
    'Balance 100. T1 reads 100 and writes 100 + 50; T2 read 100 too and writes 100 - 30 after T1 committed.',
    'READ COMMITTED: the final balance is 70, not 120: T1\'s deposit of 50 is lost.',
    'REPEATABLE READ and SERIALIZABLE: T2 may not update a row changed since its snapshot: 40001, T2 rolls back.',
    'Each UPDATE records its delta in applied in the same statement; the invariant is balance = 100 + committed deltas.',
  ],
  params: {
    ...isolationParam(),
    snapshotIsolation: {
      flag: '--snapshot-isolation',
      description: "MariaDB only: each session sets innodb_snapshot_isolation=ON first (OFF by default in 10.11), so REPEATABLE READ refuses the lost update with 1020",
      kind: 'boolean',
      default: false,
    },
  },
  sessionCount: { default: 2, min: 2, max: 2 },
  isolation: levelParam,
  setup: ({ engine }) => (engine === 'mysql' ? myTables : tables),
  sessions: ({ params: p, engine }) =>
    engine === 'mysql' ? { t1: myReadModifyWrite(p, 't1'), t2: myReadModifyWrite(p, 't2') } : { t1: readModifyWrite(p, 't1'), t2: readModifyWrite(p, 't2') },
  defaultSchedule: 'lockstep',
  permutation: ({ engine, params }) => {
    const perm = 't1.begin t1.read t2.begin t2.read t1.update t1.commit t2.update t2.commit'
    if (engine !== 'mysql') return perm
    return (params.snapshotIsolation ? 't1.snapshot t2.snapshot ' : '') + myPermutation(perm)
  },
  invariant,
  documented: {
    postgres: documented(anomaly('the second UPDATE writes the balance it computed from its stale read (13.2.1)', BOTH)),
    mysql: myLostUpdate(),
  },
  checks: [
    ...otherLevels(),
    { label: 'read uncommitted', params: { isolation: 'read uncommitted' }, engines: ['mysql'] },
    { label: 'repeatable read, snapshot isolation', params: { isolation: 'repeatable read', snapshotIsolation: true }, engines: ['mysql'] },
  ],
})
