// soundness case 1-0005: nowait, function-read, observe-table, transaction, repeatable-read, 2-sessions
// broke (a): the reduced search (4 runs) never ended VIOLATED anomaly: s1 55P03, s2 committed; --exhaustive did (1 of 11, e.g. s2.q1 s2.q2 s1.q1 s2.q3)
const steps = {
  "s1": [
    "begin isolation level repeatable read; update jobs set taken = 's1' where id = (select id from jobs where taken is null order by id limit 1 for update nowait)",
    "insert into obs select 's1', state_f()",
    "commit"
  ],
  "s2": [
    "begin isolation level repeatable read",
    "update jobs set taken = 's2' where id = (select id from jobs where taken is null order by id limit 1 for update nowait)",
    "commit"
  ]
}

export default {
  driver: 'pg',
  sessions: 2,
  setup: [
    "create table jobs (id int primary key, taken text)",
    "insert into jobs values (1, null), (2, null)",
    "create function state_f() returns bigint language plpgsql as $$ begin return (select count(*) from jobs where taken is not null); end $$",
    "create table obs (who text, v bigint)"
  ],
  session: async (db, ctx) => {
    for (const q of steps[ctx.session]) await db.query(q)
  },
  invariant: "select coalesce((select taken from jobs where id = 1), '') = 's1' and (select coalesce(bool_and(v = (select count(*) from jobs where taken is not null)), true) from obs)",
  expect: 'held',
}
