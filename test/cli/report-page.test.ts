// race run --html and race explore --html, rendered in headless Chromium and read back from its DOM: a 3-session
// counterexample has every session as a lane and every statement in its own session's lane, the page fits a
// 1280 px window, SQL and values are text (never markup), an undecided search says unknown, and a race that could
// not run leaves a page saying so rather than an earlier run's.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, test } from 'node:test'
import { explorePage, runPage, type ExploreDoc } from '../../src/report/html.js'
import type { RunDocument } from '../../src/report/json.js'
import { ROOT, race, useServer, type TestServer } from '../support/server.js'
import { NEEDS, measureInChromium } from '../support/tools.js'

let server: TestServer
before(async () => {
  server = await useServer()
})
after(async () => {
  await server?.stop()
})

const SPEC = path.join(ROOT, 'examples', 'explore-orders-3.spec')

/** The spec's sessions and each one's statements, read from the file (what the page must show). */
function specStatements(file: string): Map<string, string[]> {
  const out = new Map<string, string[]>()
  let session = ''
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    const s = /^session (\S+)/.exec(line)
    if (s) out.set((session = s[1]), [])
    const st = /^step \S+ \{ (.*) \}$/.exec(line)
    if (st && session) out.get(session)!.push(st[1])
  }
  return out
}

interface Lanes {
  heads: string[]
  lanes: string[]
}
interface Measured {
  tables: Record<string, Lanes>
  verdict: string
  again: string
  groups: { count: string; state: string }[]
  scripts: number
  images: number
  text: string
  scrollWidth: number
  innerWidth: number
}

/** Runs in the page: each lanes table as its column heads and, per session, the text of its column. */
const MEASURE = `
  const tables = {}
  for (const t of document.querySelectorAll('table.lanes')) {
    const rows = [...t.rows]
    const heads = [...rows[0].cells].slice(1).map((c) => c.firstChild.textContent.trim())
    const lanes = heads.map((_, j) => rows.slice(1).map((r) => (r.cells[j + 1] ? r.cells[j + 1].textContent : '')).join('\\n'))
    tables[t.id] = { heads, lanes }
  }
  const groups = [...document.querySelectorAll('#groups tr')].slice(1).map((r) => ({ count: r.cells[0].textContent, state: r.cells[1].textContent }))
  return {
    tables,
    verdict: (document.getElementById('verdict') || {}).textContent || '',
    again: ((document.getElementById('again') || document.getElementById('replay')) || {}).textContent || '',
    groups,
    scripts: document.querySelectorAll('script').length,
    images: document.querySelectorAll('img').length,
    text: document.body.textContent,
    scrollWidth: document.documentElement.scrollWidth,
    innerWidth: window.innerWidth,
  }
`

const squash = (s: string) => s.replace(/\s+/g, ' ').trim()

/** Every session of the spec is a lane, in order, and every statement is in its own session's lane (and no other's). */
function assertLanes(t: Lanes | undefined, spec: Map<string, string[]>): void {
  assert.ok(t, 'a lanes table')
  assert.deepEqual(t.heads, [...spec.keys()], 'one lane per session')
  for (const [i, [session, sqls]] of [...spec].entries()) {
    for (const sql of sqls) {
      assert.ok(squash(t.lanes[i]).includes(squash(sql)), `${session}'s lane lacks ${sql}`)
    }
  }
}

function tmp(name: string): string {
  return path.join(os.tmpdir(), `race-page-${process.pid}-${name}`)
}

test('race run --html: a 3-session counterexample, every session a lane, every statement in its lane with its answer, fits 1280 px', { skip: NEEDS.chromium, timeout: 180_000 }, async () => {
  const file = tmp('run.html')
  const line = 's1.b1 s1.ins1 s2.b2 s2.ins2 s2.c2 s1.c1 s3.b3 s3.ins3 s3.c3'
  try {
    const r = await race(['run', SPEC, '--schedule', line, '--html', file, '--json'], { url: server.url, timeoutMs: 120_000 })
    assert.equal(r.code, 1, r.stderr)
    const doc = JSON.parse(r.stdout)
    const page = fs.readFileSync(file, 'utf8')
    assert.doesNotMatch(page, /<script|<link|<img|src=|href=|@import|url\(/i, 'no scripts, no network resources')
    const m = measureInChromium(file, MEASURE, { width: 1280, height: 900 }) as Measured
    const spec = specStatements(SPEC)
    assert.equal(spec.size, 3)
    assertLanes(m.tables.lanes, spec)
    // Each statement's answer, in its session's lane: the two inserts that both found no open order.
    for (const [i, s] of doc.sessions.entries()) assert.match(m.tables.lanes.lanes[i], new RegExp(s.outcome), s.name)
    assert.match(m.tables.lanes.lanes[0], /ins1 .*→ INSERT 1/s)
    assert.match(m.tables.lanes.lanes[1], /ins2 .*→ INSERT 1/s)
    assert.match(m.verdict, /^FAIL \(exit 1\): anomaly/)
    assert.match(m.text, /observed false VIOLATED/)
    assert.equal(m.again, `race run ${SPEC} --schedule "${line}"`)
    assert.ok(m.scrollWidth <= 1280, `the page is ${m.scrollWidth}px wide in a 1280px window`)
  } finally {
    fs.rmSync(file, { force: true })
  }
})

test('race explore --html: the outcome groups with the counts --json gives, the shortest violating interleaving as 3 lanes, its replay', { skip: NEEDS.chromium, timeout: 300_000 }, async () => {
  const file = tmp('explore.html')
  try {
    const r = await race(['explore', SPEC, '--max', '2000', '--html', file, '--json'], { url: server.url, timeoutMs: 240_000 })
    assert.equal(r.code, 1, r.stderr)
    const doc = JSON.parse(r.stdout)
    const m = measureInChromium(file, MEASURE, { width: 1280, height: 900 }) as Measured
    assert.deepEqual(
      m.groups,
      doc.groups.map((g: { count: number; held: boolean }) => ({ count: String(g.count), state: g.held ? 'HELD' : 'VIOLATED' })),
    )
    assert.ok(doc.groups.some((g: { held: boolean }) => !g.held) && doc.groups.some((g: { held: boolean }) => g.held), 'both kinds of group')
    assertLanes(m.tables.shortest, specStatements(SPEC))
    // The lanes follow the shortest line: each point in its session's column, in the line's order.
    const points = (doc.shortest.line as string).split(' ')
    for (const [i, session] of ['s1', 's2', 's3'].entries()) {
      const mine = points.filter((p) => p.startsWith(`${session}.`)).map((p) => p.slice(session.length + 1))
      const seen = [...m.tables.shortest.lanes[i].matchAll(/\b([bc]\d|ins\d)\b/g)].map((x) => x[1]).filter((x, k, a) => a.indexOf(x) === k)
      assert.deepEqual(seen, mine, `${session}'s lane`)
    }
    assert.equal(m.again, doc.replay)
    assert.match(m.verdict, new RegExp(`^FAIL \\(exit 1\\): VIOLATED in ${doc.violating} of ${doc.interleavings} interleavings`))
    assert.ok(m.scrollWidth <= 1280, `the page is ${m.scrollWidth}px wide in a 1280px window`)
  } finally {
    fs.rmSync(file, { force: true })
  }
})

test('an undecided search (exit 3) still writes its page, and it says unknown; a race that could not run replaces the page with one that says so', { skip: NEEDS.chromium, timeout: 180_000 }, async () => {
  const file = tmp('unknown.html')
  try {
    // A sample of 3 runs in which nothing violated: not known to hold.
    const r = await race(['explore', path.join(ROOT, 'examples', 'explore-orders-fixed.spec'), '--sample', '3', '--seed', '7', '--html', file], { url: server.url, timeoutMs: 120_000 })
    assert.equal(r.code, 3, r.stderr)
    const m = measureInChromium(file, MEASURE, { width: 1280, height: 900 }) as Measured
    assert.match(m.verdict, /^UNKNOWN \(exit 3\): not known: no violation in the \d+ interleavings run, but the search did not decide \(a sample/)
    assert.doesNotMatch(m.verdict, /PASS|HELD in all/)
    // Bad input (exit 2): the page left is this one's, not the search's above.
    const bad = await race(['run', 'no-such-scenario', '--html', file], { url: server.url })
    assert.equal(bad.code, 2)
    assert.equal(bad.stderr.trim().split('\n').length, 1, bad.stderr)
    const m2 = measureInChromium(file, MEASURE, { width: 1280, height: 900 }) as Measured
    assert.match(m2.verdict, /^FAIL \(exit 2\): could not run: .*no-such-scenario/)
    // A page that cannot be written is refused before anything runs; so is one page for several searches or servers.
    const dir = await race(['run', 'broken', '--html', os.tmpdir()], { url: server.url })
    assert.equal(dir.code, 2)
    assert.match(dir.stderr, /^race: --html .* is a directory/)
    const levels = await race(['explore', 'broken', '--isolation', 'all', '--html', file], { url: server.url })
    assert.equal(levels.code, 2)
    assert.equal(levels.stderr, 'race: --html takes one search: with --isolation all (or a list of levels) run one level per call, e.g. --isolation rc\n')
    const versions = await race(['run', 'broken', '--pg', '17,18', '--html', file])
    assert.equal(versions.code, 2)
    assert.equal(versions.stderr, 'race: --html with several --pg versions (17, 18): run one version per call, e.g. --pg 17\n')
  } finally {
    fs.rmSync(file, { force: true })
  }
})

/** A run document whose every text is hostile markup. */
function hostile(): { doc: RunDocument; sql: string; value: string } {
  const sql = `select '</code><script>alert(1)</script>' as "<img src=x onerror=alert(2)>"`
  const value = `<img src=x onerror=alert(3)>&amp;`
  const session = (name: string, pid: number) => ({ name, pid, outcome: 'failed' as const, reason: value, sqlstate: '40001', condition: 'serialization_failure', step: 'q1', isolation: 'serializable', commitTag: null, waitedMs: 1, ms: 2, retries: 0, errors: ['40001'] })
  const doc = {
    scenario: '<b>x</b>',
    title: value,
    source: 'file <x>.spec',
    server: { version: '18.4' },
    target: 'embedded',
    params: {},
    n: 2,
    schedule: 'lockstep',
    windowMs: 0,
    holdMs: 0,
    isolation: {},
    sessions: [session('s1', 1), { ...session('s2', 2), blockedBy: [1], outcome: 'timeout' as const }],
    invariant: { description: value, observed: value, held: null },
    verdict: 'unknown',
    why: value,
    documented: [],
    expected: ['held'],
    matched: false,
    deviations: [value],
    trials: 1,
    violations: 0,
    deviating: 0,
    verdicts: { unknown: 1 },
    timeline: [
      { t: 0, session: 's1', step: 'q1', kind: 'run' },
      { t: 1, session: 's2', step: 'q1', kind: 'run' },
      { t: 2, session: 's2', step: 'q1', kind: 'wait' },
      { t: 3, session: 's1', step: 'q1', kind: 'error', detail: `40001 serialization_failure (injected by race)` },
      { t: 4, session: 's2', step: 'q1', kind: 'timeout', detail: value },
    ],
    schema: 's',
    kept: false,
    exitCode: 3,
  } as unknown as RunDocument
  return { doc, sql, value }
}

test('SQL and values are text on the page: no markup of theirs runs or renders, all of it is shown as written', { skip: NEEDS.chromium }, () => {
  const { doc, sql, value } = hostile()
  const file = tmp('hostile.html')
  try {
    fs.writeFileSync(file, runPage({ doc, statements: { s1: [{ step: 'q1', sql }], s2: [{ step: 'q1', sql }] }, again: `race run '<x>'`, replays: false }))
    const m = measureInChromium(file, MEASURE, { width: 1280, height: 900 }) as Measured
    assert.equal(m.scripts, 1, "only the measuring probe's script")
    assert.equal(m.images, 0)
    assert.ok(m.text.includes(sql), 'the SQL as written')
    assert.ok(m.text.includes(value), 'the value as written')
    assert.match(m.verdict, /^UNKNOWN \(exit 3\)/)
    // On whom it waited (the run recorded it: blockedBy), and the fault race injected.
    assert.match(m.tables.lanes.lanes[1], /timed out waiting for s1/)
    assert.match(m.tables.lanes.lanes[0], /40001 serialization_failure \(injected by race\) injected fault/)
    const ex = { ...exploreDoc(), invariant: value, groups: [{ key: value, held: false, verdict: 'anomaly', outcomes: { s1: value }, count: 1, lines: [`s1.q1!${value}`] }] } as ExploreDoc
    fs.writeFileSync(file, explorePage(ex, { s1: [{ step: 'q1', sql }] }))
    const e = measureInChromium(file, MEASURE, { width: 1280, height: 900 }) as Measured
    assert.equal(e.scripts, 1)
    assert.equal(e.images, 0)
    assert.ok(e.text.includes(value) && e.text.includes(sql))
  } finally {
    fs.rmSync(file, { force: true })
  }
})

function exploreDoc(): ExploreDoc {
  const it = { line: 's1.q1 s2.q1', verdict: 'anomaly', held: false, observed: 'x', outcomes: { s1: 'committed', s2: 'committed' }, waited: [], raised: [], switches: 1, why: 'w' }
  return { scenario: 'x', n: 2, server: { version: '18.4' }, target: 'embedded', invariant: 'i', mode: 'all', search: 'exhaustive', orders: '2', steps: 'declared', complete: true, runs: 2, interleavings: 2, violating: 1, unknown: 0, failed: 0, groups: [], shortest: it, replay: 'race run x --schedule "s1.q1 s2.q1"', shortestFailure: null, failureReplay: null, diverged: 0, expected: 'held', matched: false, exitCode: 1, ms: 1 }
}
