// judge/ is pure: verdicts from hand-made outcomes, and verdicts against expectations.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { compare, describeDoc, differences, documentedCodes, exitCode, judge, summarize, type Comparison, type JudgedTrial } from '../../src/judge/index.js'
import type { SessionReport } from '../../src/engine/types.js'
import type { Documented } from '../../src/scenario.js'

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

test('a violated invariant is an anomaly, whatever the sessions did', () => {
  assert.equal(judge([s({}), s({ name: 's2' })], { held: false }).verdict, 'anomaly')
})

test('held because PostgreSQL raised an error: prevented (40001, 40P01, 55P03; 23505 where declared)', () => {
  for (const code of ['40001', '40P01', '55P03', '40001/1213', 'HY000/1205']) {
    const v = judge([s({}), s({ name: 's2', outcome: 'failed', sqlstate: code, errors: [code] })], { held: true })
    assert.equal(v.verdict, 'prevented', code)
  }
  for (const code of ['23505', '23000/1062']) {
    const v = judge([s({}), s({ name: 's2', outcome: 'failed', sqlstate: code, errors: [code] })], { held: true }, documentedCodes([{ who: { committed: 1, [code]: 1 } }]))
    assert.equal(v.verdict, 'prevented', code)
  }
})

test('an integrity error no one declared is never a prevention: every session failing 23502/23514 is unknown, not held', () => {
  for (const code of ['23502', '23514', '23505', '23000/1048', '23000/4025']) {
    const all = [1, 2, 3].map((i) => s({ name: `s${i}`, outcome: 'failed', sqlstate: code, errors: [code], step: 'insert' }))
    // The documentation declares another code (an exclusion constraint's 23P01), not the one that happened.
    const v = judge(all, { held: true }, documentedCodes([{ who: { committed: 1, '23P01': 2 } }]))
    assert.equal(v.verdict, 'unknown', code)
    assert.ok(v.why.startsWith(`s1 failed with ${code}`), v.why)
    assert.match(v.why, /a prevention only where it is declared \(a spec's line: prevented by 23/)
    const held = summarize([{ verdict: v.verdict, comparison: compare(v.verdict, all, [], {}) }], [], 'held')
    assert.equal(held.matched, false, `--expect held with every session failing ${code}`)
    assert.equal(exitCode(held), 3)
  }
  // A violation is still a fact, whatever else failed.
  assert.equal(judge([s({ outcome: 'failed', sqlstate: '23502', errors: ['23502'] })], { held: false }).verdict, 'anomaly')
})

test('a 40001 that a retry recovered from still counts as prevented', () => {
  const v = judge([s({}), s({ name: 's2', outcome: 'rejected', errors: ['40001'], retries: 1 })], { held: true })
  assert.equal(v.verdict, 'prevented')
})

test('held because someone waited: serialized; nobody waited or failed: clean', () => {
  assert.equal(judge([s({}), s({ name: 's2', outcome: 'rejected', waitedMs: 3 })], { held: true }).verdict, 'serialized')
  assert.equal(judge([s({}), s({ name: 's2', outcome: 'rejected' })], { held: true }).verdict, 'clean')
})

test('a timeout, an unevaluated invariant or an unexpected SQL error is unknown, never a pass', () => {
  assert.equal(judge([s({ outcome: 'timeout', step: 'lock' })], { held: true }).verdict, 'unknown')
  assert.equal(judge([s({})], { held: null, error: 'x' }).verdict, 'unknown')
  const odd = judge([s({ outcome: 'failed', sqlstate: '42P01', errors: ['42P01'] })], { held: true })
  assert.equal(odd.verdict, 'unknown')
  assert.match(odd.why, /42P01 undefined_table/)
})

const ok: Comparison = { matched: true, deviations: [] }
const off = (d: string) => ({ matched: false, deviations: [d] })
const t = (verdict: JudgedTrial['verdict'], comparison = ok): JudgedTrial => ({ verdict, comparison })
const DOC = [{ verdict: 'serialized' as const, who: { committed: 1, rejected: 1 }, why: 'x' }]

test('summaries: every trial must match its documentation; unknown exits 3; a deviation exits 1', () => {
  const good = summarize([t('serialized'), t('clean')], DOC)
  assert.equal(good.matched, true)
  assert.equal(exitCode(good), 0)
  const dev = summarize([t('serialized'), t('anomaly', off('verdict: documented serialized, got anomaly'))], DOC)
  assert.equal(dev.matched, false)
  assert.equal(dev.verdict, 'anomaly')
  assert.equal(dev.violations, 1)
  assert.equal(dev.deviating, 1)
  assert.deepEqual(dev.deviations, ['verdict: documented serialized, got anomaly'])
  assert.equal(exitCode(dev), 1)
  const unk = summarize([t('unknown', { matched: false, deviations: [] })], DOC)
  assert.equal(unk.matched, false)
  assert.equal(exitCode(unk), 3)
})

test('--expect violated passes when at least one trial violated; --expect held needs all held', () => {
  const trials = [t('clean'), t('anomaly', off('x'))]
  assert.equal(summarize(trials, DOC, 'violated').matched, true)
  assert.equal(summarize(trials, DOC, 'held').matched, false)
  assert.equal(summarize([t('clean')], DOC, 'held').matched, true)
  assert.equal(summarize([t('unknown')], DOC, 'held').matched, false)
})

test('a run that fails only by --expect says so in its deviations, never an empty list (issue 23)', () => {
  const held = summarize([t('clean'), t('anomaly', off('x')), t('clean')], DOC, 'held')
  assert.equal(held.matched, false)
  assert.deepEqual(held.deviations, ['--expect held, but the invariant was violated in 1 of 3 trials'])
  assert.equal(held.deviating, 1)
  const violated = summarize([t('clean'), t('serialized')], DOC, 'violated')
  assert.equal(violated.matched, false)
  assert.deepEqual(violated.deviations, ['--expect violated, but the invariant was never violated (2 of 2 trials held)'])
  assert.equal(violated.deviating, 2)
  assert.deepEqual(summarize([t('unknown', { matched: false, deviations: [], undecided: true } as never)], DOC, 'held').deviations, ['--expect held, but the invariant could not be decided in 1 of 1 trial'])
  // Met: nothing deviates.
  assert.deepEqual(summarize([t('anomaly', off('x'))], DOC, 'violated').deviations, [])
})

test('no documented expectation (custom permutation): decided verdicts pass, unknown does not', () => {
  assert.equal(summarize([t('anomaly')], []).matched, true)
  assert.equal(summarize([t('unknown', { matched: false, deviations: [] })], []).matched, false)
})

test('a lost session: a violation among what committed is an anomaly; a hold proves nothing (unknown)', () => {
  const lost = s({ name: 's2', outcome: 'lost', step: 'insert', reason: 'connection lost (CONNECTION_CLOSED)' })
  assert.equal(judge([s({}), lost], { held: false }).verdict, 'anomaly')
  const held = judge([s({}), lost], { held: true })
  assert.equal(held.verdict, 'unknown')
  assert.match(held.why, /s2 \(in step insert\) lost its connection/)
  assert.equal(exitCode(summarize([{ verdict: held.verdict, comparison: { matched: false, deviations: [] } }], DOC)), 3)
})

test('the whole documented outcome is compared: who ended how, with which SQLSTATE, by name or by count', () => {
  const doc = { verdict: 'prevented' as const, who: { s1: 'committed', s2: '40P01' }, why: 'deadlock' }
  const sessions = [s({ name: 's1', outcome: 'failed', sqlstate: '55P03' }), s({ name: 's2' })]
  // Any prevention is not the documented one: a lock_timeout is not a deadlock, and the victim matters.
  assert.deepEqual(differences('prevented', sessions, doc), ['s1: documented committed, got 55P03', 's2: documented 40P01, got committed'])
  assert.deepEqual(differences('prevented', [s({ name: 's1' }), s({ name: 's2', outcome: 'failed', sqlstate: '40P01' })], doc), [])
  const counts = { verdict: 'serialized' as const, who: { committed: 3, 'rejected: pending limit reached': 2 }, why: '' }
  const five = (c: number) => Array.from({ length: 5 }, (_, i) => s({ name: `s${i + 1}`, ...(i < c ? {} : { outcome: 'rejected' as const, reason: 'pending limit reached' }) }))
  assert.deepEqual(differences('serialized', five(3), counts), [])
  assert.deepEqual(differences('serialized', five(2), counts), ['committed: documented 3, got 2', 'rejected: pending limit reached: documented 2, got 3'])
  // A reason is part of the outcome; an undocumented ending is named.
  const why = differences('serialized', [s({ outcome: 'rejected', reason: 'busy' }), ...five(3).slice(1)], counts)
  assert.deepEqual(why, ['committed: documented 3, got 2', 'rejected: busy: documented 0, got 1 (s1)'])
  // Ranges, for free-running races.
  const range = { verdict: 'anomaly' as const, who: { committed: [2, 5] as const, rejected: [0, 3] as const }, why: '' }
  assert.deepEqual(differences('anomaly', five(4), range), [])
  assert.deepEqual(differences('anomaly', five(1), range), ['committed: documented 2-5, got 1', 'rejected: documented 0-3, got 4'])
  assert.equal(describeDoc(counts), 'serialized: 3 committed, 2 rejected: pending limit reached')
})

test('several documented alternatives: a trial matches any one; a mismatch reports the closest', () => {
  const docs: Documented[] = [
    { verdict: 'anomaly' as const, who: { committed: 2 }, why: '' },
    { verdict: 'clean' as const, who: { committed: 1, rejected: 1 }, why: '' },
  ]
  const levels = { s1: 'read committed' as const, s2: 'read committed' as const }
  assert.equal(compare('clean', [s({ name: 's1' }), s({ name: 's2', outcome: 'rejected', reason: 'x' })], docs, levels).matched, true)
  const c = compare('serialized', [s({ name: 's1' }), s({ name: 's2', outcome: 'rejected', reason: 'x' })], docs, levels)
  assert.deepEqual(c, { matched: false, deviations: ['verdict: documented clean, got serialized'] })
  assert.equal(compare('unknown', [], docs, levels).matched, false, 'unknown is never a match')
})

test('the level each session ran at is compared with the level the scenario is documented for', () => {
  const docs = [{ verdict: 'anomaly' as const, who: { committed: 2 }, why: '' }]
  const ran = [s({ name: 's1', isolation: 'repeatable read' }), s({ name: 's2', isolation: 'repeatable read' })]
  const c = compare('anomaly', ran, docs, { s1: 'read committed', s2: 'read committed' })
  assert.deepEqual(c.deviations, ['s1: ran at repeatable read, documented for read committed', 's2: ran at repeatable read, documented for read committed'])
  assert.equal(compare('anomaly', ran, docs, { s1: null, s2: null }).matched, true, 'no assumption, no comparison')
})

test('a missing read is a failure to decide (unknown), never a hold', () => {
  assert.equal(judge([s({})], { held: null, error: 'the invariant said NULL: something it needs is missing' }).verdict, 'unknown')
})

test('a session whose COMMIT answered ROLLBACK has failed, and a failure without a SQLSTATE is undecided', () => {
  const v = judge([s({ outcome: 'failed', reason: 'COMMIT answered ROLLBACK: the transaction had failed', commitTag: 'ROLLBACK' })], { held: true })
  assert.equal(v.verdict, 'unknown')
  assert.match(v.why, /COMMIT answered ROLLBACK/)
})

test("a session documented at a level whose level race asked for and never got ('?') is not compared in silence: undecided", () => {
  const doc: Documented[] = [{ verdict: 'serialized', who: { committed: 1, rejected: 1 }, why: 'x' }]
  const levels = { s1: 'read committed' as const, s2: 'read committed' as const }
  const read = [s({ waitedMs: 0 }), s({ name: 's2', outcome: 'rejected', waitedMs: 3 })]
  assert.deepEqual(compare('serialized', read, doc, levels), { matched: true, deviations: [] })
  // null: no statement depended on a level (MySQL: no InnoDB row read or written), nothing to compare.
  assert.equal(compare('serialized', [s({}), s({ name: 's2', outcome: 'rejected', waitedMs: 3, isolation: null })], doc, levels).matched, true)
  const unread = [s({}), s({ name: 's2', outcome: 'rejected', waitedMs: 3, isolation: '?' })]
  const c = compare('serialized', unread, doc, levels)
  assert.equal(c.matched, false)
  assert.equal(c.undecided, true)
  assert.deepEqual(c.deviations, ['s2: its isolation level could not be read from the server (documented for read committed): the run cannot be compared with its documentation'])
  assert.equal(exitCode(summarize([{ verdict: 'serialized', comparison: c }], doc)), 3)
  // No level documented (a spec file): nothing to compare, nothing to read.
  assert.equal(compare('serialized', unread, doc, { s1: null, s2: null }).matched, true)
})
