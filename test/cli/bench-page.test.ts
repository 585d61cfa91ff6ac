// The bench HTML page, rendered in headless Chromium and measured in its DOM: every label, tick, axis title and
// legend entry inside its chart, legend entries apart, anomalies and failures beside TPS, the article's ratios as
// marks, pgbench only when it ran, and a page that fits a narrow window.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { test } from 'node:test'
import { html, type BenchReport, type CellResult } from '../../src/bench/report.js'
import { ARTICLE } from '../../src/bench/workloads.js'
import { race, useServer, type TestServer } from '../support/server.js'
import { NEEDS, measureInChromium } from '../support/tools.js'
import { after, before } from 'node:test'

let server: TestServer
before(async () => {
  server = await useServer()
})
after(async () => {
  await server?.stop()
})

interface Measured {
  charts: { id: string; box: Box; outside: string[]; legendOverlaps: string[]; axisTitles: string[]; notes: string[]; marks: number; redBars: number; pgbenchBars: number }[]
  head: string[]
  note: string
  scrollWidth: number
  innerWidth: number
}
interface Box {
  left: number
  top: number
  right: number
  bottom: number
}

/** Runs in the page: what a reader sees, as numbers. */
const MEASURE = `
  const box = (e) => { const r = e.getBoundingClientRect(); return { left: r.left, top: r.top, right: r.right, bottom: r.bottom } }
  const inside = (a, b) => a.left >= b.left - 1 && a.right <= b.right + 1 && a.top >= b.top - 1 && a.bottom <= b.bottom + 1
  const apart = (a, b) => a.right <= b.left || b.right <= a.left || a.bottom <= b.top || b.bottom <= a.top
  const charts = [...document.querySelectorAll('svg.chart')].map((svg) => {
    const b = box(svg)
    const outside = [...svg.querySelectorAll('text')].filter((t) => !inside(box(t), b)).map((t) => t.textContent)
    const items = [...svg.querySelectorAll('.legend-item')]
    const legendOverlaps = []
    items.forEach((x, i) => items.slice(i + 1).forEach((y) => { if (!apart(box(x), box(y))) legendOverlaps.push(x.textContent + ' / ' + y.textContent) }))
    return {
      id: svg.id, box: b, outside, legendOverlaps,
      axisTitles: [...svg.querySelectorAll('.axis-title')].map((t) => t.textContent),
      notes: [...svg.querySelectorAll('.bar-note')].map((t) => t.textContent),
      marks: svg.querySelectorAll('.article-mark').length,
      redBars: [...svg.querySelectorAll('rect.bar')].filter((r) => r.getAttribute('stroke') === '#c00').length,
      pgbenchBars: svg.querySelectorAll('.pgbench-bar').length,
    }
  })
  return {
    charts,
    head: [...document.querySelectorAll('#cells th')].map((t) => t.textContent),
    note: [...document.querySelectorAll('p.note')].map((p) => p.textContent).join(' '),
    scrollWidth: document.documentElement.scrollWidth,
    innerWidth: window.innerWidth,
  }
`

function assertReadable(m: Measured): void {
  for (const ch of m.charts) {
    assert.deepEqual(ch.outside, [], `${ch.id}: text outside the chart`)
    assert.deepEqual(ch.legendOverlaps, [], `${ch.id}: legend entries overlap`)
  }
  assert.ok(m.scrollWidth <= m.innerWidth, `the page is ${m.scrollWidth}px wide in a ${m.innerWidth}px window`)
}

test('a real bench page in Chromium: labels inside the charts, axis titles, article marks, no pgbench without --vs-pgbench', { skip: NEEDS.chromium }, async () => {
  const file = path.join(os.tmpdir(), `race-bench-page-${process.pid}.html`)
  try {
    const r = await race(
      ['bench', '--workload', 'oltp,advisory', '--hot', '10', '--rows', '1000', '--isolation', 'rc,rr', '--clients', '4', '--users', '2', '--duration', '1s', '--warmup', '0', '--html', file],
      { url: server.url, timeoutMs: 120_000 },
    )
    assert.equal(r.code, 0, r.stderr)
    assert.match(r.stdout, new RegExp(`wrote ${file.replace(/[.]/g, '\\.')}`))
    const page = fs.readFileSync(file, 'utf8')
    assert.doesNotMatch(page, /<script|<link|src=|href=|@import|url\(/i, 'no scripts, no network resources')
    for (const width of [1000, 600]) {
      const m = measureInChromium(file, MEASURE, { width, height: 900 }) as Measured
      assertReadable(m)
      const [tp, lat] = m.charts
      assert.equal(tp.id, 'throughput')
      assert.deepEqual(tp.axisTitles, ['transactions per second', 'workload and contention (oltp: share of accesses to the hot rows)'])
      assert.deepEqual(lat.axisTitles, ['latency of a transaction, ms (log scale)'])
      assert.equal(tp.marks, 2, "the article's ratio for oltp hot 10% at RC and RR")
      assert.equal(tp.pgbenchBars, 0)
      // Beside TPS: failures, and (the advisory workload) anomalies.
      assert.deepEqual(m.head.slice(0, 5), ['workload', 'level', 'TPS', 'failures', 'anomalies'])
      assert.ok(!m.head.includes('pgbench TPS') && !m.head.includes('race/pgbench'), m.head.join(','))
      assert.doesNotMatch(m.note, /pgbench/)
    }
  } finally {
    fs.rmSync(file, { force: true })
  }
})

const stats = (tps: number, o: Partial<CellResult['race']> = {}): CellResult['race'] => ({
  txns: tps * 5,
  elapsedMs: 5000,
  tps,
  latencyMs: { avg: 1.5, p50: 1.2, p95: 3.6, p99: 5.6, max: 20 },
  retries: 0,
  retried: 0,
  failures: 0,
  failuresByCode: {},
  mix: { insert: 1, complete: 1 },
  anomalies: 0,
  ...o,
})

/** The README's recorded advisory run (5 s cells, pgbench beside): RR fast and wrong, SERIALIZABLE with failures. */
function recorded(): BenchReport {
  const cell = (isolation: string, race: CellResult['race'], pg: number): CellResult => ({
    workload: 'advisory',
    hot: null,
    users: 100,
    isolation,
    race,
    pgbench: { tps: pg, txns: pg * 5, failures: 0, retries: 0, retried: 0, latencyAvgMs: 1, mix: {}, durationS: 5 },
    vsRc: race.tps / 5286,
    article: null,
    racePerPgbench: race.tps / pg,
  })
  return {
    command: 'bench',
    server: { version: '15.20' },
    target: 'postgres://postgres@127.0.0.1:5432/test',
    config: { workloads: ['advisory'], isolation: ['read committed', 'repeatable read', 'serializable'], hot: [10], hotRows: 100, rows: 100000, users: 100, clients: 8, durationMs: 5000, warmupMs: 1000, maxTries: 10, statementTimeoutMs: 10000, driver: 'wire', pgbench: { bin: 'pgbench', version: 'pgbench (PostgreSQL) 15.20' } },
    article: ARTICLE,
    cells: [
      cell('read committed', stats(5286), 6185),
      cell('repeatable read', stats(4552, { retries: 574, anomalies: 566 }), 5007),
      cell('serializable', stats(3857, { retries: 9188, failures: 80, failuresByCode: { '40001': { count: 80, condition: 'serialization_failure', message: '' } } }), 4404),
    ],
  }
}

test('anomalies and failures stand beside TPS on the chart; pgbench columns, bars and legend only when pgbench ran', { skip: NEEDS.chromium }, () => {
  const file = path.join(os.tmpdir(), `race-bench-recorded-${process.pid}.html`)
  try {
    fs.writeFileSync(file, html(recorded()))
    const m = measureInChromium(file, MEASURE, { width: 800, height: 900 }) as Measured
    assertReadable(m)
    const [tp] = m.charts
    assert.deepEqual(tp.notes, ['566 anomalies', '80 failed'])
    assert.equal(tp.redBars, 1, 'the REPEATABLE READ bar is outlined red')
    assert.equal(tp.pgbenchBars, 3)
    assert.equal(tp.marks, 0, 'the article published no ratio for the advisory workload')
    assert.deepEqual(m.head.slice(-2), ['pgbench TPS', 'race/pgbench'])
    assert.match(m.note, /Dashed outlines: pgbench/)
    assert.match(m.note, /anomalies/)
  } finally {
    fs.rmSync(file, { force: true })
  }
})
