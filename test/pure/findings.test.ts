// Issue 39, items 8 and 9, the pure part: which undecided trials are the code under test failing (a finding, with a
// replay line) and which stay race's own "could not decide"; and the exit code a search's findings give, stopped or not.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { codeFailure } from '../../src/judge/failure.js'
import { judge } from '../../src/judge/index.js'
import { exitFromFindings } from '../../src/explore/findings.js'
import type { SessionReport } from '../../src/engine/types.js'

const s = (o: { [K in keyof SessionReport]?: SessionReport[K] | undefined }): SessionReport => ({
  name: 's1',
  pid: 1,
  outcome: 'committed',
  reason: null,
  sqlstate: null,
  condition: null,
  step: null,
  waitedMs: 0,
  ms: 1,
  retries: 0,
  errors: [],
  isolation: 'read committed',
  commitTag: 'COMMIT',
  ...o,
})
const none = new Set<string>()

test('the code failing: an undeclared SQLSTATE, a swallowed one, an undeclared throw, a COMMIT outside a transaction', () => {
  const cases: [SessionReport, string][] = [
    [s({ outcome: 'failed', sqlstate: '42P01', errors: ['42P01'] }), 's1 42P01 undefined_table'],
    [s({ outcome: 'failed', sqlstate: '42P01', errors: ['42P01'], thrown: 'caught 42P01 undefined_table (in step q2) and returned' }), 's1 42P01 undefined_table'],
    [s({ outcome: 'failed', sqlstate: '23505', errors: ['23505'] }), 's1 23505 unique_violation'],
    [s({ outcome: 'failed', sqlstate: '23000/1062', errors: ['23000/1062'] }), 's1 23000/1062 ER_DUP_ENTRY'],
    [s({ outcome: 'failed', thrown: "TypeError: Cannot read properties of undefined (reading 'n')" }), "s1 threw TypeError: Cannot read properties of undefined (reading 'n')"],
    [s({ outcome: 'failed', thrown: 'called process.exit(1)' }), 's1 called process.exit(1)'],
    [s({ outcome: 'failed', thrown: 'uncaught exception Error: boom' }), 's1 left an uncaught exception Error: boom'],
    [s({ outcome: 'failed', thrown: 'returned after its transaction was rolled back by 40001: its COMMIT q5 ran outside any transaction (25P01 no_active_sql_transaction) and committed nothing' }), 's1 committed outside any transaction (25P01 no_active_sql_transaction)'],
  ]
  for (const [one, named] of cases) {
    const sessions = [one, s({ name: 's2' })]
    // Each is a trial race leaves unknown today...
    assert.equal(judge(sessions, { held: true }).verdict, 'unknown', named)
    // ...and each is the code failing, named by session and error.
    assert.equal(codeFailure(sessions, none), named)
  }
  // Two sessions failing: both named, in order.
  assert.equal(codeFailure([s({ outcome: 'failed', sqlstate: '42P01' }), s({ name: 's2', outcome: 'failed', sqlstate: '42P01' })], none), 's1 42P01 undefined_table, s2 42P01 undefined_table')
})

test('not the code failing: what the server prevents, what is declared, and a trial with no failure', () => {
  assert.equal(codeFailure([s({ outcome: 'failed', sqlstate: '40001', errors: ['40001'] }), s({ name: 's2' })], none), undefined)
  assert.equal(codeFailure([s({ outcome: 'failed', sqlstate: '23505', errors: ['23505'] }), s({ name: 's2' })], new Set(['23505'])), undefined)
  assert.equal(codeFailure([s({ outcome: 'failed', sqlstate: '23000/1062' }), s({ name: 's2' })], new Set(['23000'])), undefined)
  assert.equal(codeFailure([s({ outcome: 'rejected', reason: 'sold out' }), s({ name: 's2' })], none), undefined)
})

test("race's own blindness stays undecided, even beside a failure of the code: timeouts, lost connections, late queries, race's bound, the environment's errors", () => {
  const failing = s({ outcome: 'failed', sqlstate: '42P01' })
  const blind: SessionReport[] = [
    s({ name: 's2', outcome: 'timeout', step: 'q2' }),
    s({ name: 's2', outcome: 'lost', reason: 'connection lost (57P01)' }),
    s({ name: 's2', outcome: 'failed', thrown: 'sent a query (q3) after its function returned' }),
    s({ name: 's2', outcome: 'failed', thrown: 'met a query of s1, sent after that function returned' }),
    s({ name: 's2', outcome: 'failed', thrown: 'retried without end: 40 transactions begun in 400 queries in one call; race stopped it there (maxQueries)' }),
    ...['57P01', '57014', '53300', '08006', 'XX000', '42501', '3D000', '28000', '70100/1317', '08S01/1053', 'HY000/2013', '42000/1044'].map((code) => s({ name: 's2', outcome: 'failed', sqlstate: code })),
  ]
  for (const b of blind) {
    assert.equal(judge([b], { held: true }).verdict, 'unknown', JSON.stringify(b))
    assert.equal(codeFailure([b], none), undefined, JSON.stringify(b))
    assert.equal(codeFailure([failing, b], none), undefined, `beside a failure: ${JSON.stringify(b)}`)
  }
  // A connection race itself ended (--inject lost) is no blindness: the other session's failure is the code's.
  assert.equal(codeFailure([failing, s({ name: 's2', outcome: 'lost', injected: ['lost@q3'] })], none), 's1 42P01 undefined_table')
  // A failure with no SQLSTATE and no error of the code's own (the driver said something race cannot name) stays undecided.
  assert.equal(codeFailure([s({ outcome: 'failed', reason: 'Query read timeout' })], none), undefined)
})

test('exit codes from findings: a violation or the code failing is exit 1 under expect held, also beside undecided runs and when stopped', () => {
  const f = (base: 0 | 1 | 3, expect: 'held' | 'violated' | undefined, violating: number, failed: number, stopped = false) => exitFromFindings(base, { expect, violating, failed, stopped })
  // expect held: a violation with undecided interleavings beside it (judge's exitCode gives 3) is 1.
  assert.equal(f(3, 'held', 2, 0), 1)
  assert.equal(f(3, 'held', 0, 4), 1)
  assert.equal(f(3, 'held', 2, 0, true), 1, 'stopped with a violation found')
  assert.equal(f(3, 'held', 0, 0, true), 3, 'stopped with nothing found decides nothing')
  assert.equal(f(0, 'held', 0, 0), 0)
  // expect violated: a violation found meets it, stopped or not, whatever else failed.
  assert.equal(f(0, 'violated', 1, 3, true), 0)
  assert.equal(f(3, 'violated', 0, 2), 1, 'never violated, and the code failed: a deviation')
  assert.equal(f(1, 'violated', 0, 0, true), 3, 'stopped before any violation: not known that none exists')
  // No expectation (a spec without expect): violations are reported, the code failing is a deviation.
  assert.equal(f(0, undefined, 3, 0), 0)
  assert.equal(f(3, undefined, 0, 1), 1)
  assert.equal(f(0, undefined, 3, 0, true), 3)
})
