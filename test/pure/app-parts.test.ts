// How race explore splits an application's query string of several statements (app/parts.ts), which queries get a
// snapshot point, and the permutation labels of both (s1.q3/2, s1.q3:snapshot). Pure: no connection (issue 38).
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { statementSpans, stringParts } from '../../src/app/parts.js'
import { triesLock } from '../../src/lex.js'
import { parseAppPermutation } from '../../src/app/labels.js'

const texts = (sql: string, inTx = false) => stringParts(sql, inTx)?.parts.map((p) => p.text.trim())

test('a string outside a transaction: one part per statement others can see, in race\'s transaction (wrap)', () => {
  const p = stringParts('select 1; insert into t values (1)', false)
  assert.deepEqual(p?.parts.map((x) => x.text.trim()), ['select 1', 'insert into t values (1)'])
  assert.equal(p?.wrap, true)
  // Where each part starts in the string (an error's position is counted from there).
  assert.deepEqual(p?.parts.map((x) => x.start), [0, 9])
  // SET, SAVEPOINT and the like go with the statement after them; trailing ones with the one before.
  assert.deepEqual(texts('set x.y = 1; select 1; select 2; set x.y = 2'), ['set x.y = 1; select 1', 'select 2; set x.y = 2'])
  // One statement, or all merged into one part: run whole.
  assert.equal(stringParts('select 1', false), undefined)
  assert.equal(stringParts('set x.y = 1; select 1', false), undefined)
})

test('a string whose transactions race could not keep exact is run whole', () => {
  // Outside a transaction, one that controls transactions (it would leave the implicit one).
  assert.equal(stringParts('insert into t values (1); commit; insert into t values (2)', false), undefined)
  assert.equal(stringParts('select 1; savepoint a; select 2', false), undefined)
  // Inside one, one that ends it before its last statement, or begins another.
  assert.equal(stringParts('insert into t values (1); commit; insert into t values (2)', true), undefined)
  assert.equal(stringParts('select 1; begin; select 2', true), undefined)
})

test('a string that begins its transaction, or runs inside one, is split without race\'s transaction', () => {
  const p = stringParts('begin isolation level repeatable read; select 1; update t set v = 1; commit', false)
  assert.equal(p?.wrap, false)
  assert.deepEqual(p?.parts.map((x) => x.text.trim()), ['begin isolation level repeatable read; select 1', 'update t set v = 1', 'commit'])
  assert.deepEqual(texts('select 1; savepoint a; update t set v = 1; release a; commit', true), ['select 1', 'savepoint a; update t set v = 1', 'release a; commit'])
})

test('statements are split outside strings, dollar quotes and comments', () => {
  assert.deepEqual(statementSpans("select ';'; /* ; */ select $$;$$; -- ;\n select 3").map((x) => x.text.trim()), ["select ';'", '/* ; */ select $$;$$', '-- ;\n select 3'])
  assert.deepEqual(texts("insert into t values (';'); select 2"), ["insert into t values (';')", 'select 2'])
})

test('NOWAIT and SKIP LOCKED count outside strings and comments only', () => {
  assert.equal(triesLock('select * from t for update nowait'), true)
  assert.equal(triesLock('select * from t for update skip  locked'), true)
  assert.equal(triesLock("select 'nowait' from t -- skip locked"), false)
  assert.equal(triesLock('select * from t for update'), false)
})

test('a permutation names a string\'s statements and a snapshot point, each in its order', () => {
  const e = parseAppPermutation('s1.q1 s1.q1/2 s2.q1:snapshot s2.q1 s1.q1:commit', ['s1', 's2'])
  assert.deepEqual(e.map((x) => x.label), ['s1.q1', 's1.q1/2', 's2.q1:snapshot', 's2.q1', 's1.q1:commit'])
  assert.throws(() => parseAppPermutation('s1.q1/2 s1.q1', ['s1']), /comes before s1\.q1/)
  assert.throws(() => parseAppPermutation('s1.q1 s1.q1/3', ['s1']), /comes before s1\.q1\/2/)
  assert.throws(() => parseAppPermutation('s1.q2:snapshot', ['s1']), /comes before s1\.q1/)
})

test('SET CONSTRAINTS ... IMMEDIATE is a point of its own: it checks deferred constraints and fires deferred triggers where it runs', async () => {
  const { pointsOfStep } = await import('../../src/engine/points.js')
  // a spec step in a transaction: the SET CONSTRAINTS is not merged into the insert after it
  const spec = pointsOfStep('set constraints all immediate; insert into t values (1)', true, true, /^$/)
  assert.deepEqual(spec?.points.map((p) => p.sql.trim()), ['set constraints all immediate', 'insert into t values (1)'])
  // SET of a setting still goes with the statement after it
  assert.equal(pointsOfStep('set lock_timeout = 100; insert into t values (1)', true, true, /^$/), undefined)
  // an application's string in a transaction, the same
  assert.deepEqual(texts('set constraints all immediate; insert into t values (1)', true), ['set constraints all immediate', 'insert into t values (1)'])
})
