// The explore service called directly (CONTRIBUTING.md, "Layout": explore/), not through the CLI: a request checked by
// checkExplore and run by executeExplore on the file's embedded server. The reduced search is compared with the
// exhaustive one (every order of the steps), and the shortest violating interleaving is run again through the run
// service, whose sessions must end as the search said.
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { executeExplore } from '../../src/explore/execute.js'
import { checkExplore, type ExploreAsked } from '../../src/explore/request.js'
import type { ExploreResult } from '../../src/explore/result.js'
import type { Level } from '../../src/levels.js'
import { RunContext } from '../../src/lifecycle.js'
import { findScenario } from '../../src/registry.js'
import { executeRun } from '../../src/run/execute.js'
import { NAMES, paramsOf } from '../../src/run/params.js'
import { validateRun } from '../../src/run/request.js'
import { useServer, type TestServer } from '../support/server.js'

let server: TestServer
before(async () => {
  server = await useServer()
})
after(async () => {
  await server?.stop()
})

const BOUNDS = { connectTimeoutMs: 10_000, stepTimeoutMs: 30_000, runTimeoutMs: 300_000 }

/** One context of its own per call, cleaned up after it, as explore() makes one. */
async function inContext<T>(fn: (ctx: RunContext) => Promise<T>): Promise<T> {
  const ctx = new RunContext()
  try {
    return await fn(ctx)
  } finally {
    assert.deepEqual(await ctx.cleanupAll(), [], 'the search cleaned up without an error')
  }
}

async function search(id: string, asked: ExploreAsked): Promise<ExploreResult> {
  const scenario = await findScenario(id)
  const params = paramsOf(scenario, {}, 'postgres')
  const checked = checkExplore(scenario, { jobs: 1, shrink: 0, ...asked }, NAMES)
  return inContext((ctx) => executeExplore(ctx, { scenario, engine: 'postgres', params, checked, bounds: BOUNDS, databaseUrl: server.url }, (r) => r))
}

/** The groups of a search by key, each key with how its sessions ended. */
const keys = (r: ExploreResult) => r.groups.map((g) => g.key).sort()

test('broken: the exhaustive search runs every order of the steps; the reduced one fewer, with the same outcome groups', async () => {
  const all = await search('broken', { exhaustive: true })
  const reduced = await search('broken', {})
  assert.equal(all.search, 'exhaustive')
  assert.equal(reduced.search, 'reduced')
  // Every order of two sessions of four steps each, keeping each session's own order: 8! / (4! 4!) = 70.
  assert.equal(all.orders, '70')
  assert.equal(all.interleavings, 70)
  assert.equal(all.complete, true)
  assert.ok(reduced.runs < all.runs, `reduced ${reduced.runs} runs, exhaustive ${all.runs}`)
  assert.equal(reduced.complete, true)
  // The same ways of ending, found by both: the reduced search drops only orders that cannot end differently.
  assert.deepEqual(keys(reduced), keys(all))
  // The exhaustive groups add up to every interleaving; each group's count is the number of its lines.
  assert.equal(all.groups.reduce((k, g) => k + g.count, 0), all.interleavings)
  assert.ok(all.violating > 0 && all.violating < all.interleavings, `violating ${all.violating} of ${all.interleavings}`)
  assert.equal(all.every.filter((x) => x.held === false).length, all.violating)
  // The shortest violating interleaving has the fewest switches of all those that violate.
  assert.equal(all.shortest!.switches, Math.min(...all.every.filter((x) => x.held === false).map((x) => x.switches)))
  assert.equal(reduced.shortest!.switches, all.shortest!.switches)
})

test('the shortest violating interleaving, run again by the run service, ends the same way', async () => {
  const found = await search('broken', {})
  const shortest = found.shortest!
  assert.ok(shortest, 'broken violates somewhere')
  const scenario = await findScenario('broken')
  const { view } = await inContext((ctx) =>
    executeRun(
      ctx,
      validateRun({ scenario, engine: 'postgres', params: paramsOf(scenario, {}, 'postgres'), databaseUrl: server.url, schedule: shortest.line, connectTimeout: '10s', stepTimeout: '30s', runTimeout: '2m' }, NAMES),
    ),
  )
  const [t] = view.trials
  assert.equal(t.verdict, 'anomaly', t.why)
  assert.deepEqual(Object.fromEntries(t.sessions.map((s) => [s.name, s.outcome])), Object.fromEntries(Object.entries(shortest.outcomes).map(([k, v]) => [k, v.split(':')[0]])))
})

test('serializable: no interleaving violates; where both ran side by side, SSI cancelled one with 40001', async () => {
  const r = await search('serializable', { exhaustive: true })
  assert.equal(r.violating, 0)
  assert.equal(r.complete, true)
  const cancelled = r.every.filter((x) => x.raised.includes('40001'))
  assert.ok(cancelled.length > 0, 'some interleaving raised 40001')
  for (const x of cancelled) assert.ok(Object.values(x.outcomes).some((o) => /40001/.test(o)), `${x.line}: ${JSON.stringify(x.outcomes)}`)
  // An interleaving that runs one session whole before the other raises nothing.
  const serial = r.every.filter((x) => x.switches === 1)
  assert.ok(serial.length >= 2)
  for (const x of serial) assert.deepEqual(x.raised, [], x.line)
})

test('--isolation as a list: one search per level, the weakest safe level read from what each found', async () => {
  const scenario = await findScenario('broken')
  const params = paramsOf(scenario, {}, 'postgres')
  delete (params as Record<string, unknown>).isolation
  const checked = checkExplore(scenario, { jobs: 1, shrink: 0 }, NAMES)
  const levels: Level[] = ['read committed', 'serializable']
  const r = await inContext((ctx) => executeExplore(ctx, { scenario, engine: 'postgres', params, checked, bounds: BOUNDS, databaseUrl: server.url, levels }, (x) => x))
  assert.deepEqual(r.levels.map((l) => l.isolation), levels)
  const [rc, ser] = r.levels
  assert.ok(rc.violating > 0, 'read committed: the check-then-insert race violates')
  assert.equal(ser.violating, 0)
  assert.ok((ser.prevented['40001'] ?? 0) > 0, 'serializable prevents it with 40001')
  assert.equal(r.weakestSafe, 'serializable')
})

test('a race whose name is longer than a schema name may be: two jobs get two schemas and find what one job finds', async () => {
  // The schema of each job is race_<the race's name>_<8 hex>. Cut by the server at 63 bytes, the hex was lost: the
  // second job's schema had the first one's name ("already exists"), and the footprints of the two jobs' steps
  // could not be named alike (runs on different jobs never conflicted).
  const fs = await import('node:fs')
  const os = await import('node:os')
  const path = await import('node:path')
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'race-long-name-'))
  try {
    const file = path.join(dir, 'explore-orders-3-with-a-name-longer-than-any-schema-name-may-be.spec')
    fs.copyFileSync(new URL('../../../examples/explore-orders-3.spec', import.meta.url), file)
    const one = await search(file, {})
    const two = await search(file, { jobs: 2 })
    assert.equal(one.search, 'reduced')
    assert.equal(two.search, 'reduced')
    assert.equal(one.complete, true)
    assert.equal(two.complete, true)
    assert.deepEqual(keys(two), keys(one))
    assert.equal(two.runs, one.runs)
    assert.equal(two.shortest?.switches, one.shortest?.switches)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})
