// The isolation-levels article's internals and pitfalls on a real server: row versions and snapshots, VACUUM
// held back by a forgotten transaction (and idle_in_transaction_session_timeout), SSI's predicate locks,
// write skew's FOR UPDATE fix, and how long deadlock detection waits.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { SessionReport, TrialFacts } from '../../src/engine/types.js'
import type { Trial } from '../../src/run/judge.js'
import type { Params } from '../../src/scenario.js'
import { race, runScenario, useLab } from '../support/server.js'

const ctx = useLab()

const by = (t: TrialFacts, name: string): SessionReport => t.sessions.find((s) => s.name === name)!

test('mvcc-versions: RR keeps the old version (its xmax is t1\'s xid, in progress for its snapshot); RC sees the new one at its next statement', async () => {
  const [t] = (await runScenario(ctx.lab, 'mvcc-versions')).trials
  assert.ok(t.comparison.matched, t.comparison.deviations.join('; '))
  assert.equal(t.invariant.held, true, t.invariant.observed)
  const o = t.invariant.observed
  const rr = /rr read2, snapshot (\d+):(\d+):([\d,]*): account 1 \(0,1\)=500 xmin (\d+) xmax (\d+) \(in progress for the snapshot \(rule 1\): still visible\), account 2 (\(\d+,\d+\))=400 xmin (\d+) xmax (\d+) \(began after the snapshot \(rule 2\): still visible\)/.exec(o)
  assert.ok(rr, o)
  const rc = /rc read2, snapshot [\d:,]+: account 1 (\(\d+,\d+\))=600 xmin (\d+) xmax 0, account 2 (\(\d+,\d+\))=450 xmin (\d+) xmax 0$/.exec(o)
  assert.ok(rc, o)
  const [, , , xip, , t1xid, , , t2second] = rr!
  assert.equal(rc![2], t1xid, "the new version of account 1 is t1's: its xmin is the old version's xmax")
  assert.ok(xip.split(',').includes(t1xid), "t1's xid is in rr's in-progress list")
  assert.equal(rc![4], t2second, "account 2's newest version is the one that replaced what rr still sees")
  assert.notEqual(rc![1], '(0,1)', 'the update wrote a new version elsewhere')
})

/** vacuum-horizon on a server others share: a backend outside the run may hold the horizon at that moment (then the run says so, undecided); try again. */
async function vacuum(params: Params = {}): Promise<Trial> {
  let t: Trial | undefined
  for (let i = 0; i < 3; i++) {
    ;[t] = (await runScenario(ctx.lab, 'vacuum-horizon', { params })).trials
    if (!/backends outside this run/.test(t.invariant.observed) && !/after long ended, VACUUM left [1-9]/.test(t.invariant.observed)) return t
  }
  return t!
}

test('vacuum-horizon: VACUUM leaves the dead tuples while the forgotten transaction is open, removes them after it ended', async () => {
  const t = await vacuum({ updates: 25 })
  assert.ok(t.comparison.matched, t.comparison.deviations.join('; '))
  assert.equal(t.verdict, 'anomaly')
  assert.equal(t.invariant.observed, '25 rows updated, 25 dead tuples; VACUUM while long was open left 25; after long ended, VACUUM left 0')
})

test('vacuum-horizon --idle-timeout: the server ends the forgotten transaction (25P03 on its next statement) and VACUUM proceeds', async () => {
  const t = await vacuum({ idleTimeout: 300 })
  assert.ok(t.comparison.matched, t.comparison.deviations.join('; '))
  assert.equal(t.verdict, 'prevented')
  assert.equal(t.invariant.observed, '10 rows updated, 10 dead tuples; VACUUM after long ended left 0')
  const long = by(t, 'long')
  assert.deepEqual([long.outcome, long.sqlstate, long.step], ['failed', '25P03', 'commit'])
})

test('the 25P03 is what the server said: race run prints it with its condition name', async () => {
  let r = await race(['run', 'vacuum-horizon', '--idle-timeout', '300ms'], { url: ctx.server.url, env: { COLUMNS: '200' } })
  // Undecided (exit 3) only when a backend outside the run held the horizon: try again.
  for (let i = 0; i < 2 && r.code === 3 && /outside this run/.test(r.stdout); i++) r = await race(['run', 'vacuum-horizon', '--idle-timeout', '300ms'], { url: ctx.server.url, env: { COLUMNS: '200' } })
  assert.equal(r.code, 0, r.stdout + r.stderr)
  assert.match(r.stdout, /long +│? *\d+ +│? *failed in commit +│? *25P03 idle_in_transaction_session_timeout/)
})

test('predicate-locks: SIReadLocks after the reads (relation, or tuples and an index page), 40001 for t2 in its update; none at READ COMMITTED', async () => {
  const [seq] = (await runScenario(ctx.lab, 'predicate-locks')).trials
  assert.ok(seq.comparison.matched, seq.comparison.deviations.join('; '))
  assert.equal(seq.invariant.observed, '1 on call; SIReadLocks after the reads: t1 1 (relation doctors), t2 1 (relation doctors)')
  assert.deepEqual([by(seq, 't2').sqlstate, by(seq, 't2').step], ['40001', 'off'])
  const [idx] = (await runScenario(ctx.lab, 'predicate-locks', { params: { scan: 'index' } })).trials
  assert.ok(idx.comparison.matched, idx.comparison.deviations.join('; '))
  assert.match(idx.invariant.observed, /t1 3 \(tuple doctors 0 1, tuple doctors 0 2, page doctors_on_call \d+\), t2 3 \(tuple doctors 0 1, tuple doctors 0 2, page doctors_on_call \d+\)$/)
  assert.deepEqual([by(idx, 't2').sqlstate, by(idx, 't2').step], ['40001', 'off'])
  const [rc] = (await runScenario(ctx.lab, 'predicate-locks', { params: { isolation: 'read committed' } })).trials
  assert.ok(rc.comparison.matched, rc.comparison.deviations.join('; '))
  assert.equal(rc.invariant.observed, '0 on call; SIReadLocks after the reads: t1 0 (none), t2 0 (none)')
})

test('write-skew --form for-update: t2 waits for t1; at READ COMMITTED it counts one on call and stays; above it 40001', async () => {
  const [rc] = (await runScenario(ctx.lab, 'write-skew', { params: { form: 'for-update' } })).trials
  assert.ok(rc.comparison.matched, rc.comparison.deviations.join('; '))
  assert.equal(rc.invariant.observed, '1 on call')
  assert.equal(by(rc, 't2').reason, 'I am the last doctor on call')
  assert.ok(by(rc, 't2').waitedMs > 0)
  for (const isolation of ['repeatable read', 'serializable']) {
    const [t] = (await runScenario(ctx.lab, 'write-skew', { params: { form: 'for-update', isolation } })).trials
    assert.ok(t.comparison.matched, `${isolation}: ${t.comparison.deviations.join('; ')}`)
    assert.deepEqual([by(t, 't2').sqlstate, by(t, 't2').step], ['40001', 'check'])
    assert.ok(by(t, 't2').waitedMs > 0)
  }
})

test('row-deadlock: the victim waits deadlock_timeout before 40P01 (200 ms given, 1 s by default)', async () => {
  const victim = (t: TrialFacts) => t.sessions.find((x) => x.sqlstate === '40P01')!
  const [short] = (await runScenario(ctx.lab, 'row-deadlock', { params: { deadlockTimeout: 200 } })).trials
  assert.ok(short.comparison.matched, short.comparison.deviations.join('; '))
  const waited = victim(short).waitedMs
  assert.ok(waited >= 200 && waited < 1000, `the victim waited ${waited} ms`)
  const [def] = (await runScenario(ctx.lab, 'row-deadlock')).trials
  assert.ok(def.comparison.matched, def.comparison.deviations.join('; '))
  assert.ok(victim(def).waitedMs >= 1000, `the victim waited ${victim(def).waitedMs} ms`)
})
