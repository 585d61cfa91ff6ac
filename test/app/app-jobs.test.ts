// race explore --jobs N for an application race (issue 41, item 5): the reduced search of sessions isolated in workers
// of their own runs on several jobs, each job with its own workers, connections and schema, and takes their runs in
// the one-job search's order (explore/reduce-jobs.ts), so its runs, groups and shortest are --jobs 1's. Twice on one
// job, the reduced search makes the same runs and leaves the same steps unclassified. Sessions in one process
// (sharedState) stay on one job and say why; a query that touches what the whole database shares (an advisory key)
// ends a search on several jobs, which then runs again from the start on one and says why. Against a real server (DATABASE_URL, else embedded PostgreSQL 18).
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { test } from 'node:test'
import { useExploreServer } from '../support/explore.js'
import { ROOT } from '../support/server.js'

const t = useExploreServer('app-jobs')
const WITHDRAW = path.join(ROOT, 'examples', 'app', 'withdraw-ledger.race.mjs')

/** The fields of --json these tests read beside Explored's. */
interface Jobbed {
  jobs: number
  jobsNote?: string
  reduction?: { steps: number; unclassified: number }
  ahead?: { made: number; wasted: number }
}

const facts = (j: object) => {
  const x = j as Jobbed & { runs: number; complete: boolean; groups: { key: string; count: number }[]; shortest: { line: string } | null }
  return { runs: x.runs, complete: x.complete, reduction: x.reduction, groups: x.groups.map((g) => `${g.key} x${g.count}`).sort(), shortest: x.shortest?.line }
}

test("the withdrawal's reduced search, isolated: twice on one job the same runs and unclassified steps; on two jobs the same runs, groups and shortest", async () => {
  const one = await t.explore([WITHDRAW, '--n', '2', '--jobs', '1'])
  const again = await t.explore([WITHDRAW, '--n', '2', '--jobs', '1'])
  const two = await t.explore([WITHDRAW, '--n', '2', '--jobs', '2'])
  assert.equal(one.j.search, 'reduced')
  assert.equal(one.j.complete, true)
  assert.ok(one.j.violating > 0)
  assert.ok((one.j as unknown as Jobbed).reduction!.unclassified > 0, 'the waiting update is unclassified')
  assert.deepEqual(facts(again.j), facts(one.j))
  const j2 = two.j as unknown as Jobbed
  assert.equal(j2.jobs, 2, j2.jobsNote)
  assert.equal(j2.jobsNote, undefined)
  assert.ok(j2.ahead && j2.ahead.made >= two.j.runs, JSON.stringify(j2.ahead))
  assert.deepEqual(facts(two.j), facts(one.j))
  assert.equal(two.code, one.code)
})

/**
 * Two sessions that each take one advisory key (the same for every job: the database's, not the schema's). `hidden`:
 * the function's name is put together as the code runs, so only the query sent shows it.
 */
const advisory = (o: { shared?: boolean; hidden?: boolean } = {}) => `export default {
  driver: 'pg',
  sessions: 2,
  setup: ['create table t (id int primary key, n int not null)', 'insert into t values (1, 0)'],
  session: async (db) => {
    await db.query('begin')
    await db.query('select ' + ${o.hidden ? "['pg', 'advis' + 'ory', 'xact', 'lock'].join('_')" : "'pg_advisory_xact_lock'"} + '(4141)')
    await db.query('update t set n = n + 1 where id = 1')
    await db.query('commit')
  },
  invariant: 'select n = 2 as held from t where id = 1',
  expect: 'held',${o.shared ? '\n  sharedState: true,' : ''}
}
`

test('on several jobs: a module that names an advisory key runs on one job and says why; a query that takes one unnamed ends the search on several and it runs again on one; sessions in one process run on one job', async () => {
  const file = path.join(t.dir, 'advisory.race.mjs')
  fs.writeFileSync(file, advisory())
  const one = await t.explore([file, '--jobs', '1'])
  assert.equal(one.j.complete, true)
  assert.equal(one.code, 0)
  const named = await t.explore([file, '--jobs', '2'])
  const jn = named.j as unknown as Jobbed
  assert.equal(jn.jobs, 1)
  assert.match(jn.jobsNote ?? '', /whole database shares/)
  assert.deepEqual(facts(named.j), facts(one.j))
  const hidden = path.join(t.dir, 'advisory-hidden.race.mjs')
  fs.writeFileSync(hidden, advisory({ hidden: true }))
  const hiddenOne = await t.explore([hidden, '--jobs', '1'])
  assert.equal(hiddenOne.code, 0)
  // Met on several jobs, the query ends that search; it runs again on one job, from the start, and says why.
  const two = await t.explore([hidden, '--jobs', '2'])
  const jt = two.j as unknown as Jobbed
  assert.equal(two.code, 0, two.stderr)
  assert.equal(jt.jobs, 1)
  assert.match(jt.jobsNote ?? '', /a query of s\d touches what the whole database shares.*ran again from the start on one job/)
  assert.deepEqual(facts(two.j), facts(hiddenOne.j))
  assert.equal(two.j.complete, true)
  const shared = path.join(t.dir, 'advisory-shared.race.mjs')
  fs.writeFileSync(shared, advisory({ shared: true }))
  const s = await t.explore([shared, '--jobs', '2'])
  const j = s.j as unknown as Jobbed
  assert.equal(j.jobs, 1)
  assert.match(j.jobsNote ?? '', /share one process/)
  assert.equal(s.j.complete, true)
})
