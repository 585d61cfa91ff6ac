// phantom (isolation article, ファントムリード): T1 counts accounts with balance > 100 twice; T2 inserts a
// matching row and commits in between. READ COMMITTED: 3 then 4 (violated). REPEATABLE READ: 3 and 3, which
// the SQL standard would allow to differ but PostgreSQL does not (Table 13.1). SERIALIZABLE: 3 and 3.
import { defineScenario } from '../src/scenario.js'
import { begin, expectDocumented, isolationParam, level, otherLevels, readsOf, readsTable, recordRead } from './_fixtures/isolation.js'

const count = 'select count(*) as value from accounts where balance > 100'

export default defineScenario({
  id: 'phantom',
  title: 'phantom read: the same query returns a different set of rows',
  source: 'isolation-levels article, ファントムリード',
  story: [
    'Three accounts have more than 100. T1 counts them (3); T2 inserts (4, 200) and commits; T1 counts again.',
    'READ COMMITTED: 4, a phantom. REPEATABLE READ: 3, the standard allows a phantom here, PostgreSQL does not.',
    'SERIALIZABLE: 3. Both counts are kept in the reads table; the invariant compares them.',
  ],
  params: isolationParam(),
  defaultN: 2,
  nRange: [2, 2],
  isolation: level,
  setup: [
    `create table accounts (id int primary key, balance int not null)`,
    `insert into accounts values (1, 150), (2, 300), (3, 120), (5, 80)`,
    readsTable,
  ],
  sessions: (p) => ({
    t1: { steps: { begin: begin(p), count1: recordRead('count1', count), count2: recordRead('count2', count), commit: 'commit' } },
    t2: { steps: { begin: begin(p), insert: 'insert into accounts values (4, 200)', commit: 'commit' } },
  }),
  defaultSchedule: 'lockstep',
  lockstep: () => 't1.begin t1.count1 t2.begin t2.insert t2.commit t1.count2 t1.commit',
  invariant: {
    description: () => "T1's two counts of the same predicate agree",
    query: (sql) => sql.unsafe(readsOf('t1', 'count1', 'count2')),
    observed: ([r]) => `counted ${r?.first ?? '-'} then ${r?.second ?? '-'}`,
    holds: ([r]) => r?.first === null || r?.second === null || Number(r.first) === Number(r.second),
  },
  expect: expectDocumented('phantom'),
  checks: otherLevels(),
})
