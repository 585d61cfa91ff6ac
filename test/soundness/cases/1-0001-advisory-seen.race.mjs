// soundness case 1-0001: advisory-lock, pg_lock_status, observe-table, transaction, read-committed, 2-sessions
// broke (a): the reduced search (1 runs) never ended VIOLATED anomaly: s1 committed, s2 committed; --exhaustive did (4 of 10, e.g. s1.q1 s2.q1 s2.q2 s2.q3 s1.q2)
const steps = {
  "s1": [
    "begin isolation level read committed; select pg_advisory_xact_lock(800100004)",
    "commit"
  ],
  "s2": [
    "begin isolation level read committed",
    "insert into obs select 's2', (select count(*) from pg_lock_status() l where l.locktype = 'advisory' and l.objid = 800100004 and l.granted)",
    "commit"
  ]
}

export default {
  driver: 'pg',
  sessions: 2,
  setup: [
    "create table obs (who text, v bigint)"
  ],
  session: async (db, ctx) => {
    for (const q of steps[ctx.session]) await db.query(q)
  },
  invariant: "select (select coalesce(bool_and(v = 0), true) from obs)",
  expect: 'held',
}
