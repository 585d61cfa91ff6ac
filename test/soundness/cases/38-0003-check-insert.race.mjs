// soundness case 38-0003: check-insert, function-op, function-read, observe-seq, autocommit, serializable, 2-sessions
// broke (b): 1 of 4 free-running trials ended HELD prevented: s1 committed, s2 40001, which --exhaustive never did
const steps = {
  "s1": [
    "select claim('s1')",
    "select setval('seen_s1', state_f(), true)"
  ],
  "s2": [
    "select claim('s2')"
  ]
}

export default {
  driver: 'pg',
  sessions: 2,
  setup: [
    "create table t (k int not null, who text)",
    "create function claim(w text) returns void language plpgsql as $$ begin if not exists (select 1 from t where k = 1) then insert into t (k, who) values (1, w); end if; end $$",
    "create function state_f() returns bigint language plpgsql as $$ begin return (select count(*) from t); end $$",
    "create unlogged sequence seen_s1 minvalue 0 start 0"
  ],
  connection: { default_transaction_isolation: 'serializable' },
  session: async (db, ctx) => {
    for (const q of steps[ctx.session]) await db.query(q)
  },
  invariant: "select (select count(*) <= 1 from t where k = 1) and (select not is_called or last_value = (select count(*) from t) from seen_s1)",
  expect: 'held',
}
