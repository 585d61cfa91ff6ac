// soundness case 38-0007: nowait, function-read, observe-table, autocommit, serializable, 2-sessions
// broke (b): 1 of 4 free-running trials ended HELD prevented: s1 committed, s2 40001, which --exhaustive never did
// broke (b): 1 of 4 free-running trials ended VIOLATED anomaly: s1 40001, s2 committed, which --exhaustive never did
const steps = {
  "s1": [
    "update jobs set taken = 's1' where id = (select id from jobs where taken is null order by id limit 1 for update nowait)"
  ],
  "s2": [
    "update jobs set taken = 's2' where id = (select id from jobs where taken is null order by id limit 1 for update nowait)",
    "insert into obs select 's2', state_f()"
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
  connection: { default_transaction_isolation: 'serializable' },
  session: async (db, ctx) => {
    for (const q of steps[ctx.session]) await db.query(q)
  },
  invariant: "select coalesce((select taken from jobs where id = 1), '') = 's1' and (select coalesce(bool_and(v = (select count(*) from jobs where taken is not null)), true) from obs)",
  expect: 'held',
}
