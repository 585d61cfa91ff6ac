// read-skew (isolation article, 反復不能読み取り（リードスキュー）, on two rows): T1 reads account 1, T2 moves 100
// from account 1 to account 2 and commits, T1 reads account 2. READ COMMITTED: T1 sees 500 + 600 = 1100, a
// total that never existed (violated). REPEATABLE READ and SERIALIZABLE: 500 + 500 from one snapshot (held).
import { defineScenario } from '../src/scenario.js'
import { begin, expectDocumented, isolationParam, level, otherLevels, readsOf, readsTable, recordRead } from './_fixtures/isolation.js'

export default defineScenario({
  id: 'read-skew',
  title: 'read skew: two rows read at different moments add up to a total that never existed',
  source: 'isolation-levels article, 反復不能読み取り（リードスキュー）',
  story: [
    'Accounts 1 and 2 hold 500 each: 1000 in total, always. T1 reads account 1; T2 transfers 100 from 1 to 2 and',
    'commits; T1 reads account 2. READ COMMITTED: T1 saw 500 + 600 = 1100 (a backup or report that does not add up).',
    'REPEATABLE READ and SERIALIZABLE: 500 + 500 from one snapshot. The invariant adds up what T1 read.',
  ],
  params: isolationParam(),
  defaultN: 2,
  nRange: [2, 2],
  isolation: level,
  setup: [`create table accounts (id int primary key, balance int not null)`, `insert into accounts values (1, 500), (2, 500)`, readsTable],
  sessions: (p) => ({
    t1: {
      steps: {
        begin: begin(p),
        read1: recordRead('read1', 'select balance as value from accounts where id = 1'),
        read2: recordRead('read2', 'select balance as value from accounts where id = 2'),
        commit: 'commit',
      },
    },
    t2: {
      steps: {
        begin: begin(p),
        debit: 'update accounts set balance = balance - 100 where id = 1',
        credit: 'update accounts set balance = balance + 100 where id = 2',
        commit: 'commit',
      },
    },
  }),
  defaultSchedule: 'lockstep',
  lockstep: () => 't1.begin t1.read1 t2.begin t2.debit t2.credit t2.commit t1.read2 t1.commit',
  invariant: {
    description: () => 'what T1 read adds up to the total that always exists (1000)',
    query: (sql) => sql.unsafe(`${readsOf('t1', 'read1', 'read2')}, (select sum(balance)::int from accounts) as total`),
    observed: ([r]) => `T1 read ${r?.first ?? '-'} + ${r?.second ?? '-'}, total ${r?.total}`,
    holds: ([r]) => r?.first === null || r?.second === null || Number(r.first) + Number(r.second) === Number(r.total),
  },
  expect: expectDocumented('read-skew'),
  checks: otherLevels(),
})
