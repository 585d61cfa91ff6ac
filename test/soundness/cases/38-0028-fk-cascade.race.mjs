// soundness case 38-0028: fk-cascade, observe-table, autocommit, serializable, 2-sessions
// broke (b): 1 of 4 free-running trials ended HELD prevented: s1 committed, s2 40001, which --exhaustive never did
const steps = {
  "s1": [
    "delete from parent where id = 1",
    "insert into obs select 's1', (select count(*) from child)"
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
    "create table obs (who text, v bigint)"
  ],
  connection: { default_transaction_isolation: 'serializable' },
  session: async (db, ctx) => {
    for (const q of steps[ctx.session]) await db.query(q)
  },
  invariant: "select (select coalesce(bool_and(v = (select count(*) from child)), true) from obs)",
  expect: 'held',
}
