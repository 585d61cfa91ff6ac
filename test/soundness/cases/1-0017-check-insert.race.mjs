// soundness case 1-0017: check-insert, function-op, view, observe-table, multi-statement, read-committed, 2-sessions
// broke (b): 1 of 6 free-running trials ended VIOLATED anomaly: s1 committed, s2 committed, which --exhaustive never did
const steps = {
  "s1": [
    "select claim('s1')"
  ],
  "s2": [
    "select claim('s2'); insert into obs select 's2', (select v from state_v)"
  ]
}

export default {
  driver: 'pg',
  sessions: 2,
  setup: [
    "create table t (k int not null, who text)",
    "create function claim(w text) returns void language plpgsql as $$ begin if not exists (select 1 from t where k = 1) then insert into t (k, who) values (1, w); end if; end $$",
    "create view state_v as select (select count(*) from t)::bigint as v",
    "create table obs (who text, v bigint)"
  ],
  connection: { default_transaction_isolation: 'read committed' },
  session: async (db, ctx) => {
    for (const q of steps[ctx.session]) await db.query(q)
  },
  invariant: "select (select count(*) <= 1 from t where k = 1) and (select coalesce(bool_and(v = (select count(*) from t)), true) from obs)",
  expect: 'held',
}
