// What CI reads: JUnit XML (checked against a schema with xmllint), GitHub annotations (escaped as the runner
// expects), the bench chart's ticks.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { test } from 'node:test'
import { annotation, annotationsOf, ciCase, junitXml, xml } from '../../src/report/ci.js'
import { html, niceTicks, text as benchText, type BenchReport, type CellResult } from '../../src/bench/report.js'
import { plain } from '../../src/report/color.js'
import { NEEDS, junitProblems } from '../support/tools.js'

const judged = (verdict: string, held: boolean | null) => ({ verdict, why: 'because', invariant: { description: 'at least one doctor on call', observed: '0 on call', held } })

test('a case: deviation is a <failure> with the lines, undecided an <error>, a match neither', () => {
  const dev = ciCase('race.check.write-skew', 'serializable', 42, judged('anomaly', false), { matched: false, deviations: ['t2: documented 40001, got committed'], expected: ['prevented: t1 committed, t2 40001'] }, 1)
  assert.equal(dev.failure?.message, 't2: documented 40001, got committed')
  assert.deepEqual(dev.failure?.lines, ['expected: prevented: t1 committed, t2 40001', 'got: anomaly (because)', 't2: documented 40001, got committed'])
  const unknown = ciCase('race.check.x', 'default', 1, judged('unknown', null), { matched: false, deviations: [], expected: ['clean'] }, 3)
  assert.match(unknown.error!.message, /^could not decide: because/)
  const ok = ciCase('race.check.x', 'default', 1, judged('clean', true), { matched: true, deviations: [], expected: ['clean'] }, 0)
  assert.equal(ok.failure ?? ok.error, undefined)
})

test('JUnit XML: counts, seconds, escaping (no colour codes, no control characters), valid against the schema', { skip: NEEDS.xmllint }, () => {
  const cases = [
    ciCase('race.check.a', 'default', 1234, judged('clean', true), { matched: true, deviations: [], expected: ['clean'] }, 0),
    ciCase('race.check.b', 'n=5 <max> & "more"', 10, judged('anomaly', false), { matched: false, deviations: ['\u001b[31ms1: documented committed, got 23505\u001b[39m\u0007'], expected: ['clean'] }, 1),
    ciCase('race.check.c', 'default', 0, judged('unknown', null), { matched: false, deviations: [], expected: ['clean'] }, 3),
  ]
  const text = junitXml('race check', cases, { timestamp: new Date('2026-01-02T03:04:05Z'), properties: { server: 'PostgreSQL 18.4' } })
  assert.match(text, /<testsuites name="race check" tests="3" failures="1" errors="1" time="1.244">/)
  assert.match(text, /timestamp="2026-01-02T03:04:05"/)
  assert.match(text, /name="n=5 &lt;max&gt; &amp; &quot;more&quot;"/)
  assert.doesNotMatch(text, /\u001b|\u0007/)
  const file = path.join(os.tmpdir(), `race-junit-${process.pid}.xml`)
  try {
    fs.writeFileSync(file, text)
    assert.equal(junitProblems(file), '')
  } finally {
    fs.rmSync(file, { force: true })
  }
  assert.equal(xml("a'b"), 'a&apos;b')
})

test('JUnit XML: a case left out on this server is <skipped> with its reason and counted; the suite\'s time is the whole run\'s when given (issue 23)', () => {
  const cases = [
    ciCase('race.check.a', 'default', 1500, judged('clean', true), { matched: true, deviations: [], expected: ['clean'] }, 0),
    { classname: 'race.check.lock-limit', name: 'default', ms: 0, skipped: 'lock-limit runs only on race\'s own embedded server' },
  ]
  const text = junitXml('race check', cases, { timestamp: new Date('2026-01-02T03:04:05Z'), ms: 47_000 })
  assert.match(text, /<testsuite name="race check" tests="2" failures="0" errors="0" skipped="1" time="47.000"/)
  assert.match(text, /<testcase classname="race.check.lock-limit" name="default" time="0.000">\n\s*<skipped message="lock-limit runs only on race&apos;s own embedded server"\/>/)
  // Without the run's time: the cases' sum, as before.
  assert.match(junitXml('race check', cases), / skipped="1" time="1.500"/)
  if (NEEDS.xmllint) return // the schema check needs xmllint; the assertions above ran
  const file = path.join(os.tmpdir(), `race-junit-skip-${process.pid}.xml`)
  try {
    fs.writeFileSync(file, text)
    assert.equal(junitProblems(file), '')
  } finally {
    fs.rmSync(file, { force: true })
  }
})

test('GitHub annotations: a case from a spec or .mjs file carries file= (relative to the checkout), escaped like a property', () => {
  const k = { ...ciCase('race.run.x', 'lockstep', 1, judged('anomaly', false), { matched: false, deviations: ['s1: documented committed, got 23505'], expected: ['clean'] }, 1), file: path.join(process.cwd(), 'specs', 'a,b.spec') }
  const [a] = annotationsOf(() => 'race run a,b.spec', [k])
  assert.match(a, /^::error file=specs\/a%2Cb\.spec,title=race run a%2Cb\.spec::s1: documented committed, got 23505/)
  assert.equal(annotation('t', ['x'], 'error', 'tests/own.mjs'), '::error file=tests/own.mjs,title=t::x')
})

test('GitHub annotations: one line, %, CR and LF escaped; the title also escapes : and ,', () => {
  const a = annotation('race check: write-skew (n=2, x)', ['100% sure', 't2: documented 40001\ngot committed'])
  assert.equal(a, '::error title=race check%3A write-skew (n=2%2C x)::100%25 sure%0At2: documented 40001%0Agot committed')
  assert.equal(a.split('\n').length, 1)
})

test('chart ticks are round numbers from 0 past the maximum, the axis close above it', () => {
  assert.deepEqual(niceTicks(7430), [0, 2000, 4000, 6000, 8000])
  // 40,000 would leave a sixth of the axis above the tallest bar: 35,000 fits (issue 23).
  assert.deepEqual(niceTicks(33213), [0, 5000, 10000, 15000, 20000, 25000, 30000, 35000])
  assert.deepEqual(niceTicks(6100), [0, 1000, 2000, 3000, 4000, 5000, 6000, 7000])
  assert.deepEqual(niceTicks(725), [0, 200, 400, 600, 800])
  assert.deepEqual(niceTicks(0), [0, 1])
})

/** A bench report of `groups` oltp contention groups at three levels (race's default cells), no pgbench. */
function benchReport(groups: number[]): BenchReport {
  const stats = (tps: number): CellResult['race'] => ({ txns: tps * 5, elapsedMs: 5000, tps, latencyMs: { avg: 1.5, p50: 1.2, p95: 3.6, p99: 5.6, max: 20 }, retries: 0, retried: 0, failures: 0, failuresByCode: {}, mix: {}, anomalies: 0 })
  const levels = ['read committed', 'repeatable read', 'serializable']
  return {
    command: 'bench',
    server: { version: '18.4' },
    target: 'embedded',
    config: { workloads: ['oltp'], isolation: levels, hot: groups, hotRows: 100, rows: 100000, users: 100, clients: 8, durationMs: 5000, warmupMs: 1000, maxTries: 10, statementTimeoutMs: 10000, driver: 'wire' },
    article: null,
    cells: groups.flatMap((hot) => levels.map((isolation, i) => ({ workload: 'oltp', hot, users: null, isolation, race: stats(6000 - 1000 * i), pgbench: null, vsRc: 1, article: null, racePerPgbench: null }))),
  } as unknown as BenchReport
}

test('race bench: the header reads "PostgreSQL 18.4 (embedded)"; the throughput chart\'s groups fill its width (issue 23)', () => {
  const page = html(benchReport([1, 10, 50]))
  assert.match(page, /PostgreSQL 18\.4 \(embedded\)/)
  assert.doesNotMatch(page, / at embedded/)
  assert.match(benchText(plain, benchReport([1]), 100), /race bench.*PostgreSQL 18\.4 \(embedded\)/)
  for (const groups of [[1, 10, 50], [10]]) {
    const svg = /<svg class="chart" id="throughput"[^]*?<\/svg>/.exec(html(benchReport(groups)))![0]
    const axis = [...svg.matchAll(/<line x1="([\d.]+)" x2="([\d.]+)" y1="[\d.]+" y2="[\d.]+" stroke="#888"\/>/g)].map((m) => [Number(m[1]), Number(m[2])])[0]
    const bars = [...svg.matchAll(/<rect class="bar" [^>]*x="([\d.]+)" y="[\d.]+" width="([\d.]+)"/g)].map((m) => [Number(m[1]), Number(m[1]) + Number(m[2])])
    assert.equal(bars.length, groups.length * 3)
    const plot = axis[1] - axis[0]
    const leftEmpty = (Math.min(...bars.map((b) => b[0])) - axis[0]) / plot
    const rightEmpty = (axis[1] - Math.max(...bars.map((b) => b[1]))) / plot
    // Old: 3 groups left 43% of the width empty on the right, one group 80%. Now the empty part is shared both sides.
    assert.ok(rightEmpty < 0.4 && Math.abs(rightEmpty - leftEmpty) < 0.05, `${groups}: ${leftEmpty.toFixed(2)} empty on the left, ${rightEmpty.toFixed(2)} on the right`)
    if (groups.length === 3) assert.ok(rightEmpty < 0.12, `three groups: ${rightEmpty.toFixed(2)} empty on the right`)
  }
})
