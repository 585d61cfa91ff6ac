// judge/ is pure: verdicts from hand-made outcomes, and verdicts against expectations.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { exitCode, judge, summarize } from '../src/judge/index.js'
import type { SessionReport } from '../src/engine/types.js'

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
  ...o,
})

test('a violated invariant is an anomaly, whatever the sessions did', () => {
  assert.equal(judge([s({}), s({ name: 's2' })], { held: false }).verdict, 'anomaly')
})

test('held because PostgreSQL raised an error: prevented (23505, 40001, 40P01, 55P03)', () => {
  for (const code of ['23505', '40001', '40P01', '55P03']) {
    const v = judge([s({}), s({ name: 's2', outcome: 'failed', sqlstate: code, errors: [code] })], { held: true })
    assert.equal(v.verdict, 'prevented', code)
  }
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

test('summaries: every trial must match; unknown exits 3; a deviation exits 1', () => {
  const ok = summarize([{ verdict: 'serialized' }, { verdict: 'clean' }], ['serialized', 'clean'])
  assert.equal(ok.matched, true)
  assert.equal(exitCode(ok), 0)
  const dev = summarize([{ verdict: 'serialized' }, { verdict: 'anomaly' }], ['serialized', 'clean'])
  assert.equal(dev.matched, false)
  assert.equal(dev.verdict, 'anomaly')
  assert.equal(dev.violations, 1)
  assert.equal(exitCode(dev), 1)
  const unk = summarize([{ verdict: 'unknown' }], ['unknown' as never])
  assert.equal(unk.matched, false)
  assert.equal(exitCode(unk), 3)
})

test('--expect violated passes when at least one trial violated; --expect held needs all held', () => {
  const trials = [{ verdict: 'clean' as const }, { verdict: 'anomaly' as const }]
  assert.equal(summarize(trials, ['anomaly'], 'violated').matched, true)
  assert.equal(summarize(trials, ['anomaly'], 'held').matched, false)
  assert.equal(summarize([{ verdict: 'clean' }], ['anomaly'], 'held').matched, true)
  assert.equal(summarize([{ verdict: 'unknown' }], ['anomaly'], 'held').matched, false)
})

test('no documented expectation (custom permutation): decided verdicts pass, unknown does not', () => {
  assert.equal(summarize([{ verdict: 'anomaly' }], []).matched, true)
  assert.equal(summarize([{ verdict: 'unknown' }], []).matched, false)
})

test('a lost session: a violation among what committed is an anomaly; a hold proves nothing (unknown)', () => {
  const lost = s({ name: 's2', outcome: 'lost', step: 'insert', reason: 'connection lost (CONNECTION_CLOSED)' })
  assert.equal(judge([s({}), lost], { held: false }).verdict, 'anomaly')
  const held = judge([s({}), lost], { held: true })
  assert.equal(held.verdict, 'unknown')
  assert.match(held.why, /s2 \(in step insert\) lost its connection/)
  assert.equal(exitCode(summarize([held], ['serialized'])), 3)
})
