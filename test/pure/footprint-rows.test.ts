// Row footprints (src/engine/footprint-rows.ts, issue 41 item 6) with no database: which statements race tells the
// rows of, what a narrowed footprint reads and writes, what a transaction's end writes, and how rows and tables meet
// in the reduced search's conflict relation.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { Facts } from '../../src/engine/doubt.js'
import type { Seen } from '../../src/engine/footprint.js'
import { narrow, RowLedger, rowStep, rowTarget } from '../../src/engine/footprint-rows.js'
import { conflicts } from '../../src/explore/reduce.js'

test('rowStep: a select, update or delete of one row by an integer key, nothing else', () => {
  assert.deepEqual(rowStep('select balance from accounts where id = 1'), { kind: 'read', table: 'accounts', column: 'id', key: '1' })
  assert.deepEqual(rowStep('begin; SELECT * FROM Accounts WHERE accounts.ID = 007;'), { kind: 'read', table: 'accounts', column: 'id', key: '7' })
  assert.deepEqual(rowStep('select a, b from t where 3 = id for no key update'), { kind: 'lock', table: 't', column: 'id', key: '3' })
  assert.deepEqual(rowStep('update t set v = (v - 10) * 2, w = 3 where id = -2'), { kind: 'write', table: 't', column: 'id', key: '-2' })
  assert.deepEqual(rowStep('delete from t where id = 4'), { kind: 'write', table: 't', column: 'id', key: '4' })
  for (const no of [
    'update t set id = 5 where id = 1', // the key itself
    'update t set v = 1, ID = 2 where id = 1',
    'update t set (v, id) = (1, 2) where id = 1',
    'update t set v = f(v) where id = 1', // a call
    'update t set v = default where id = 1',
    "update t set v = 'x' where id = 1", // a string
    'update t set v = v where id = 1 returning *',
    'select v from t where id = 1 and v > 0', // more than the key
    'select v from t where id > 1',
    'select v from t where id = 1.5',
    'select v from t where id = $1', // a parameter
    'select v from t, u where id = 1',
    'select f(v) from t where id = 1',
    'select v from s.t where id = 1', // qualified
    'select v from "t" where id = 1', // quoted
    'select v from t where id = 1; select 1', // two statements
    'select v from t where id = 1 -- x',
    'select v from t where id = 1 for update skip locked',
    'insert into t values (1, 1)',
    'select v from t where u.id = 1',
    'with x as (select 1) select v from t where id = 1',
  ]) assert.equal(rowStep(no), undefined, no)
})

const facts = (plain: Record<string, { key: string; indexes: string[] }>): Facts => ({ tainted: new Set(), deferred: new Set(), routines: new Set(), operators: [], everywhere: false, plain: new Map(Object.entries(plain)) })
const PLAIN = facts({ 's.t': { key: 'id', indexes: ['s.t_pkey'] } })
const lock = (rel: string, mode = 'AccessShareLock', kind = 'r'): Seen['locks'][number] => ['relation', mode, true, rel, kind]
const seen = (locks: Seen['locks'] = [], o: Partial<Seen> = {}): Seen => ({ inTx: true, xact: 'x1', xmin: false, xid: false, locks, ...o })

test('rowTarget: the one locked relation of that name, a plain table keyed by the column, reaching no other table', () => {
  const after = seen([lock('s.t', 'RowExclusiveLock'), lock('s.t_pkey', 'RowExclusiveLock', 'i')])
  const sql = 'update t set v = 1 where id = 1'
  assert.equal(rowTarget(PLAIN, sql, seen(), after)?.table, 's.t')
  assert.equal(rowTarget(undefined, sql, seen(), after), undefined)
  assert.equal(rowTarget(facts({}), sql, seen(), after), undefined, 'not plain (a trigger, a foreign key, ...)')
  assert.equal(rowTarget(facts({ 's.t': { key: 'k', indexes: [] } }), sql, seen(), after), undefined, 'keyed by another column')
  assert.equal(rowTarget(PLAIN, sql, seen(), seen([...after.locks, lock('pg_temp_3.t')])), undefined, 'two relations of that name')
  assert.equal(rowTarget(PLAIN, sql, seen(), seen([...after.locks, lock('s.u', 'RowExclusiveLock')])), undefined, 'another table changed first here')
  assert.equal(rowTarget(PLAIN, sql, seen([lock('s.u', 'RowExclusiveLock')]), seen([...after.locks, lock('s.u', 'RowExclusiveLock')]))?.table, 's.t', 'changed before it')
})

test('narrow: the table and its indexes become the row, read (and its lock written when it locks or changes)', () => {
  const t = rowTarget(PLAIN, 'update t set v = 1 where id = 1', seen(), seen([lock('s.t', 'RowExclusiveLock')]))!
  assert.deepEqual(narrow({ reads: ['rel:s.t', 'rel:s.t_pkey', 'rel:s.u', 'snapshot'], writes: ['rows:s.t', 'rows:s.t_pkey', 'rows:s.u'] }, t), { reads: ['rel:s.u', 'snapshot', 'rel:s.t#1'], writes: ['rows:s.u', 'rows:s.t#1'] })
  const r = rowTarget(PLAIN, 'select v from t where id = 2', seen(), seen([lock('s.t')]))!
  assert.deepEqual(narrow({ reads: ['rel:s.t'], writes: ['rows:s.t'] }, r), { reads: ['rel:s.t#2'], writes: [] })
})

test('RowLedger: a commit writes the rows its steps told, the whole table once a step did not tell', () => {
  const w = (k: number) => rowTarget(PLAIN, `update t set v = 1 where id = ${k}`, seen(), seen([lock('s.t', 'RowExclusiveLock')]))!
  const commit = { reads: [], writes: ['rel:s.t', 'rel:s.t_pkey', 'snapshot'] }
  const after = seen([lock('s.t', 'RowExclusiveLock'), lock('s.t_pkey', 'RowExclusiveLock', 'i')])
  let l = new RowLedger()
  l.step('1:x', after, w(1), false)
  l.step('1:x', after, w(2), false)
  assert.deepEqual(l.end('1:x', commit, PLAIN), { reads: [], writes: ['snapshot', 'rel:s.t#1', 'rel:s.t#2'] })
  l = new RowLedger()
  l.step('1:x', after, w(1), false)
  l.step('1:x', after, undefined, false) // an insert, say
  assert.deepEqual(l.end('1:x', commit, PLAIN), commit)
  l = new RowLedger()
  l.step('1:x', after, w(1), false)
  l.step('1:x', after, undefined, true) // unclassified: it may go on (it waits)
  assert.deepEqual(l.end('1:x', commit, PLAIN), commit)
  l = new RowLedger()
  l.step('1:x', after, w(1), false)
  l.blind = true // a step not watched
  assert.deepEqual(l.end('1:x', commit, PLAIN), commit)
  l = new RowLedger()
  l.step('1:x', after, w(1), false)
  assert.deepEqual(l.end('2:x', commit, PLAIN), commit, 'another transaction')
})

test('conflicts: a row meets its table and itself, not another row', () => {
  const fp = (reads: string[], writes: string[] = []) => ({ reads, writes })
  assert.equal(conflicts(fp(['rel:s.t#1']), fp([], ['rel:s.t#1'])), true)
  assert.equal(conflicts(fp(['rel:s.t#1']), fp([], ['rel:s.t'])), true)
  assert.equal(conflicts(fp(['rel:s.t']), fp([], ['rel:s.t#2'])), true)
  assert.equal(conflicts(fp([], ['rows:s.t#1']), fp([], ['rows:s.t'])), true)
  assert.equal(conflicts(fp(['rel:s.t#1']), fp([], ['rel:s.t#2'])), false)
  assert.equal(conflicts(fp([], ['rows:s.t#1']), fp([], ['rows:s.t#10'])), false)
  assert.equal(conflicts(fp(['rel:s.t#1']), fp([], ['rows:s.t#1'])), false, 'a row change not committed is not seen by a read')
  assert.equal(conflicts(fp(['rel:s.t#1']), fp(['rel:s.t'])), false, 'reads')
})
