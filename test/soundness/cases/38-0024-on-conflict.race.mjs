// soundness case 38-0024: on-conflict, observe-table, savepoint, multi-statement-txn, repeatable-read, 3-sessions
// broke (b): 1 of 4 free-running trials ended HELD prevented: s1 committed, s2 40001, s3 committed, which --exhaustive never did
const steps = {
  "s1": [
    "begin isolation level repeatable read; savepoint a; insert into t (k, who) values (1, 's1') on conflict (k) do nothing; release savepoint a; commit"
  ],
  "s2": [
    "begin isolation level repeatable read; savepoint a; insert into t (k, who) values (1, 's2') on conflict (k) do nothing; release savepoint a; insert into obs select 's2', (select count(*) from t); commit"
  ],
  "s3": [
    "begin isolation level repeatable read; savepoint a; insert into t (k, who) values (1, 's3') on conflict (k) do nothing; release savepoint a; commit"
  ]
}

export default {
  driver: 'pg',
  sessions: 3,
  setup: [
    "create table t (k int primary key, who text, v int not null default 1)",
    "create table obs (who text, v bigint)"
  ],
  session: async (db, ctx) => {
    for (const q of steps[ctx.session]) await db.query(q)
  },
  invariant: "select coalesce((select who from t where k = 1), '') = 's1' and (select coalesce(bool_and(v = (select count(*) from t)), true) from obs)",
  expect: 'held',
}
