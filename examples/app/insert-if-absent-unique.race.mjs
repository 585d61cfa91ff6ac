// race explore examples/app/insert-if-absent-unique.race.mjs
// The fix of insert-if-absent.race.mjs: a unique index, and the insert does nothing on conflict.
export default {
  title: 'insert unless present, with a unique index',
  driver: 'pg',
  sessions: 2,
  setup: ['create table t (id serial primary key, k int not null unique)'],
  invariant: 'select count(*) <= 1 from t where k = 1',
  session: async (db) => {
    await db.query('insert into t (k) select 1 where not exists (select 1 from t where k = 1) on conflict do nothing')
  },
  expect: 'held',
}
