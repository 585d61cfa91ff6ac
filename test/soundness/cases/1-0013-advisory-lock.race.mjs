// soundness case 1-0013: advisory-lock, check-insert, observe-seq, autocommit, serializable, 2-sessions
// broke (b): 1 of 6 free-running trials ended HELD prevented: s1 committed, s2 40001, which --exhaustive never did
// broke (b): 2 of 6 free-running trials ended HELD prevented: s1 40001, s2 committed, which --exhaustive never did
const steps = {
  "s1": [
    "select pg_advisory_xact_lock(800100016)",
    "insert into t (k, who) select 1, 's1' where not exists (select 1 from t where k = 1)",
    "select setval('seen_s1', (select count(*) from t), true)"
  ],
  "s2": [
    "select pg_advisory_xact_lock(800100016)",
    "insert into t (k, who) select 1, 's2' where not exists (select 1 from t where k = 1)"
  ]
}

export default {
  driver: 'pg',
  sessions: 2,
  setup: [
    "create table t (k int not null, who text)",
    "create unlogged sequence seen_s1 minvalue 0 start 0"
  ],
  connection: { default_transaction_isolation: 'serializable' },
  session: async (db, ctx) => {
    for (const q of steps[ctx.session]) await db.query(q)
  },
  invariant: "select (select count(*) <= 1 from t where k = 1) and (select not is_called or last_value = (select count(*) from t) from seen_s1)",
  expect: 'held',
}
