// race explore chooses its search by the runs it needs, not by the count of orders (issue 41, item 3): declared steps
// with more orders than --max are searched by the reduced search first, and sampled only when that search itself
// passes --max runs with orders left; the report, in text and --json (`chosen`), says which happened and why.
import assert from 'node:assert/strict'
import path from 'node:path'
import { test } from 'node:test'
import { exploreJson, type Explored, useExploreServer } from '../support/explore.js'
import { race, ROOT } from '../support/server.js'

const t = useExploreServer('explore-choice')

type Chosen = Explored & { chosen?: { search: string; max: number; reducedRuns: number; why: string }; reduction?: { steps: number } }
const explore = async (args: string[]) => {
  const r = await exploreJson(t.url, t.admin, args)
  return { ...r, j: r.j as Chosen }
}

test('three sessions, 1,680 orders, no flags: the reduced search, complete within the default --max, nothing sampled, and the report says why', async () => {
  const file = path.join(ROOT, 'examples', 'explore-orders-3.spec')
  const { code, j } = await explore([file])
  assert.equal(j.orders, '1680')
  assert.equal(j.search, 'reduced')
  assert.equal(j.mode, 'all')
  assert.equal(j.complete, true)
  assert.equal(j.sample, undefined)
  assert.ok(j.runs <= 168, `${j.runs} runs`)
  assert.equal(j.chosen?.search, 'reduced')
  assert.equal(j.chosen?.max, 1000)
  assert.equal(j.chosen?.reducedRuns, j.runs)
  // The spec expects held; its check-then-insert violates.
  assert.equal(code, 1)
  assert.equal(j.shortest?.switches, 3)
  const text = await race(['explore', file], { url: t.url, timeoutMs: 300_000 })
  assert.match(text.stdout.replace(/\s+/g, ' '), /1680 orders of the steps are more than --max 1000, but the reduced search needed only \d+ runs to cover them: nothing was sampled/)
})

test('a reduced search that passes --max runs with orders left: a PCT sample follows, what the reduced runs found kept, said in text and --json', async () => {
  const file = path.join(ROOT, 'examples', 'explore-orders-fixed.spec')
  const { code, j, stderr } = await explore([file, '--max', '3', '--seed', '5', '--jobs', '1'])
  assert.equal(j.mode, 'sample')
  assert.equal(j.search, 'sample')
  assert.deepEqual([j.chosen?.search, j.chosen?.max, j.chosen?.reducedRuns], ['sample', 3, 3])
  assert.equal(j.sample?.size, 200)
  assert.equal(j.sample?.counted, 200, 'the stated probability counts the sample\'s runs only')
  assert.equal(j.runs, 203)
  assert.ok(j.reduction && j.reduction.steps > 0, 'the reduced runs\' footprints are counted')
  // The fix holds in every run; a sample is no certificate: unknown under expect held.
  assert.equal(j.violating, 0)
  assert.equal(code, 3)
  assert.match(stderr, /a sample is not a certificate/)
  // A sample asked for by name is one from its first run (--sample keeps its meaning), with no `chosen`.
  const asked = await explore([file, '--sample', '4', '--seed', '5'])
  assert.equal(asked.j.runs, 4)
  assert.equal(asked.j.chosen, undefined)
})
