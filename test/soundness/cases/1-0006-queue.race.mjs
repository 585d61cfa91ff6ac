// soundness case 1-0006: for-update, exception-block, observe-seq, autocommit, serializable, 2-sessions
// broke (b): 1 of 6 free-running trials ended HELD prevented: s1 committed, s2 40001, which --exhaustive never did
const steps = {
  "s1": [
    "update jobs set taken = 's1' where id = (select id from jobs where taken is null order by id limit 1 for update)",
    "select setval('seen_s1', peek(), true)"
  ],
  "s2": [
    "update jobs set taken = 's2' where id = (select id from jobs where taken is null order by id limit 1 for update)"
  ]
}

export default {
  driver: 'pg',
  sessions: 2,
  setup: [
    "create table jobs (id int primary key, taken text)",
    "insert into jobs values (1, null), (2, null)",
    "create function peek() returns bigint language plpgsql as $$ declare v bigint; begin begin v := (select count(*) from jobs where taken is not null); raise exception 'undo'; exception when others then null; end; return v; end $$",
    "create unlogged sequence seen_s1 minvalue 0 start 0"
  ],
  connection: { default_transaction_isolation: 'serializable' },
  session: async (db, ctx) => {
    for (const q of steps[ctx.session]) await db.query(q)
  },
  invariant: "select coalesce((select taken from jobs where id = 1), '') = 's1' and (select not is_called or last_value = (select count(*) from jobs where taken is not null) from seen_s1)",
  expect: 'held',
}
