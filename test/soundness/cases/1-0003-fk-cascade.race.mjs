// soundness case 1-0003: fk-cascade, function-read, observe-seq, transaction, repeatable-read, 2-sessions
// broke (a): the reduced search (3 runs) never ended HELD prevented: s1 40001, s2 committed; --exhaustive did (3 of 14, e.g. s2.q1 s2.q2 s1.q1 s1.q2 s2.q3)
const steps = {
  "s1": [
    "begin isolation level repeatable read",
    "delete from parent where id = 1; select setval('seen_s1', state_f(), true)",
    "commit"
  ],
  "s2": [
    "begin isolation level repeatable read",
    "insert into child (pid, who) values (1, 's2')",
    "commit"
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
  session: async (db, ctx) => {
    for (const q of steps[ctx.session]) await db.query(q)
  },
  invariant: "select (select not is_called or last_value = (select count(*) from child) from seen_s1)",
  expect: 'held',
}
