// race explore examples/app/insert-if-absent-fn.race.mjs
// The same check-then-insert inside a PL/pgSQL function, called outside a transaction: the call commits by
// itself, and two calls overlap as two statements do.
export default {
  title: 'insert unless present, in a function called with autocommit',
  driver: 'pg',
  sessions: 2,
  setup: [
    'create table t (id serial primary key, k int not null)',
    `create function add_k1() returns void language plpgsql as $$
     begin
       if not exists (select 1 from t where k = 1) then insert into t (k) values (1); end if;
     end $$`,
  ],
  invariant: 'select count(*) <= 1 from t where k = 1',
  session: async (db) => {
    await db.query('select add_k1()')
  },
  expect: 'held',
}
