// What engine/doubt.ts reads from a real server's catalogs: the relations whose access runs code locks cannot show
// (found from the stored expressions, whatever the SQL that made them was spelled like), those under a deferrable
// constraint, the user routines' and operators' names. Only this test's own schema is looked at.
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { after, before, test } from 'node:test'
import { readFacts } from '../../src/engine/doubt.js'
import type { PostgresLab } from '../../src/db/postgres.js'
import { openLab, useServer, type TestServer } from '../support/server.js'

let server: TestServer
let lab: PostgresLab
const s = `doubt_${randomBytes(4).toString('hex')}`
before(async () => {
  server = await useServer()
  lab = await openLab(server.url)
})
after(async () => {
  await lab.query(`drop schema if exists ${s} cascade`).catch(() => {})
  await lab.close()
  await server.stop()
})

test('tainted, deferred and named objects are found from the catalogs', async () => {
  await lab.query(`create schema ${s}`)
  for (const q of [
    `create table ${s}.plain (id int primary key, k int)`,
    `create function ${s}.peek() returns int language sql as 'select 1'`,
    `create view ${s}.v_plain as select id from ${s}.plain`,
    `create view ${s}.v_locks as select * from pg_lock_status() l`,
    `create view ${s}.v_user as select ${s}.peek() as n`,
    `create table ${s}.d_user (n int default ${s}.peek())`,
    `create table ${s}.d_snap (x text default pg_current_snapshot()::text)`,
    `create table ${s}.c_user (n int check (n < ${s}.peek() + 10))`,
    `create table ${s}.i_user (n int)`,
    `create index on ${s}.i_user ((n + ${s}.peek()))`,
    `create table ${s}.trig (n int)`,
    `create function ${s}.tf() returns trigger language plpgsql as $$ begin return new; end $$`,
    `create trigger t before insert on ${s}.trig for each row execute function ${s}.tf()`,
    `create table ${s}.ruled (n int)`,
    `create rule r as on insert to ${s}.ruled do also select 1`,
    `create table ${s}.child (pid int references ${s}.plain on delete cascade)`,
    `create table ${s}.dchild (pid int references ${s}.plain deferrable initially deferred)`,
    `create table ${s}.duniq (n int unique deferrable)`,
    `create function ${s}.eq3(int, int) returns boolean language sql as 'select $1 = $2'`,
    `create operator ${s}.=== (leftarg = int, rightarg = int, function = ${s}.eq3)`,
  ]) await lab.query(q)
  const f = (await readFacts(lab, []))!
  const mine = (set: Set<string>) => [...set].filter((x) => x.startsWith(`${s}.`)).map((x) => x.slice(s.length + 1)).sort()
  assert.deepEqual(mine(f.tainted), ['c_user', 'd_snap', 'd_user', 'i_user', 'ruled', 'trig', 'v_locks', 'v_user'])
  // Both sides of the deferrable foreign key, and the deferrable unique constraint's table.
  assert.deepEqual(mine(f.deferred), ['dchild', 'duniq', 'plain'])
  for (const r of ['peek', 'tf', 'eq3']) assert.ok(f.routines.has(r), r)
  assert.ok(f.operators.includes('==='))
})
