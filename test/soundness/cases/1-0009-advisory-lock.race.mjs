// soundness case 1-0009: advisory-lock, check-insert, view, observe-seq, multi-statement, serializable, 2-sessions
// broke (b): 1 of 6 free-running trials ended HELD prevented: s1 committed, s2 40001, which --exhaustive never did
const steps = {
  "s1": [
    "select pg_advisory_xact_lock(800100012); insert into t (k, who) select 1, 's1' where not exists (select 1 from t where k = 1)"
  ],
  "s2": [
    "select pg_advisory_xact_lock(800100012); insert into t (k, who) select 1, 's2' where not exists (select 1 from t where k = 1); select setval('seen_s2', (select v from state_v), true)"
  ]
}

export default {
  driver: 'pg',
  sessions: 2,
  setup: [
    "create table t (k int not null, who text)",
    "create view state_v as select (select count(*) from t)::bigint as v",
    "create unlogged sequence seen_s2 minvalue 0 start 0"
  ],
  connection: { default_transaction_isolation: 'serializable' },
  session: async (db, ctx) => {
    for (const q of steps[ctx.session]) await db.query(q)
  },
  invariant: "select (select count(*) <= 1 from t where k = 1) and (select not is_called or last_value = (select count(*) from t) from seen_s2)",
  expect: 'held',
}
