// soundness case 1-0008: advisory-lock, check-insert, exception-block, observe-seq, multi-statement-txn, read-committed, 3-sessions
// broke (b): 2 of 6 free-running trials ended HELD serialized: s1 committed, s2 committed, s3 committed, which --exhaustive never did
const steps = {
  "s1": [
    "begin isolation level read committed; select pg_advisory_xact_lock(800100011); insert into t (k, who) select 1, 's1' where not exists (select 1 from t where k = 1); commit"
  ],
  "s2": [
    "begin isolation level read committed; select pg_advisory_xact_lock(800100011); insert into t (k, who) select 1, 's2' where not exists (select 1 from t where k = 1); select setval('seen_s2', peek(), true); commit"
  ],
  "s3": [
    "begin isolation level read committed; select pg_advisory_xact_lock(800100011); insert into t (k, who) select 1, 's3' where not exists (select 1 from t where k = 1); commit"
  ]
}

export default {
  driver: 'pg',
  sessions: 3,
  setup: [
    "create table t (k int not null, who text)",
    "create function peek() returns bigint language plpgsql as $$ declare v bigint; begin begin v := (select count(*) from t); raise exception 'undo'; exception when others then null; end; return v; end $$",
    "create unlogged sequence seen_s2 minvalue 0 start 0"
  ],
  session: async (db, ctx) => {
    for (const q of steps[ctx.session]) await db.query(q)
  },
  invariant: "select (select count(*) <= 1 from t where k = 1) and (select not is_called or last_value = (select count(*) from t) from seen_s2)",
  expect: 'held',
}
