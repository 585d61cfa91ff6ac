// soundness case 38-0011: deferred-trigger, savepoint, observe-seq, transaction, read-committed, 2-sessions
// broke (a): the reduced search (1 runs) never ended VIOLATED anomaly: s1 committed, s2 committed; --exhaustive did (5 of 6, e.g. s2.q1 s2.q2 s1.q1 s1.q2)
const steps = {
  "s1": [
    "begin isolation level read committed; insert into t values (1, 's1')",
    "commit"
  ],
  "s2": [
    "begin isolation level read committed; savepoint sp; select setval('seen_s2', (select n from u), true); rollback to savepoint sp",
    "commit"
  ]
}

export default {
  driver: 'pg',
  sessions: 2,
  setup: [
    "create table t (id int, who text)",
    "create table u (n int not null)",
    "insert into u values (0)",
    "create function bump() returns trigger language plpgsql as $$ begin update u set n = n + 1; return null; end $$",
    "create constraint trigger bump after insert on t deferrable initially deferred for each row execute function bump()",
    "create unlogged sequence seen_s2 minvalue 0 start 0"
  ],
  session: async (db, ctx) => {
    for (const q of steps[ctx.session]) await db.query(q)
  },
  invariant: "select (select not is_called or last_value = (select n from u) from seen_s2)",
  expect: 'held',
}
