// soundness case 38-0026: for-update, multi-statement, repeatable-read, 3-sessions
// broke (b): 2 of 4 free-running trials ended HELD prevented: s1 committed, s2 committed, s3 40001, which --exhaustive never did
const steps = {
  "s1": [
    "update jobs set taken = 's1' where id = (select id from jobs where taken is null order by id limit 1 for update)"
  ],
  "s2": [
    "update jobs set taken = 's2' where id = (select id from jobs where taken is null order by id limit 1 for update)"
  ],
  "s3": [
    "update jobs set taken = 's3' where id = (select id from jobs where taken is null order by id limit 1 for update)"
  ]
}

export default {
  driver: 'pg',
  sessions: 3,
  setup: [
    "create table jobs (id int primary key, taken text)",
    "insert into jobs values (1, null), (2, null)"
  ],
  connection: { default_transaction_isolation: 'repeatable read' },
  session: async (db, ctx) => {
    for (const q of steps[ctx.session]) await db.query(q)
  },
  invariant: "select coalesce((select taken from jobs where id = 1), '') = 's1'",
  expect: 'held',
}
