// soundness case 38-0002: on-conflict, autocommit, serializable, 2-sessions
// broke (b): 1 of 4 free-running trials ended HELD prevented: s1 committed, s2 40001, which --exhaustive never did
// broke (b): 2 of 4 free-running trials ended VIOLATED anomaly: s1 40001, s2 committed, which --exhaustive never did
const steps = {
  "s1": [
    "insert into t (k, who) values (1, 's1') on conflict (k) do nothing"
  ],
  "s2": [
    "insert into t (k, who) values (1, 's2') on conflict (k) do nothing"
  ]
}

export default {
  driver: 'pg',
  sessions: 2,
  setup: [
    "create table t (k int primary key, who text, v int not null default 1)"
  ],
  connection: { default_transaction_isolation: 'serializable' },
  session: async (db, ctx) => {
    for (const q of steps[ctx.session]) await db.query(q)
  },
  invariant: "select coalesce((select who from t where k = 1), '') = 's1'",
  expect: 'held',
}
