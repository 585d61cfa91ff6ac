// race explore through the real CLI on a real server: every interleaving of the two-session check-then-insert
// (12 of 20 violate), the replay of the shortest by race run --schedule, the advisory-lock fix holding in every
// interleaving that can happen, a seeded sample shrunk to a minimal violation, and bad input.
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { test } from 'node:test'
import { exploreJson, useExploreServer } from '../support/explore.js'
import { race, ROOT, schemasOf } from '../support/server.js'

const t = useExploreServer('explore')

const ORDERS = path.join(ROOT, 'examples', 'explore-orders.spec')
const FIXED = path.join(ROOT, 'examples', 'explore-orders-fixed.spec')
const TEMPLATE = path.join(ROOT, 'examples', 'orders.spec')


const explore = (args: string[]) => exploreJson(t.url, t.admin, args)

/**
 * Every order of ORDERS (race explore --exhaustive --json): the first test checks it whole, --preemptions compares
 * its bounded searches with it. Run once for the file (the same command on the same server gives the same document).
 */
let ordersAll: ReturnType<typeof explore> | undefined
const exhaustiveOrders = () => (ordersAll ??= explore([ORDERS, '--exhaustive']))

/** race run <file> --schedule <line> --trials k: whether the invariant held in each trial (null: undecided). */
async function replay(file: string, line: string, trials: number, extra: string[] = []): Promise<(boolean | null)[]> {
  const r = await race(['run', file, ...extra, '--schedule', line, '--trials', String(trials), '--expect', 'held', '--json'], { url: t.url, timeoutMs: 120_000 })
  const j = JSON.parse(r.stdout) as { trials: number; trialVerdicts: string[] }
  assert.equal(j.trials, trials)
  return j.trialVerdicts.map((v) => (v === 'anomaly' ? false : v === 'unknown' ? null : true))
}

test('two sessions of begin, insert-where-not-exists, commit at READ COMMITTED: 12 of 20 interleavings violate; the shortest replays', async () => {
  const { code, j } = await exhaustiveOrders()
  assert.equal(code, 1, 'the spec expects held: any violating interleaving fails it')
  assert.equal(j.exitCode, 1)
  assert.equal(j.mode, 'all')
  assert.equal(j.orders, '20')
  assert.equal(j.interleavings, 20)
  assert.equal(new Set(j.every.map((x) => x.line)).size, 20)
  assert.equal(j.violating, 12)
  assert.equal(j.unknown, 0)
  assert.deepEqual(
    j.groups.map((g) => [g.key, g.count]),
    [
      ['VIOLATED anomaly: s1 committed, s2 committed', 12],
      ['HELD clean: s1 committed, s2 committed', 8],
    ],
  )
  // Violated exactly when each insert runs before the other session's commit (worked out by hand).
  for (const it of j.every) {
    const at = (s: string) => it.line.split(' ').indexOf(s)
    const racing = at('s1.ins1') < at('s2.c2') && at('s2.ins2') < at('s1.c1')
    assert.equal(it.held, !racing, it.line)
  }
  // The shortest: two switches (s1 checks and inserts, s2 runs whole, s1 commits, or the mirror image).
  assert.equal(j.shortest?.switches, 2)
  assert.ok(j.every.filter((x) => x.held === false).every((x) => x.switches >= 2))
  assert.match(j.replay!, /^race run \S+explore-orders\.spec --schedule "s\d\.b\d s\d\.ins\d s\d\.b\d s\d\.ins\d s\d\.c\d s\d\.c\d"$/)
  // race run --schedule replays it: violated every time; a holding interleaving holds every time.
  assert.deepEqual(await replay(ORDERS, j.shortest!.line, 4), [false, false, false, false])
  const holding = j.every.find((x) => x.held === true && x.switches > 1)!
  assert.deepEqual(await replay(ORDERS, holding.line, 4), [true, true, true, true])
})

test('the advisory-lock fix holds in every interleaving that can happen: 24 of the 70 orders, exit 0', async () => {
  const { code, j } = await explore([FIXED, '--exhaustive'])
  assert.equal(code, 0)
  assert.equal(j.matched, true)
  assert.equal(j.orders, '70')
  assert.equal(j.interleavings, 24, 'a session waiting for the lock takes no step until it has it')
  assert.equal(j.violating, 0)
  assert.equal(j.shortest, null)
  assert.equal(j.replay, null)
  assert.deepEqual(j.groups.map((g) => [g.key, g.count]).sort(), [
    ['HELD clean: s1 committed, s2 committed', 10],
    ['HELD serialized: s1 committed, s2 committed', 14],
  ])
})

test('--expect violated on the fixed spec: no interleaving violates, exit 1; the text report says why', async () => {
  const r = await race(['explore', FIXED, '--exhaustive', '--expect', 'violated'], { url: t.url, timeoutMs: 300_000 })
  assert.equal(r.code, 1, r.stdout + r.stderr)
  assert.match(r.stdout, /HELD in all 24 interleavings/)
  assert.match(r.stdout, /expected {3}violated {2}DEVIATION/)
  assert.match(r.stdout, /interleavings per second/)
})

test('a seeded sample of three sessions: the same seed draws the same runs, shrunk to a minimal violation that replays', async () => {
  const a = await explore([TEMPLATE, '--n', '3', '--sample', '12', '--seed', '11', '--shrink', '20'])
  const b = await explore([TEMPLATE, '--n', '3', '--sample', '12', '--seed', '11', '--shrink', '0'])
  assert.equal(a.j.mode, 'sample')
  assert.deepEqual([a.j.sample!.size, a.j.sample!.seed, a.j.sample!.depth], [12, 11, 3])
  assert.equal(a.j.runs, a.j.sample!.size)
  assert.equal(a.j.orders, '1680')
  assert.deepEqual(a.j.every.map((x) => x.line), b.j.every.map((x) => x.line), 'the same seed, the same sample')
  assert.equal(a.code, 0, 'orders.spec expects violated, and a violation was found')
  assert.ok(a.j.violating > 0)
  // With three sessions a violation needs one session split around another's insert: 3 switches at least.
  assert.ok(a.j.shortest!.switches >= 3)
  assert.ok(a.j.shortest!.switches <= Math.min(...a.j.every.filter((x) => x.held === false).map((x) => x.switches)))
  assert.match(a.j.replay!, /--n 3 --schedule/)
  assert.deepEqual(await replay(TEMPLATE, a.j.shortest!.line, 3, ['--n', '3']), [false, false, false])
})

test('a sample is PCT\'s: the report states what it covered (depth, probability), in text and --json, and never says every', async () => {
  const r = await race(['explore', FIXED, '--sample', '20', '--seed', '3', '--depth', '2'], { url: t.url, timeoutMs: 300_000 })
  // The spec expects held; a sample without --accept-sample is not known to hold (the next test).
  assert.equal(r.code, 3, r.stdout + r.stderr)
  const text = r.stdout.replace(/\s+/g, ' ')
  assert.match(text, /a PCT sample: 20 runs, seed 3/)
  assert.match(text, /no violation found; a violation needing 2 steps in a given order \(at most 1 preemption\) would have been found by these 20 runs with probability >= 0\.\d+ \(PCT: 2 sessions, 8 steps a run\)/)
  assert.doesNotMatch(r.stdout, /\bevery\b/i)
  const { j } = await explore([FIXED, '--sample', '20', '--seed', '3', '--depth', '2'])
  // 2 sessions, 8 steps, depth 2: one run finds such a violation with probability at least 1/16.
  assert.ok(Math.abs(j.sample!.probability - (1 - (1 - 1 / 16) ** j.sample!.counted)) < 1e-12)
  assert.equal(j.sample!.counted, 20)
})

test('a sample is not a certificate: held in every draw exits 3 under expect held, unless --accept-sample P and the stated probability reaches P', async () => {
  const args = [FIXED, '--sample', '20', '--seed', '3', '--depth', '2']
  const plain = await explore(args)
  assert.equal(plain.j.violating, 0)
  assert.equal(plain.code, 3, plain.stderr)
  assert.equal(plain.j.exitCode, 3)
  assert.equal(plain.j.matched, false)
  // One line (a progress line, on a slow machine, begins race explore:).
  const said = plain.stderr.split('\n').filter((l) => l.startsWith('race: '))
  assert.equal(said.length, 1, plain.stderr)
  assert.match(said[0], /^race: held in the \d+ sampled interleavings \(20 runs, seed 3\), which state probability >= 0\.\d{4} of finding a violation needing 2 steps in a given order; the other orders were not run: a sample is not a certificate\. --accept-sample P passes/)
  const p = plain.j.sample!.probability
  // Asked for less than the sample states: a pass, and --json records what was asked.
  const below = await explore([...args, '--accept-sample', (p - 0.01).toFixed(4)])
  assert.equal(below.code, 0, below.stderr)
  assert.equal(below.j.matched, true)
  assert.equal((below.j.sample as { accept?: number }).accept, Number((p - 0.01).toFixed(4)))
  // Asked for more: not reached, exit 3, and the line says what was short.
  const above = await explore([...args, '--accept-sample', (p + 0.01).toFixed(4)])
  assert.equal(above.code, 3, above.stderr)
  assert.match(above.stderr, new RegExp(`short of --accept-sample ${(p + 0.01).toFixed(4)}: raise --sample`))
  // A violation a sample found is a fact: exit 1 under expect held, whatever --accept-sample says.
  const found = await explore([ORDERS, '--sample', '20', '--seed', '3', '--accept-sample', '0.5'])
  assert.ok(found.j.violating > 0)
  assert.equal(found.code, 1, found.stderr)
  // Where nothing is sampled, --accept-sample is refused; so is a probability that is none.
  for (const [extra, re] of [
    [['--accept-sample', '0.9', '--exhaustive'], /--accept-sample accepts a PCT sample's stated probability; --exhaustive draws no sample/],
    [['--accept-sample', '1'], /--accept-sample takes a probability above 0 and below 1/],
    [['--accept-sample', 'high'], /--accept-sample takes a probability above 0 and below 1/],
    [['--accept-sample', '0.9', '--isolation', 'all'], /--accept-sample passes a held sample of one level/],
  ] as const) {
    const r = await race(['explore', FIXED, ...extra], { url: t.url })
    assert.equal(r.code, 2, r.stderr)
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr)
    assert.match(r.stderr, re)
  }
})

test('--preemptions K: every order with at most K preemptions, fewest first; the report states the bound and the most reached', async () => {
  const k0 = await explore([ORDERS, '--preemptions', '0'])
  const k1 = await explore([ORDERS, '--preemptions', '1'])
  const all = await exhaustiveOrders()
  // With none, each session runs whole: s1 then s2, or s2 then s1 (both hold).
  assert.deepEqual(k0.j.every.map((x) => x.line).sort(), all.j.every.filter((x) => x.switches === 1).map((x) => x.line).sort())
  assert.equal(k0.j.violating, 0)
  assert.deepEqual((k1.j as unknown as { preemptions: unknown }).preemptions, { bound: 1, reached: 1, complete: true })
  assert.ok(k1.j.violating > 0)
  assert.equal(k1.j.shortest!.switches, all.j.shortest!.switches)
  assert.ok(k1.j.every.every((x) => all.j.every.some((y) => y.line === x.line)))
})

test('--shard i/n splits a sample: the parts, merged, are the whole sample run at once', async () => {
  const { mergeShards } = await import('../../src/explore/merge.js')
  type Result = Parameters<typeof mergeShards>[0][number]
  const args = [TEMPLATE, '--n', '3', '--sample', '10', '--seed', '4', '--shrink', '0']
  const whole = await explore(args)
  const parts = [await explore([...args, '--shard', '1/2']), await explore([...args, '--shard', '2/2'])]
  assert.deepEqual(
    parts.map((x) => x.j.runs),
    [5, 5],
  )
  const merged = mergeShards(parts.map((x) => x.j as unknown as Result))
  const lines = (every: { line: string; runs?: number }[]) => every.map((x) => `${x.line} ${x.runs}`).sort()
  assert.deepEqual(lines(merged.every), lines(whole.j.every as unknown as { line: string; runs: number }[]))
  assert.equal(merged.runs, whole.j.runs)
  assert.equal(merged.violating, whole.j.violating)
  assert.deepEqual(merged.sample, whole.j.sample)
  assert.throws(() => mergeShards([parts[0].j as unknown as Result]), /shards 1 given; a sample in 2 needs each of 1, 2 once/)
})

test('bad numbers and options are refused with one line naming the fix, exit 2', async () => {
  for (const [args, re] of [
    [['--max', '0'], /--max must be at least 1/],
    [['--sample', 'many'], /--sample must be a whole number/],
    [['--expect', 'maybe'], /--expect takes held or violated/],
    [['--n', '3'], /has exactly 2 sessions/],
    [['--exhaustive', '--sample', '5'], /--exhaustive runs every order and --sample a random few: give one of them/],
    [['--sample', '5', '--seed', '1', '--shard', '3/2'], /--shard takes i\/n with 1 <= i <= n/],
    [['--sample', '5', '--shard', '1/2'], /--shard needs --seed/],
    [['--preemptions', '-1'], /--preemptions/],
    [['--depth', '0'], /--depth must be at least 1/],
  ] as const) {
    const r = await race(['explore', ORDERS, ...args], { url: t.url })
    assert.equal(r.code, 2, r.stderr)
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr)
    assert.match(r.stderr, re)
    assert.doesNotMatch(r.stderr, /\n\s+at /)
  }
})

test('a deadlock: the victim takes no more steps (they end its line), and race run --schedule replays that line to the same 40P01', async () => {
  const { code, j } = await explore(['deadlock'])
  assert.equal(code, 0, 'the deadlock scenario documents no anomaly: held is expected, and money is never made or lost')
  assert.equal(j.violating, 0)
  const victim = j.groups.find((g) => g.key === 'HELD prevented: s1 committed, s2 40P01')
  assert.ok(victim && victim.count > 0, j.groups.map((g) => g.key).join('; '))
  const line = victim.lines[0]
  assert.match(line, /s2\.move s2\.commit$/, 'the steps s2 never ran come last')
  const r = await race(['run', 'deadlock', '--schedule', line, '--trials', '2', '--json'], { url: t.url, timeoutMs: 120_000 })
  const run = JSON.parse(r.stdout) as { trialVerdicts: string[]; sessions: { name: string; outcome: string; sqlstate: string | null }[] }
  assert.deepEqual(run.trialVerdicts, ['prevented', 'prevented'])
  assert.deepEqual(
    run.sessions.map((s) => [s.name, s.outcome, s.sqlstate]),
    [
      ['s1', 'committed', null],
      ['s2', 'failed', '40P01'],
    ],
  )
})

test('an interleaving that cannot end (a session-level lock its holder never releases): exit 3 with one line, nothing left behind', async () => {
  // A sample (--sample 200, the default before the reduced search came first for declared steps): the reduced search
  // runs about a thousand orders before the one that cannot end; a sample meets it within its first runs.
  const r = await race(['explore', 'session-lock', '--sample', '200'], { url: t.url, timeoutMs: 120_000 })
  assert.equal(r.code, 3, r.stdout + r.stderr)
  // One line besides the progress a log gets every 10 s of a long search.
  assert.equal(r.stderr.trim().split('\n').filter((l) => !l.startsWith('race explore: exploring:')).length, 1, r.stderr)
  assert.match(r.stderr, /^race: an interleaving cannot finish: \S+ waits for \S+, which ran all its steps and still holds the lock/)
  assert.deepEqual(await schemasOf(t.admin, r.pid), [])
})

test('explore() from code: the same counts and the line to replay, with progress reported as it goes', async () => {
  const { explore: exploreApi } = await import('../../src/index.js')
  const seen: number[] = []
  const r = await exploreApi(ORDERS, { databaseUrl: t.url, exhaustive: true, onProgress: (p) => seen.push(p.runs) })
  assert.equal(r.interleavings, 20)
  assert.equal(r.violating, 12)
  assert.equal(r.exitCode, 1)
  assert.equal(r.shortest?.switches, 2)
  assert.deepEqual(seen, Array.from({ length: 20 }, (_, i) => i + 1))
  assert.ok(r.perSecond > 0)
})

test('explore:merge joins only parts of one search: two specs of one name but different text, or another racelab or server version, are refused in one line, exit 2', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'race-merge-'))
  try {
    // Two files named orders.spec, the same steps and sessions: the same race id, the same 20 orders, but two races
    // (the second one's transactions are SERIALIZABLE).
    const text = fs.readFileSync(ORDERS, 'utf8')
    for (const [sub, t] of [['a', text], ['b', text.replaceAll('isolation level read committed', 'isolation level serializable')]]) {
      assert.ok(sub === 'a' || t !== text)
      fs.mkdirSync(path.join(dir, sub))
      fs.writeFileSync(path.join(dir, sub, 'orders.spec'), t)
    }
    const part = async (sub: string, i: number) => {
      const { j } = await explore([path.join(dir, sub, 'orders.spec'), '--exhaustive', '--shard', `${i}/2`])
      const file = path.join(dir, `${sub}${i}.json`)
      fs.writeFileSync(file, JSON.stringify(j))
      return { file, j: j as unknown as Record<string, unknown> }
    }
    const a1 = await part('a', 1)
    const a2 = await part('a', 2)
    const b2 = await part('b', 2)
    assert.deepEqual([a1.j.scenario, a1.j.orders], [b2.j.scenario, b2.j.orders], 'one name, one shape')
    const merge = (files: string[]) => new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      execFile(process.execPath, [path.join(ROOT, 'dist', 'scripts', 'explore-merge.js'), ...files], (e, stdout, stderr) => resolve({ code: e ? (e as { code?: number }).code ?? null : 0, stdout, stderr }))
    })
    const one = await merge([a1.file, a2.file])
    assert.equal(one.code, 1, one.stderr)
    assert.equal(JSON.parse(one.stdout).interleavings, 20)
    const refused = async (files: string[], re: RegExp) => {
      const r = await merge(files)
      assert.equal(r.code, 2, r.stdout + r.stderr)
      assert.equal(r.stdout, '')
      assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr)
      assert.match(r.stderr, re)
    }
    await refused([a1.file, b2.file], /^explore-merge: merge: .*b2\.json is not a part of the same search as .*a1\.json: the race's text \(SHA-256 of its file\) [0-9a-f]{12} against [0-9a-f]{12} \(both /)
    const edited = (key: string, value: unknown) => {
      const file = path.join(dir, `a2-${key}.json`)
      fs.writeFileSync(file, JSON.stringify({ ...a2.j, [key]: value }))
      return file
    }
    await refused([a1.file, edited('racelab', '0.0.1')], /a2-racelab\.json is not a part of the same search as .*: the racelab version 0\.0\.1 against /)
    await refused([a1.file, edited('server', { ...(a2.j.server as object), version: '9.6.24' })], /a2-server\.json is not a part of the same search as .*: the server version PostgreSQL 9\.6\.24 against PostgreSQL /)
    await refused([a1.file, edited('digest', undefined)], /a2-digest\.json does not say the race's text/)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})
