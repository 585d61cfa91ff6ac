// write-skew (isolation article, 書き込みスキュー): two doctors on call; each sees 2 on call and goes off call.
// READ COMMITTED and REPEATABLE READ: nobody on call (violated). SERIALIZABLE: SSI sees the read/write
// dependency cycle and fails T2 with 40001: one doctor stays on call (held, prevented).
import { defineScenario } from '../src/scenario.js'
import { begin, expectDocumented, isolationParam, level, otherLevels } from './_fixtures/isolation.js'

export default defineScenario({
  id: 'write-skew',
  title: 'write skew: doctors on call, at least one must stay on call',
  source: 'isolation-levels article, 書き込みスキュー',
  story: [
    'Constraint: at least one doctor must be on call. Doctors 1 and 2 are on call.',
    'T1 counts 2 on call and goes off call; T2 counted 2 as well and goes off call too: nobody is on call.',
    'Each transaction is right on its own; they read the same rows and write different ones.',
    'REPEATABLE READ does not help (PostgreSQL RR is snapshot isolation). SERIALIZABLE fails T2 with 40001.',
  ],
  params: isolationParam(),
  defaultN: 2,
  nRange: [2, 2],
  isolation: level,
  setup: [
    `create table doctors (id int primary key, name text not null, on_call boolean not null)`,
    `insert into doctors values (1, 'Alice', true), (2, 'Bob', true)`,
  ],
  sessions: (p) => {
    const doctor = (id: number) => ({
      steps: {
        begin: begin(p),
        check: 'select count(*)::int as on_call from doctors where on_call',
        off: {
          sql: `-- if on_call < 2: keep on call (409)\nupdate doctors set on_call = false where id = ${id}`,
          run: (sql: import('postgres').Sql, ctx: import('../src/scenario.js').StepCtx) =>
            Number(ctx.prior.check[0].on_call) < 2
              ? ctx.reject('I am the last doctor on call')
              : sql.unsafe(`update doctors set on_call = false where id = ${id}`),
        },
        commit: 'commit',
      },
    })
    return { t1: doctor(1), t2: doctor(2) }
  },
  defaultSchedule: 'lockstep',
  lockstep: () => 't1.begin t1.check t2.begin t2.check t1.off t1.commit t2.off t2.commit',
  invariant: {
    description: () => 'at least one doctor on call',
    query: (sql) => sql`select count(*)::int as on_call from doctors where on_call`,
    observed: ([r]) => `${r.on_call} on call`,
    holds: ([r]) => Number(r.on_call) >= 1,
  },
  expect: expectDocumented('write-skew'),
  checks: otherLevels(),
})
