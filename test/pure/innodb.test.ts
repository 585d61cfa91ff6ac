// The InnoDB (MySQL/MariaDB) side of the scenario files, before any server: every case race check runs there is
// declared soundly, the matrix has its rows, ? placeholders are one per use, and errors are read by SQLSTATE and
// error number together.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { parseBinds } from '../../src/binds.js'
import { checkCases } from '../../src/run/check.js'
import { levelsOn } from '../../src/levels.js'
import { commandOf, statements } from '../../src/db/mysql.js'
import { conditionName, isConcurrencyControl, isIntegrityViolation, isServerError, sqlstateOf } from '../../src/db/sqlstate.js'
import { checkScenario, isMatrixRow, unavailableOn } from '../../src/plan.js'
import { scenarios } from '../../src/registry.js'

test('every scenario and check case race check runs on InnoDB is declared soundly', async () => {
  const problems: string[] = []
  const cases = await checkCases([], 'mysql')
  for (const k of cases) for (const p of checkScenario(k.scenario, k.params, k.n, 'mysql')) problems.push(`${k.scenario.id} (${k.label}): ${p}`)
  assert.deepEqual(problems, [])
  assert.ok(cases.length >= 40, `${cases.length} cases`)
})

test('the InnoDB matrix: READ UNCOMMITTED too, and gap-lock and locking-read, which PostgreSQL does not have', async () => {
  assert.deepEqual(levelsOn('mysql'), ['read uncommitted', 'read committed', 'repeatable read', 'serializable'])
  assert.deepEqual(levelsOn('postgres'), ['read committed', 'repeatable read', 'serializable'])
  const rows = (await scenarios()).filter((s) => isMatrixRow(s, 'mysql')).map((s) => s.id)
  for (const id of ['dirty-read', 'write-skew', 'lost-update', 'gap-lock', 'locking-read', 'phantom']) assert.ok(rows.includes(id), id)
  const pg = (await scenarios()).filter((s) => isMatrixRow(s, 'postgres')).map((s) => s.id)
  assert.ok(!pg.includes('gap-lock') && !pg.includes('locking-read'))
})

test('a scenario that cannot exist on an engine says why, in one line', async () => {
  const all = await scenarios()
  const missing = all.filter((s) => !s.documented.mysql && !s.unavailable?.mysql).map((s) => s.id)
  assert.deepEqual(missing, [], 'every scenario either documents InnoDB or says why it cannot')
  for (const s of all) {
    const why = unavailableOn(s, 'mysql')
    if (why) assert.ok(!why.includes('\n') && why.length > 20, `${s.id}: ${why}`)
  }
  assert.match(unavailableOn(all.find((s) => s.id === 'gap-lock')!, 'postgres') ?? '', /no gap locks/)
})

test('MySQL placeholders: one ? per use, none inside strings, backquoted names or comments', () => {
  const p = parseBinds("select :a, ':b', `:c`, :a -- :d\n, 'it''s \\' :e', :f.g", 'question')
  assert.equal(p.text, "select ?, ':b', `:c`, ? -- :d\n, 'it''s \\' :e', ?")
  assert.deepEqual(p.names, ['a', 'a', 'f.g'])
  // PostgreSQL's numbering is unchanged: the same name is the same parameter.
  assert.deepEqual(parseBinds('select :a, :a::int, :b').names, ['a', 'b'])
})

test('MySQL errors: SQLSTATE and error number together, HY000 told apart by the number', () => {
  assert.ok(isServerError('40001/1213') && isServerError('40001') && !isServerError('CONNECTION_CLOSED'))
  assert.equal(sqlstateOf('40001/1213'), '40001')
  assert.equal(conditionName('40001/1213'), 'ER_LOCK_DEADLOCK')
  assert.equal(conditionName('23000/1062'), 'ER_DUP_ENTRY')
  assert.equal(conditionName('40001'), 'serialization_failure')
  assert.ok(isConcurrencyControl('40001/1213') && isConcurrencyControl('HY000/1020') && isConcurrencyControl('HY000/1205'))
  assert.ok(!isConcurrencyControl('HY000/1064') && !isConcurrencyControl('70100/1317'))
  // A duplicate key or a NOT NULL column left out (1048) is an integrity error: a prevention only where declared.
  assert.ok(!isConcurrencyControl('23000/1062') && isIntegrityViolation('23000/1062') && isIntegrityViolation('23000/1048'))
})

test('statements and their command tags (MySQL sends none)', () => {
  assert.deepEqual(statements("set transaction isolation level read committed; start transaction"), ['set transaction isolation level read committed', 'start transaction'])
  assert.deepEqual(statements("insert into t values ('a;b'); commit"), ["insert into t values ('a;b')", 'commit'])
  assert.equal(commandOf('start transaction'), 'BEGIN')
  assert.equal(commandOf('/* x */ Update t set a = 1'), 'UPDATE')
})
