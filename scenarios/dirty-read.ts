// dirty-read (isolation article, ダーティリード): T1 sets a balance to 0 and rolls back; T2 reads it in
// between. PostgreSQL never shows uncommitted data, not even at READ UNCOMMITTED: T2 reads the committed 100
// at every level, without waiting. Documented: clean at every level.
import { defineScenario } from '../src/scenario.js'
import { begin, expectDocumented, isolationParam, level, otherLevels, readsTable, recordRead } from './_fixtures/isolation.js'

export default defineScenario({
  id: 'dirty-read',
  title: 'dirty read: PostgreSQL never shows uncommitted data, not even at READ UNCOMMITTED',
  source: 'isolation-levels article, ダーティリード',
  story: [
    'T1 sets account 1 (balance 100) to 0 and has not committed; T2 reads the balance; T1 rolls back.',
    'The article: T2 reads 0, a state that never existed, and it lists READ UNCOMMITTED as allowing it.',
    'PostgreSQL: T2 reads 100 at every level, READ UNCOMMITTED included (it behaves as READ COMMITTED), and nobody waits.',
    'The read is kept in the reads table by the same statement; the invariant compares it with the committed balance.',
  ],
  params: isolationParam('read committed', ['read uncommitted']),
  defaultN: 2,
  nRange: [2, 2],
  isolation: level,
  setup: [`create table accounts (id int primary key, balance int not null)`, `insert into accounts values (1, 100)`, readsTable],
  sessions: (p) => ({
    t1: { steps: { begin: begin(p), update: 'update accounts set balance = 0 where id = 1', rollback: 'rollback' } },
    t2: { steps: { begin: begin(p), read: recordRead('read', 'select balance as value from accounts where id = 1'), commit: 'commit' } },
  }),
  defaultSchedule: 'lockstep',
  lockstep: () => 't1.begin t1.update t2.begin t2.read t1.rollback t2.commit',
  invariant: {
    description: () => 'T2 read only committed data: its read equals the committed balance',
    query: (sql) => sql`select (select value::int from reads where session = 't2') as read, (select balance from accounts where id = 1) as committed`,
    observed: ([r]) => `T2 read ${r?.read ?? 'nothing'}, committed ${r?.committed}`,
    holds: ([r]) => r?.read === null || r?.read === undefined || Number(r.read) === Number(r.committed),
  },
  expect: expectDocumented('dirty-read'),
  checks: [{ label: 'read uncommitted', params: { isolation: 'read uncommitted' } }, ...otherLevels()],
})
