// soundness case 38-0042: advisory-lock, pg_lock_status, observe-seq, transaction, repeatable-read, 2-sessions
// broke (a): the reduced search (1 runs) never ended VIOLATED anomaly: s1 committed, s2 committed; --exhaustive did (2 of 6, e.g. s1.q1 s2.q1 s2.q2 s1.q2)
const steps = {
  "s1": [
    "begin isolation level repeatable read; select pg_advisory_xact_lock(803800156)",
    "commit"
  ],
  "s2": [
    "begin isolation level repeatable read; select setval('seen_s2', (select count(*) from pg_lock_status() l where l.locktype = 'advisory' and l.objid = 803800156 and l.granted), true)",
    "commit"
  ]
}

export default {
  driver: 'pg',
  sessions: 2,
  setup: [
    "create unlogged sequence seen_s2 minvalue 0 start 0"
  ],
  session: async (db, ctx) => {
    for (const q of steps[ctx.session]) await db.query(q)
  },
  invariant: "select (select not is_called or last_value = 0 from seen_s2)",
  expect: 'held',
}
