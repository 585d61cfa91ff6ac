// soundness case 38-0043: advisory-lock, pg_locks-view, observe-table, transaction, serializable, 2-sessions
// broke (a): the reduced search (2 runs) never ended VIOLATED anomaly: s1 committed, s2 committed; --exhaustive did (2 of 6, e.g. s1.q1 s2.q1 s2.q2 s1.q2)
const steps = {
  "s1": [
    "begin isolation level serializable; select pg_advisory_xact_lock(803800157)",
    "commit"
  ],
  "s2": [
    "begin isolation level serializable; insert into obs select 's2', (select count(*) from held)",
    "commit"
  ]
}

export default {
  driver: 'pg',
  sessions: 2,
  setup: [
    "create view held as select objid from pg_catalog.pg_locks where locktype = 'advisory' and objid = 803800157 and granted",
    "create table obs (who text, v bigint)"
  ],
  session: async (db, ctx) => {
    for (const q of steps[ctx.session]) await db.query(q)
  },
  invariant: "select (select coalesce(bool_and(v = 0), true) from obs)",
  expect: 'held',
}
