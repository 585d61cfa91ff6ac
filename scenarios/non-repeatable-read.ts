// non-repeatable-read (isolation article, 反復不能読み取り): T1 reads a balance twice; T2 updates it and
// commits in between. READ COMMITTED: the second read returns 50 (violated). REPEATABLE READ and
// SERIALIZABLE: both reads return 100 from one snapshot (held, nobody waits).
import { defineScenario } from '../src/scenario.js'
import { begin, expectDocumented, isolationParam, level, otherLevels, readsOf, readsTable, recordRead } from './_fixtures/isolation.js'

const read = 'select balance as value from accounts where id = 1'

export default defineScenario({
  id: 'non-repeatable-read',
  title: 'non-repeatable read: the same row read twice returns different values',
  source: 'isolation-levels article, 反復不能読み取り',
  story: [
    'T1 reads account 1 (100); T2 sets it to 50 and commits; T1 reads it again.',
    'READ COMMITTED takes a new snapshot per statement: the second read returns 50.',
    'REPEATABLE READ and SERIALIZABLE read from one snapshot: 100 both times.',
    "Both reads are kept in the reads table by the statements themselves; the invariant compares them.",
  ],
  params: isolationParam(),
  defaultN: 2,
  nRange: [2, 2],
  isolation: level,
  setup: [`create table accounts (id int primary key, balance int not null)`, `insert into accounts values (1, 100)`, readsTable],
  sessions: (p) => ({
    t1: { steps: { begin: begin(p), read1: recordRead('read1', read), read2: recordRead('read2', read), commit: 'commit' } },
    t2: { steps: { begin: begin(p), update: 'update accounts set balance = 50 where id = 1', commit: 'commit' } },
  }),
  defaultSchedule: 'lockstep',
  lockstep: () => 't1.begin t1.read1 t2.begin t2.update t2.commit t1.read2 t1.commit',
  invariant: {
    description: () => "T1's two reads of the same row agree",
    query: (sql) => sql.unsafe(readsOf('t1', 'read1', 'read2')),
    observed: ([r]) => `read ${r?.first ?? '-'} then ${r?.second ?? '-'}`,
    holds: ([r]) => r?.first === null || r?.second === null || Number(r.first) === Number(r.second),
  },
  expect: expectDocumented('non-repeatable-read'),
  checks: otherLevels(),
})
