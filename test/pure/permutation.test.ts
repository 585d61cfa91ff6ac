// The one permutation reader: every step once, in each session's order; (wait) marks; nothing else.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { UsageError } from '../../src/errors.js'
import { formatPermutation, lockstepOrder, parsePermutation, serialOrder, tokenize } from '../../src/permutation.js'

const sessions = [
  { name: 's1', steps: [{ name: 'begin' }, { name: 'check' }, { name: 'commit' }] },
  { name: 's2', steps: [{ name: 'begin' }, { name: 'check' }, { name: 'commit' }] },
]

test('permutations: every step once, in each session order', () => {
  const ok = parsePermutation('s1.begin s2.begin s1.check s2.check s1.commit s2.commit', sessions)
  assert.deepEqual(ok.map((e) => `${e.session}.${e.step}`), ['0.0', '1.0', '0.1', '1.1', '0.2', '1.2'])
  const bad: [string, RegExp][] = [
    ['s1.begin s3.begin', /names session 's3'/],
    ['s1.begin s1.nope', /has no step 'nope'/],
    ['s1.check s1.begin', /comes before s1\.begin/],
    ['s1.begin s1.begin', /appears twice/],
    ['s1.begin s2.begin s1.check s2.check s1.commit', /leaves out s2\.commit/],
    ['begin', /not session\.step/],
    ['', /is empty/],
  ]
  for (const [b, re] of bad) assert.throws(() => parsePermutation(b, sessions), (e: Error) => e instanceof UsageError && re.test(e.message), b)
})

test('(wait) is kept and printed back; any other parenthesised marker is not a step', () => {
  const two = [{ name: 's1', steps: [{ name: 'a' }, { name: 'b' }] }]
  const entries = parsePermutation('s1.a(wait) s1.b', two)
  assert.deepEqual(entries, [{ session: 0, step: 0, await: true }, { session: 0, step: 1 }])
  assert.equal(formatPermutation(entries, two), 's1.a(wait) s1.b')
  assert.deepEqual(tokenize('s1.a(wait)'), [{ session: 's1', step: 'a', await: true }])
  assert.throws(() => parsePermutation('s1.a(*) s1.b', two), UsageError)
})

test('lockstep and serial orders', () => {
  assert.equal(formatPermutation(lockstepOrder(sessions), sessions), 's1.begin s2.begin s1.check s2.check s1.commit s2.commit')
  assert.equal(formatPermutation(serialOrder(sessions), sessions), 's1.begin s1.check s1.commit s2.begin s2.check s2.commit')
})

test('a commit point (s1.ins:commit) follows its own step, before the session\'s next, and prints back as read', () => {
  const auto = [
    { name: 's1', steps: [{ name: 'ins' }, { name: 'read' }] },
    { name: 's2', steps: [{ name: 'ins' }] },
  ]
  const line = 's1.ins s2.ins s2.ins:commit s1.ins:commit s1.read'
  const ok = parsePermutation(line, auto)
  assert.deepEqual(ok.map((e) => `${e.session}.${e.step}${e.commit ? 'c' : ''}`), ['0.0', '1.0', '1.0c', '0.0c', '0.1'])
  assert.equal(formatPermutation(ok, auto), line)
  const bad: [string, RegExp][] = [
    ['s1.ins:commit s1.ins s1.read s2.ins', /must come after s1\.ins/],
    ['s1.ins s1.read s1.ins:commit s2.ins', /must come after s1\.ins/],
    ['s1.ins s1.ins:commit s1.ins:commit s1.read s2.ins', /must come after s1\.ins/],
    ['s1.ins s1.nope:commit s1.read s2.ins', /has no step 'nope'/],
  ]
  for (const [b, re] of bad) assert.throws(() => parsePermutation(b, auto), (e: Error) => e instanceof UsageError && re.test(e.message), b)
})
