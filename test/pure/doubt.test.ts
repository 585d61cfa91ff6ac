// When the locks a step leaves cannot show what it did (src/engine/doubt.ts), with no database: the catalog facts and
// the backends' states are written here as the server would report them; test/cli/explore-doubt.test.ts runs the
// same rules against a real server.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { judge, namesDoubt, type Facts } from '../../src/engine/doubt.js'
import { touched, type Seen } from '../../src/engine/footprint.js'

const facts = (o: Partial<Facts> = {}): Facts => ({ tainted: new Set(), deferred: new Set(), routines: new Set(), operators: [], everywhere: false, plain: new Map(), ...o })
const rel = (name: string, mode = 'AccessShareLock'): Seen['locks'][number] => ['relation', mode, true, name, 'r']
const seen = (o: Partial<Seen> = {}): Seen => ({ inTx: true, xact: 'x1', xmin: false, xid: false, locks: [], ...o })
const step = (f: Facts | undefined, before: Seen, after: Seen, sql: string, lost = new Set<string>()) => judge(f, lost, touched(before, after, sql), 7, before, after, sql)

test('built-ins that read other sessions or shared state without a lock, under any spelling, are unclassified', () => {
  for (const sql of [
    'select count(*) from pg_lock_status() l',
    'select pg_catalog.pg_stat_get_activity(null)',
    'select * from PG_CURRENT_SNAPSHOT()',
    'select pg_safe_snapshot_blocking_pids(1)',
    'select currval(\'s\')',
    'select lastval()',
    'notify ch',
    'LISTEN ch',
    "select pg_notify('ch', 'x')",
    'select lo_create(0)',
    'set transaction snapshot \'00000003-1\'',
    'rollback to savepoint a',
    "do $$ begin perform 1; end $$",
    "DO language plpgsql 'begin null; end'",
    'execute p(1)',
    '/* a */ EXPLAIN (analyze) execute p(1)',
    'begin; fetch 1 from c',
    'move next in c',
    "select query_to_xml('select 1', true, true, '')",
    'select pg_relation_size(\'t\')',
    'select age(xmin) from t',
    'select xmax from t',
    'select txid_current()',
    'select pg_try_advisory_xact_lock(1)',
    "select dblink_exec('x', 'y')",
  ]) {
    assert.equal(namesDoubt(facts(), sql), true, sql)
    assert.equal(step(facts(), seen(), seen(), sql), 'all', sql)
  }
  // Words that only look alike are not calls of them.
  for (const sql of ['insert into t (k) values (1) on conflict do nothing', 'update t set age = 3 where id = 1', 'select nextval(\'s\')', 'select count(*) from stats', 'select * from t order by id fetch first 1 rows only']) {
    assert.equal(namesDoubt(facts(), sql), false, sql)
  }
})

test('a step that names a user routine or operator is unclassified; the same step otherwise keeps its footprint', () => {
  const f = facts({ routines: new Set(['peek', 'MixedCase'.toLowerCase()]), operators: ['===='] })
  const b = seen({ locks: [rel('s.u')] })
  assert.equal(step(f, b, b, 'select setval(\'sq\', peek() + 1)'), 'all')
  assert.equal(step(f, b, b, 'select "MixedCase"()'), 'all')
  assert.equal(step(f, b, b, 'select 1 ==== 1'), 'all')
  assert.deepEqual(step(f, b, b, 'select n from u'), { reads: ['rel:s.u'], writes: [] })
})

test('a lock on a tainted relation or on the catalog makes the step, and the rest of its transaction, unclassified', () => {
  const f = facts({ tainted: new Set(['s.t']) })
  assert.equal(step(f, seen(), seen({ locks: [rel('s.t', 'RowExclusiveLock')] }), 'insert into t values (1)'), 'all')
  assert.equal(step(f, seen({ locks: [rel('s.t', 'RowExclusiveLock')] }), seen({ inTx: false, xact: null }), 'commit'), 'all')
  // A view over pg_locks locks the view and pg_catalog.pg_locks.
  assert.equal(step(f, seen(), seen({ locks: [rel('s.held'), ['relation', 'AccessShareLock', true, 'pg_catalog.pg_locks', 'v']] }), 'select count(*) from held'), 'all')
  assert.deepEqual(step(f, seen(), seen({ locks: [rel('s.u')] }), 'select n from u'), { reads: ['rel:s.u'], writes: [] })
})

test('the end of a transaction that touched a relation under a deferrable constraint is unclassified, not its statements', () => {
  const f = facts({ deferred: new Set(['s.t']) })
  const inside = seen({ xid: true, locks: [rel('s.t', 'RowExclusiveLock')] })
  // A row change meets other sessions' row changes of t (rows:s.t), never a read of t.
  assert.deepEqual(step(f, seen(), inside, 'insert into t values (1)'), { reads: ['rel:s.t'], writes: ['rows:s.t'] })
  assert.equal(step(f, inside, seen({ inTx: false, xact: null }), 'commit'), 'all')
  // A transaction that touched other tables only commits as before.
  const other = seen({ xid: true, locks: [rel('s.u', 'RowExclusiveLock')] })
  assert.notEqual(step(f, other, seen({ inTx: false, xact: null }), 'commit'), 'all')
})

test('a lock given back within a transaction (a subtransaction rolled back) makes the rest of the transaction unclassified', () => {
  const f = facts()
  const lost = new Set<string>()
  const held = seen({ locks: [rel('s.u'), ['transactionid', 'ExclusiveLock', true, '', '']] })
  const after = seen({ locks: [] })
  assert.equal(step(f, held, after, 'release a', lost), 'all')
  // Its next step and its commit, whatever they are.
  assert.equal(step(f, after, seen({ locks: [rel('s.v')] }), 'select 1 from v', lost), 'all')
  assert.equal(step(f, after, seen({ inTx: false, xact: null }), 'commit', lost), 'all')
  // Another transaction of the same backend is judged afresh.
  assert.deepEqual(step(f, seen({ xact: 'x2' }), seen({ xact: 'x2', locks: [rel('s.v')] }), 'select 1 from v', lost), { reads: ['rel:s.v'], writes: [] })
  // ROLLBACK TO after a savepoint that took no lock: by its text.
  assert.equal(step(f, seen({ xact: 'x3' }), seen({ xact: 'x3' }), 'rollback to savepoint a', lost), 'all')
  assert.equal(step(f, seen({ xact: 'x3' }), seen({ xact: 'x3', inTx: false }), 'commit', lost), 'all')
})

test('without catalog facts, or with a user cast or domain check somewhere, every step is unclassified', () => {
  assert.equal(step(undefined, seen(), seen({ locks: [rel('s.u')] }), 'select n from u'), 'all')
  assert.equal(step(facts({ everywhere: true }), seen(), seen({ locks: [rel('s.u')] }), 'select n from u'), 'all')
})

test('mayDefine: reads, row changes, transaction control, LOCK, SET and SHOW change no catalog; anything else, or SELECT INTO, may', async () => {
  const { mayDefine } = await import('../../src/engine/doubt.js')
  for (const sql of [
    'begin isolation level read committed',
    "insert into orders (customer_id, status) select 1, 'open' where not exists (select 1 from orders)",
    'update t set n = n + 1 where id = 1',
    'delete from t where id = 1 returning *',
    'with x as (insert into t values (1) returning id) select * from x',
    'select * from t for update',
    'commit',
    'end',
    'rollback to a',
    'savepoint a; release a',
    'lock table t in share mode',
    "set local lock_timeout = '1s'",
    'show transaction_isolation',
    "select 'create table x (id int)' /* into */ -- create",
    'values (1)',
  ]) {
    assert.equal(mayDefine(sql), false, sql)
  }
  for (const sql of [
    'create table x (id int)',
    'begin; create index on t (n)',
    'alter table t add constraint u unique (n)',
    'select * into t2 from t',
    'with x as (select 1) select * into t2 from x',
    'truncate t',
    'analyze t',
    'comment on table t is $$x$$',
    'grant select on t to public',
    "do $$ begin execute 'create table y ()'; end $$",
    'call p()',
    'create rule r as on insert to t do also update u set n = n + 1',
  ]) {
    assert.equal(mayDefine(sql), true, sql)
  }
})

test("catalogMayChange: a DML-only transaction's commit needs no second read of the facts; one that ran DDL, or any where user code may run, does", async () => {
  const { catalogMayChange } = await import('../../src/engine/doubt.js')
  const out = seen({ inTx: false, xact: null })
  const run = (steps: [string, Seen, Seen][], userCode = false) => {
    const defining = new Set<string>()
    return steps.map(([sql, b, a]) => catalogMayChange(defining, userCode, 7, b, a, sql))
  }
  const tx = seen({ xact: 'x1' })
  const wrote = seen({ xact: 'x1', xid: true })
  // begin; insert; commit: no read at the commit.
  assert.deepEqual(run([['begin', out, tx], ['insert into t values (1)', tx, wrote], ['commit', wrote, out]]), [false, false, false])
  // begin; create table; commit: read at the commit, not before (control sees it once committed).
  assert.deepEqual(run([['begin', out, tx], ['create table x (id int)', tx, wrote], ['commit', wrote, out]]), [false, false, true])
  // DDL in the step that begins the transaction: the commit reads.
  assert.deepEqual(run([['begin; create table x (id int)', out, wrote], ['commit', wrote, out]]), [false, true])
  // The same DML-only transaction where the facts know user code (a trigger may define): the commit reads.
  assert.deepEqual(run([['begin', out, tx], ['insert into t values (1)', tx, wrote], ['commit', wrote, out]], true), [false, false, true])
  // Outside a transaction: a statement that may define reads at once; a DML statement does not.
  assert.deepEqual(run([['create table x (id int)', out, out], ['insert into t values (1)', out, out]]), [true, false])
  // A transaction of another backend that defined does not make this one's commit read.
  const defining = new Set<string>(['8:x1'])
  assert.equal(catalogMayChange(defining, false, 7, wrote, out, 'commit'), false)
  // An end that comes with more than COMMIT (it may define): read.
  assert.equal(catalogMayChange(new Set(), false, 7, tx, out, 'commit; create table y ()'), true)
})
