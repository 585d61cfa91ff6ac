// race explore examples/app/insert-if-absent-locked.race.mjs
// The other fix of insert-if-absent.race.mjs: the statement inside a transaction that first takes an advisory
// lock on the key, so a second session waits until the first has committed.
export default {
  title: 'insert unless present, in a transaction under an advisory lock',
  driver: 'pg',
  sessions: 2,
  setup: ['create table t (id serial primary key, k int not null)'],
  invariant: 'select count(*) <= 1 from t where k = 1',
  session: async (db) => {
    await db.query('begin')
    await db.query('select pg_advisory_xact_lock(1)')
    await db.query('insert into t (k) select 1 where not exists (select 1 from t where k = 1)')
    await db.query('commit')
  },
  expect: 'held',
}
