// race explore's reduced search on races whose steps do what their locks cannot show (src/engine/doubt.ts), against
// --exhaustive on a real server: the same outcome groups (the verdict and each session's ending) and the same fewest
// switches of a violating order. On the code before doubt.ts the reduced search ran 1 order and said HELD for r1,
// r2, r3, r5 (../shared/cases/sound's files, from issue 38), view-function, trig-hidden and the application race,
// and --isolation all named read committed safe for r1. The others were already right from their locks and are kept
// so that they stay so: an immediate trigger and an ON DELETE CASCADE hold their lock on the other table to the
// commit, a deferred foreign key's commits conflict as writers, a savepoint's read conflicted when it ran, currval
// takes its sequence's lock.
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, test } from 'node:test'
import { outcomes } from '../../speed/explore.js'
import { race, useServer, type TestServer } from '../support/server.js'

let server: TestServer
const dir = mkdtempSync(path.join(os.tmpdir(), 'race-doubt-'))
before(async () => {
  server = await useServer()
})
after(async () => {
  await server.stop()
  rmSync(dir, { recursive: true, force: true })
})

const SPECS: Record<string, string> = {
  'r1-deferred-trigger': `# A deferred constraint trigger writes table u at s1's COMMIT; s2 reads u at READ COMMITTED.
# s2 records what it saw in an UNLOGGED sequence (setval: no xid, so s2's commit is read-only).
setup { create table t (id int); create table u (n int); insert into u values (0); create unlogged sequence sq; }
setup { create function bump() returns trigger language plpgsql as $$ begin update u set n = n + 1; return null; end $$; }
setup { create constraint trigger bump after insert on t deferrable initially deferred for each row execute function bump(); }

invariant "s2's report counts every committed row of t" { select last_value - 1 = (select count(*) from t) from sq }
expect held

session s1
step b1 { begin }
step i1 { insert into t values (1) }
step c1 { commit }

session s2
step b2 { begin }
step r2 { select setval('sq', (select n from u) + 1) }
step c2 { commit }`,
  'r2-exception-block': `# A PL/pgSQL function reads u inside a BEGIN ... EXCEPTION block that is rolled back: the subtransaction's
# AccessShareLock on u is released, so after the step race sees no lock on u. The value read survives.
setup { create table u (n int); insert into u values (0); create unlogged sequence sq; }
setup { create function peek() returns int language plpgsql as $$ declare v int; begin begin select n into v from u; raise exception 'undo'; exception when others then null; end; return v; end $$; }

invariant "s2's report is the committed value" { select last_value - 1 = (select n from u) from sq }
expect held

session s1
step b1 { begin }
step w1 { update u set n = 1 }
step c1 { commit }

session s2
step b2 { begin }
step r2 { select setval('sq', peek() + 1) }
step c2 { commit }`,
  'r3-pg-locks-view': `# s2 looks at pg_locks through a view (race's PEEKS test reads the step's SQL text, not what it reads).
setup { create view held as select objid from pg_catalog.pg_locks where locktype = 'advisory'; create unlogged sequence sq; }

invariant "s2 never saw an advisory lock held" { select last_value = 1 from sq }
expect held

session s1
step b1 { begin }
step a1 { select pg_advisory_xact_lock(7) }
step c1 { commit }

session s2
step b2 { begin }
step r2 { select setval('sq', (select count(*) from held) + 1) }
step c2 { commit }`,
  'r5-pg-lock-status': `# s2 reads the lock table through pg_lock_status(), the function behind pg_locks (not in race's PEEKS list).
setup { create unlogged sequence sq; }

invariant "s2 never saw an advisory lock held" { select last_value = 1 from sq }
expect held

session s1
step b1 { begin }
step a1 { select pg_advisory_xact_lock(7) }
step c1 { commit }

session s2
step b2 { begin }
step r2 { select setval('sq', (select count(*) from pg_lock_status() l where l.locktype = 'advisory' and l.objid = 7) + 1) }
step c2 { commit }`,
  'view-function': `# s2 reads u through a view whose function reads it in a rolled-back EXCEPTION block: no lock on u, no name in the step.
setup { create table u (n int); insert into u values (0); create unlogged sequence sq; }
setup { create function peek() returns int language plpgsql as $$ declare v int; begin begin select n into v from u; raise exception 'undo'; exception when others then null; end; return v; end $$; }
setup { create view now_u as select peek() as n; }
invariant "s2's report is the committed value" { select last_value - 1 = (select n from u) from sq }
expect held
session s1
step b1 { begin }
step w1 { update u set n = 1 }
step c1 { commit }
session s2
step b2 { begin }
step r2 { select setval('sq', (select n from now_u) + 1) }
step c2 { commit }`,
  'trig-hidden': `# A BEFORE trigger reads u in a rolled-back EXCEPTION block (its lock on u is gone), reports it and skips the row.
setup { create table t (v int); create table u (n int); insert into u values (0); create unlogged sequence sq; }
setup { create function stamp() returns trigger language plpgsql as $$ declare x int; begin begin select n into x from u; raise exception 'undo'; exception when others then null; end; perform setval('sq', x + 1); return null; end $$; }
setup { create trigger stamp before insert on t for each row execute function stamp(); }
invariant "s2's report is the committed value" { select last_value - 1 = (select n from u) from sq }
expect held
session s1
step b1 { begin }
step w1 { update u set n = 1 }
step c1 { commit }
session s2
step b2 { begin }
step i2 { insert into t default values }
step c2 { commit }`,
  'trig-immediate': `# An immediate trigger on t writes u inside s1's insert: its lock on u is held to s1's commit.
setup { create table t (id int); create table u (n int); insert into u values (0); create unlogged sequence sq; }
setup { create function bump() returns trigger language plpgsql as $$ begin update u set n = n + 1; return null; end $$; }
setup { create trigger bump after insert on t for each row execute function bump(); }
invariant "s2's report counts every committed row of t" { select last_value - 1 = (select count(*) from t) from sq }
expect held
session s1
step b1 { begin }
step i1 { insert into t values (1) }
step c1 { commit }
session s2
step b2 { begin }
step r2 { select setval('sq', (select n from u) + 1) }
step c2 { commit }`,
  'fk-cascade': `# s1's delete of a parent cascades to c (ON DELETE CASCADE); s2 counts c.
setup { create table p (id int primary key); create table c (pid int references p on delete cascade); insert into p values (1); insert into c values (1); create unlogged sequence sq; }
invariant "s2's count is c's" { select last_value - 1 = (select count(*) from c) from sq }
expect held
session s1
step b1 { begin }
step d1 { delete from p where id = 1 }
step c1 { commit }
session s2
step b2 { begin }
step r2 { select setval('sq', (select count(*) from c) + 1) }
step c2 { commit }`,
  'fk-deferred': `# A deferred foreign key is checked at COMMIT: s1's commit reads p, after its last look.
setup { create table p (id int primary key); create table c (pid int references p deferrable initially deferred); insert into p values (1); }
invariant "every child has its parent" { select not exists (select from c where pid not in (select id from p)) }
expect held
prevented by 23503
session s1
step b1 { begin }
step i1 { insert into c values (1) }
step c1 { commit }
session s2
step b2 { begin }
step d2 { delete from p where id = 1 }
step c2 { commit }`,
  'savepoint': `# s2 reads u under a savepoint and rolls it back: the locks go, the sequence keeps what it read.
setup { create table u (n int); insert into u values (0); create unlogged sequence sq; }
invariant "s2's report is the committed value" { select last_value - 1 = (select n from u) from sq }
expect held
session s1
step b1 { begin }
step w1 { update u set n = 1 }
step c1 { commit }
session s2
step b2 { begin; savepoint a }
step r2 { select setval('sq', (select n from u) + 1) }
step x2 { rollback to a }
step c2 { commit }`,
  'ddl-in-a-step': `# s1 adds a deferrable foreign key to c in a step of a transaction: once it commits, the checks run at s2's and s3's
# commits. The catalog facts are read again after that commit (test/pure/doubt.test.ts, catalogMayChange, checks that
# rule itself: here the reduced search still finds every group, where the 23503 at one commit is seen as an error).
setup { create table p (id int primary key); create table c (pid int); insert into p values (1); }
invariant "every c row has its p" { select not exists (select from c where not exists (select from p where p.id = c.pid)) }
expect held
session s1
step a1 { begin; alter table c add constraint fk foreign key (pid) references p deferrable initially deferred }
step c1 { commit }
session s2
step i2 { begin; insert into c values (1) }
step c2 { commit }
session s3
step d3 { begin; delete from p where id = 1 }
step c3 { commit }`,
  'currval': `# s2 reports its own nextval through currval in a later step.
setup { create sequence s; create table got (who text, v bigint); }
invariant "s1 took the first value" { select coalesce((select v from got where who = 's1') = 1, true) }
expect held
session s1
step b1 { begin }
step n1 { select nextval('s') }
step c1 { commit }
session s2
step b2 { begin }
step n2 { select nextval('s') }
step r2 { insert into got select 's1', currval('s') - 1 }
step c2 { commit }`,
}
const file = (name: string) => {
  const f = path.join(dir, `${name}.spec`)
  writeFileSync(f, SPECS[name])
  return f
}

for (const name of Object.keys(SPECS)) {
  test(`reduced finds every outcome group and the same shortest violation as --exhaustive: ${name}`, async () => {
    const { explore } = await import('../../src/index.js')
    const o = { databaseUrl: server.url }
    const red = await explore(file(name), o)
    const all = await explore(file(name), { ...o, exhaustive: true })
    assert.equal(red.search, 'reduced')
    assert.equal(red.complete, true)
    assert.equal(red.diverged, 0)
    assert.deepEqual(outcomes(red), outcomes(all))
  })
}

// An application race's queries get their footprints the same way: r2 as one, reduced only with --reduce.
const APP = `// r2 as an application race: session 1 reads u through a function whose EXCEPTION block gives its lock back.
export default {
  driver: 'pg',
  sessions: 2,
  expect: 'held',
  setup: [
    'create table u (n int)',
    'insert into u values (0)',
    'create unlogged sequence sq',
    "create function peek() returns int language plpgsql as $$ declare v int; begin begin select n into v from u; raise exception 'undo'; exception when others then null; end; return v; end $$",
  ],
  invariant: 'select last_value - 1 = (select n from u) from sq',
  session: async (db, ctx) => {
    await db.query('begin')
    if (ctx.index === 0) await db.query('update u set n = 1')
    else await db.query("select setval('sq', peek() + 1)")
    await db.query('commit')
  },
}
`

test('an application race (--reduce) is judged the same way: r2 as one finds --exhaustive\'s groups', async () => {
  const { explore } = await import('../../src/index.js')
  const f = path.join(dir, 'app-peek.race.mjs')
  writeFileSync(f, APP)
  const o = { databaseUrl: server.url }
  const red = await explore(f, { ...o, reduce: true })
  const all = await explore(f, { ...o, exhaustive: true })
  assert.equal(red.search, 'reduced')
  assert.equal(red.complete, true)
  assert.deepEqual(outcomes(red), outcomes(all))
})

test('--isolation all names no level safe where the deferred trigger violates (r1)', async () => {
  const r = await race(['explore', file('r1-deferred-trigger'), '--isolation', 'all', '--json'], { url: server.url, timeoutMs: 120_000 })
  const j = JSON.parse(r.stdout)
  assert.equal(j.weakestSafe, null, r.stdout)
  for (const row of j.levels) assert.ok(row.violating > 0, JSON.stringify(row))
})
