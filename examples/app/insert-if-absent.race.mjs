// race explore examples/app/insert-if-absent.race.mjs
// A conditional insert as migration tools and ORMs write it: one statement, no transaction around it. Each
// statement commits by itself, but two of them overlap (each takes its snapshot before the other commits): race
// explore runs each query, then its commit, as two points (s1.q1, s1.q1:commit), and finds the orders that violate.
export default {
  title: 'insert unless present, in one autocommit statement',
  driver: 'pg',
  sessions: 2,
  setup: ['create table t (id serial primary key, k int not null)'],
  invariant: 'select count(*) <= 1 from t where k = 1',
  session: async (db) => {
    await db.query('insert into t (k) select 1 where not exists (select 1 from t where k = 1)')
  },
  expect: 'held',
}
