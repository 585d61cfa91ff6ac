// Issue 39, items 4 and 7, the pure parts: which session did not complete where every session must, how a run's
// summary and exit code take it, the spec line that asks for it, and the line for an --inject fault that never fired.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { exitCode, notCompleted, summarize, type JudgedTrial } from '../../src/judge/index.js'
import type { SessionReport } from '../../src/engine/types.js'
import { parseSpec } from '../../src/specfile/parse.js'
import { notFiredLine } from '../../src/explore/result.js'

const s = (o: Partial<SessionReport>): SessionReport => ({
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

test('notCompleted: a failure with any code, a crash, an injected lost connection, an unretried error; not what race cut short', () => {
  assert.equal(notCompleted([s({}), s({ name: 's2', outcome: 'rejected', reason: 'insufficient funds' })]), undefined)
  assert.equal(notCompleted([s({}), s({ name: 's2', outcome: 'failed', sqlstate: '40001', step: 'q4' })]), 's2 failed with 40001 serialization_failure in step q4')
  assert.equal(notCompleted([s({ outcome: 'failed', thrown: 'TypeError: x', step: 'q2' })]), 's1 threw TypeError: x in step q2')
  assert.equal(notCompleted([s({ outcome: 'lost', step: 'q3', injected: ['lost@q3'] })]), 's1 lost its connection in step q3 (race ended it: --inject lost)')
  assert.equal(notCompleted([s({ outcome: 'rejected', reason: 'rolled back and returned: 503', unrecovered: '40001 serialization_failure in q4' })]), 's1 was rejected (rolled back and returned: 503) after 40001 serialization_failure in q4, which it did not retry')
  // What race itself could not judge stays undecided, not a failure of the code.
  for (const x of [s({ outcome: 'timeout', step: 'q2' }), s({ outcome: 'lost', step: 'q2' }), s({ outcome: 'failed', thrown: 'sent a query (q2) after its function returned' })]) assert.equal(notCompleted([x]), undefined)
})

test('summarize: a trial that did not complete is a failure under any expectation, decided (exit 1), named first', () => {
  const held: JudgedTrial = { verdict: 'prevented', comparison: { matched: true, deviations: [] } }
  const failed: JudgedTrial = { verdict: 'prevented', comparison: { matched: true, deviations: [] }, failure: 's2 failed with 40001 serialization_failure in step q4' }
  for (const expect of ['held', 'violated', undefined] as const) {
    const sum = summarize([held, failed], [], expect)
    assert.equal(sum.matched, false, String(expect))
    assert.equal(sum.failures, 1)
    assert.equal(sum.deviations[0], 'every session must complete, but s2 failed with 40001 serialization_failure in step q4 (in 1 of 2 trials)')
    assert.equal(exitCode(sum), 1)
  }
  // A failure is decided even where the verdict is unknown (the code threw), and beside another undecided trial.
  const crashed: JudgedTrial = { verdict: 'unknown', comparison: { matched: false, deviations: [], undecided: true }, failure: 's1 threw TypeError: x in step q2' }
  const undecided: JudgedTrial = { verdict: 'unknown', comparison: { matched: false, deviations: [], undecided: true } }
  const sum = summarize([crashed, undecided], [], 'held')
  assert.equal(sum.unknowns, 1)
  assert.equal(exitCode(sum), 1)
  // Nothing changes where every session completed.
  assert.equal(exitCode(summarize([held, held], [], 'held')), 0)
})

test('a spec\'s `every session completes` line; `every` stays a name elsewhere', () => {
  const head = 'setup { create table t (k int) }\ninvariant "x" { select true }\n'
  const body = 'session s1\nstep every { select 1 }\nsession s2\nstep b { select 2 }\n'
  assert.equal(parseSpec(head + body).complete, undefined)
  assert.equal(parseSpec(head + 'every session completes\n' + body).complete?.pos.line, 3)
  // After the sessions, after a permutation that names a step called every.
  const after = parseSpec(head + body + 'permutation every b\nevery session completes\n')
  assert.deepEqual(after.permutations[0].steps.map((x) => x.name), ['every', 'b'])
  assert.ok(after.complete)
  assert.throws(() => parseSpec(head + 'every session finishes\n' + body), /3:15: expected 'completes' after 'every session'/)
  assert.throws(() => parseSpec(head + 'every session completes\nevery session completes\n' + body), /a second every session completes line: the first is at line 3/)
})

test('notFiredLine: the site that never came, or the search that never took it', () => {
  assert.equal(notFiredLine({ fault: '40001@99', offered: 0 }, 20), '--inject 40001@99 never fired: no session sent a 99th query (q99) in any of the 20 runs, so nothing was injected')
  assert.equal(notFiredLine({ fault: '40001@commit', offered: 0 }, 20), '--inject 40001@commit never fired: no session sent a COMMIT in any of the 20 runs, so nothing was injected')
  assert.match(notFiredLine({ fault: '40P01@2', offered: 5 }, 20), /^--inject 40P01@2 never fired: its site came up in 5 of the 20 runs, and the search took it in none/)
  assert.match(notFiredLine({ fault: '40001@11', offered: 0 }, 1), /no session sent an 11th query \(q11\)/)
})
