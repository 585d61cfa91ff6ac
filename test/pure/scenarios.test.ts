// Every scenario file is sound on its own, before any server: its binds exist, its permutation names its own
// steps, and every documented outcome accounts for every session, for the defaults and each check case.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { checkCases } from '../../src/run/check.js'
import { checkScenario, isMatrixRow } from '../../src/plan.js'
import { scenarioIds, scenarios } from '../../src/registry.js'

test('every scenario and check case is declared soundly', async () => {
  const problems: string[] = []
  for (const k of await checkCases([])) for (const p of checkScenario(k.scenario, k.params, k.n)) problems.push(`${k.scenario.id} (${k.label}): ${p}`)
  assert.deepEqual(problems, [])
})

test('the registry finds every file in scenarios/ by itself, and each id is its file name', async () => {
  const all = await scenarios()
  assert.deepEqual(all.map((s) => s.id).sort(), scenarioIds())
  assert.equal(new Set(all.map((s) => s.id)).size, all.length)
})

test('the matrix rows are the scenarios that document each isolation level, and nothing else decides them', async () => {
  const rows = (await scenarios()).filter((s) => isMatrixRow(s)).map((s) => s.id)
  assert.deepEqual(rows.sort(), [
    // The check-then-insert family (issue 23): the broken code, FOR UPDATE on it, and the unique index.
    'broken', 'for-update', 'unique-index',
    'dirty-read', 'lost-update', 'lost-update-atomic', 'lost-update-for-update', 'lost-update-version', 'non-repeatable-read',
    'phantom', 'predicate-delete', 'predicate-read', 'read-skew', 'write-skew',
  ].sort())
})

test('a declaration mistake is named: unknown bind, missing step, a documented outcome that misses a session', async () => {
  const [ws] = (await scenarios()).filter((s) => s.id === 'write-skew')
  const broken = {
    ...ws,
    id: 'bad-skew',
    sessions: () => ({ t1: { steps: { begin: 'begin', off: 'update doctors set on_call = false where id = :doctor' } } }),
    permutation: 't1.begin t1.nope',
  }
  const problems = checkScenario(broken, { isolation: 'read committed' }, 2)
  assert.ok(problems.some((p) => /unknown bind :doctor/.test(p)), problems.join('\n'))
  assert.ok(problems.some((p) => /has no step 'nope'/.test(p)), problems.join('\n'))
  assert.ok(problems.some((p) => /documents session 't2', which this variant does not have/.test(p)), problems.join('\n'))
})
