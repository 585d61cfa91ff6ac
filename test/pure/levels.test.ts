// race explore --isolation and --inject without a database: which levels a list means, each level's row from an
// exploration's interleavings, the weakest level at which every interleaving held, the fixes offered, and the
// faults --inject takes. The explorations here are built by hand, so every count is known.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { fixesOf, levelsOutcome, parseLevels, rowOf, weakestSafe, type LevelRow } from '../../src/explore/levels.js'
import type { ExploreResult, Interleaving } from '../../src/explore/result.js'
import { faultAt, parseAppPermutation, parseFaults, splitInjected } from '../../src/app/labels.js'
import { sessionLevelParam, type Scenario } from '../../src/scenario.js'
import { isLevelList, levelsOn, type Level } from '../../src/levels.js'
import { judge } from '../../src/judge/index.js'

const withLevels = { id: 'x', params: sessionLevelParam() } as unknown as Scenario

test('--isolation all is rc, rr, ser on PostgreSQL and adds ru on InnoDB; a list is read weakest first, short names too', () => {
  assert.ok(isLevelList('all') && isLevelList('rc,ser') && !isLevelList('rc') && !isLevelList(undefined))
  assert.deepEqual(parseLevels('all', withLevels, 'postgres'), ['read committed', 'repeatable read', 'serializable'])
  assert.deepEqual(parseLevels('ALL', withLevels, 'mysql'), ['read uncommitted', 'read committed', 'repeatable read', 'serializable'])
  assert.deepEqual(levelsOn('mysql'), ['read uncommitted', 'read committed', 'repeatable read', 'serializable'])
  assert.deepEqual(parseLevels('ser,rc', withLevels, 'postgres'), ['read committed', 'serializable'])
  assert.deepEqual(parseLevels('ru, repeatable read', withLevels, 'mysql'), ['read uncommitted', 'repeatable read'])
  assert.throws(() => parseLevels('rc,ru', withLevels, 'postgres'), /READ UNCOMMITTED as READ COMMITTED/)
  assert.throws(() => parseLevels('rc,,ser', withLevels, 'postgres'), /empty item/)
  // A level named twice, in one spelling or two, is refused (issue 39): each level is explored once.
  assert.throws(() => parseLevels('rc,rc', withLevels, 'postgres'), /'rc,rc' names read committed twice/)
  assert.throws(() => parseLevels('rc,read-committed', withLevels, 'postgres'), /names read committed twice: give each level once/)
  assert.throws(() => parseLevels('rc,snapshot', withLevels, 'postgres'), /takes one of/)
  assert.throws(() => parseLevels('all', { id: 'advisory', params: {} } as unknown as Scenario, 'postgres'), /advisory sets its sessions' isolation levels itself/)
})

const it = (o: Partial<Interleaving> & Pick<Interleaving, 'held' | 'verdict'>): Interleaving => ({ line: 's1.q1', observed: '', outcomes: {}, waited: [], raised: [], levels: {}, switches: 0, runs: 1, why: '', ...o })

function explored(every: Interleaving[], o: Partial<ExploreResult> = {}): ExploreResult {
  return {
    every,
    interleavings: every.length,
    violating: every.filter((x) => x.held === false).length,
    unknown: every.filter((x) => x.verdict === 'unknown').length,
    mode: 'all',
    complete: true,
    diverged: 0,
    runs: every.length,
    ms: 1,
    replay: null,
    shortest: null,
    ...o,
  } as ExploreResult
}

test("a level's row: violating, how the others held (each SQLSTATE once per interleaving), sessions that ran at their own level", () => {
  const r = rowOf(
    'repeatable read',
    explored([
      it({ held: false, verdict: 'anomaly', levels: { s1: 'repeatable read', s2: 'repeatable read' } }),
      it({ held: true, verdict: 'prevented', raised: ['40001'], levels: { s1: 'serializable', s2: 'repeatable read' } }),
      it({ held: true, verdict: 'prevented', raised: ['40001', '40P01'] }),
      it({ held: true, verdict: 'serialized', waited: ['s2'] }),
      it({ held: true, verdict: 'clean' }),
      it({ held: null, verdict: 'unknown', raised: ['23514'] }),
    ]),
  )
  assert.deepEqual(
    { v: r.violating, u: r.unknown, p: r.prevented, s: r.serialized, c: r.clean, own: r.ownLevel, complete: r.complete },
    { v: 1, u: 1, p: { '40001': 2, '40P01': 1 }, s: 1, c: 1, own: ['s1 serializable'], complete: false },
  )
})

const row = (isolation: Level, violating: number, complete = true): LevelRow =>
  ({ isolation, violating, complete, interleavings: 10, unknown: 0, prevented: {}, serialized: 0, clean: 0, ownLevel: [], replay: null, shortest: null, shortestSwitches: null, runs: 10, ms: 1 }) as LevelRow

test('the weakest safe level is the weakest at which every interleaving ran and held; a level not wholly decided is never safe', () => {
  assert.equal(weakestSafe([row('read committed', 3), row('repeatable read', 0), row('serializable', 0)]), 'repeatable read')
  assert.equal(weakestSafe([row('read committed', 3), row('repeatable read', 2), row('serializable', 0)]), 'serializable')
  assert.equal(weakestSafe([row('read committed', 3), row('serializable', 1)]), null)
  // Held in what ran, but not all ran: not known to be safe, and the run is undecided (exit 3).
  const open = [row('read committed', 3), row('repeatable read', 0, false), row('serializable', 0)]
  assert.equal(weakestSafe(open), 'serializable')
  assert.equal(levelsOutcome(open, 'postgres').exitCode, 3)
  assert.equal(levelsOutcome([row('read committed', 3), row('serializable', 0)], 'postgres').exitCode, 0)
  const fixes = fixesOf([row('read committed', 3), row('repeatable read', 2), row('serializable', 0)], 'postgres')
  assert.deepEqual(fixes.map((f) => [f.level, f.fixedAt]), [['read committed', 'serializable'], ['repeatable read', 'serializable']])
  assert.ok(fixes[0].documented.some((x) => /pg_advisory_xact_lock/.test(x)))
  assert.ok(fixesOf([row('read committed', 1)], 'mysql')[0].documented.some((x) => /GET_LOCK/.test(x)))
  assert.equal(fixesOf([row('read committed', 1)], 'mysql')[0].fixedAt, null)
})

test('--inject: CODE@SITE items; a line names an injected query as s1.q5!40001', () => {
  assert.deepEqual(parseFaults('40001@commit, 40p01@2,LOST@q3'), [
    { code: '40001', site: 'commit', text: '40001@commit' },
    { code: '40P01', site: 2, text: '40P01@2' },
    { code: 'lost', site: 3, text: 'lost@3' },
  ])
  for (const bad of ['23505@commit', '40001', '40001@begin', '40001@0', '40001@commit,']) assert.throws(() => parseFaults(bad), /CODE@SITE|empty item|counted from 1/, bad)
  const [commit, second] = parseFaults('40001@commit,40P01@2')
  assert.ok(faultAt(commit, 'q7', '  COMMIT') && faultAt(commit, 'q4', 'end') && !faultAt(commit, 'q4', 'select 1'))
  assert.ok(faultAt(second, 'q2', 'select 1') && !faultAt(second, 'q3', 'select 1'))
  assert.deepEqual(splitInjected('s1.q5!40001'), { label: 's1.q5', inject: '40001' })
  assert.deepEqual(splitInjected('s1.q5'), { label: 's1.q5' })
  assert.deepEqual(parseAppPermutation('s1.q1 s1.q2!lost s2.q1', ['s1', 's2']), [
    { session: 's1', label: 's1.q1' },
    { session: 's1', label: 's1.q2', inject: 'lost' },
    { session: 's2', label: 's2.q1' },
  ])
  assert.throws(() => parseAppPermutation('s1.check!40001', ['s1']), /not a point/)
})

test('a session race ended itself (--inject lost) leaves a held invariant decided; a lost one otherwise does not; a loop without end is undecided', () => {
  const base = { name: 's1', sqlstate: null, errors: [], waitedMs: 0, step: 'q3', reason: null }
  const other = { ...base, name: 's2', outcome: 'committed' as const }
  assert.equal(judge([{ ...base, outcome: 'lost', injected: ['lost@q3'] }, other], { held: true }).verdict, 'clean')
  assert.equal(judge([{ ...base, outcome: 'lost' }, other], { held: true }).verdict, 'unknown')
  const forever = judge([{ ...base, outcome: 'failed', thrown: 'retried without end: 7 transactions begun in 20 queries in one call' }, other], { held: true })
  assert.equal(forever.verdict, 'unknown')
  assert.match(forever.why, /^s1 retried without end/)
})
