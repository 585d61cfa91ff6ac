// soundness case 38-0038: fk-cascade, function-read, observe-seq, multi-statement, serializable, 2-sessions
// broke (b): 2 of 4 free-running trials ended HELD prevented: s1 committed, s2 40001, which --exhaustive never did
// broke (b): 1 of 4 free-running trials ended HELD prevented: s1 40001, s2 committed, which --exhaustive never did
const steps = {
  "s1": [
    "delete from parent where id = 1; select setval('seen_s1', state_f(), true)"
  ],
  "s2": [
    "insert into child (pid, who) values (1, 's2')"
  ]
}

export default {
  driver: 'pg',
  sessions: 2,
  setup: [
    "create table parent (id int primary key)",
    "create table child (id serial, pid int not null references parent on delete cascade, who text)",
    "insert into parent values (1)",
    "insert into child (pid, who) values (1, null)",
    "create function state_f() returns bigint language plpgsql as $$ begin return (select count(*) from child); end $$",
    "create unlogged sequence seen_s1 minvalue 0 start 0"
  ],
  connection: { default_transaction_isolation: 'serializable' },
  session: async (db, ctx) => {
    for (const q of steps[ctx.session]) await db.query(q)
  },
  invariant: "select (select not is_called or last_value = (select count(*) from child) from seen_s1)",
  expect: 'held',
}
