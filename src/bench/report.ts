// What `race bench` shows: the table, a terminal bar chart, the JSON document, a self-contained HTML page
// with inline SVG charts, and the progress bar while it runs.
import type { Style } from '../report/color.js'
import { fitTable, type CellValue } from '../report/table.js'
import { columns, fitLines, hang, width } from '../report/width.js'
import { ARTICLE } from './workloads.js'
import type { CellStats } from './runner.js'
import type { PgbenchResult } from './pgbench.js'

export interface CellResult {
  workload: 'oltp' | 'advisory'
  /** oltp: percent of accesses to the hot rows. */
  hot: number | null
  /** advisory: number of users. */
  users: number | null
  isolation: string
  race: CellStats
  pgbench: (PgbenchResult & { durationS: number }) | null
  /** race TPS divided by race's READ COMMITTED TPS in the same group. */
  vsRc: number | null
  /** The article's published ratio for this cell (SSI column for serializable), if any. */
  article: number | null
  /** race TPS divided by pgbench TPS. */
  racePerPgbench: number | null
  /** --pooler: the same load through a PgBouncer of race's own, with unnamed statements (null: not run). */
  pooled?: CellStats | null
  /** --pooler: the same load direct, with the same unnamed statements. */
  unnamed?: CellStats | null
  /** Pooled TPS / direct TPS with the same unnamed statements, measured side by side: the pooler's hop. */
  pooledPerDirect?: number | null
  /** Direct unnamed TPS / direct prepared TPS: what giving up named prepared statements costs. */
  unnamedPerPrepared?: number | null
  /** MySQL/MariaDB --vs-slap: mariadb-slap on the same mix, and race TPS divided by its TPS. */
  slap?: { tps: number; txns: number; seconds: number; error?: string } | null
  racePerSlap?: number | null
}

export interface BenchReport {
  command: 'bench'
  server: { version: string; product?: string }
  /** 'mysql' on MySQL/MariaDB: SERIALIZABLE is two-phase locking, compared with the article's 2PL column. */
  engine?: 'mysql'
  target: string
  config: {
    workloads: string[]
    isolation: string[]
    hot: number[]
    hotRows: number
    rows: number
    users: number
    clients: number
    durationMs: number
    warmupMs: number
    maxTries: number
    statementTimeoutMs: number
    driver: string
    pgbench: { bin: string; version: string } | null
    slap?: { bin: string; version: string } | null
  }
  article: typeof ARTICLE
  /** --pooler: the PgBouncer each cell also ran through, described. */
  pooler?: string
  cells: CellResult[]
  schema?: string
}

const SHORT: Record<string, string> = { 'read committed': 'RC', 'repeatable read': 'RR', serializable: 'SERIALIZABLE' }
export const shortLevel = (l: string) => SHORT[l] ?? l

export function groupLabel(x: Pick<CellResult, 'workload' | 'hot' | 'users'>): string {
  return x.workload === 'oltp' ? `oltp hot ${x.hot}%` : `advisory ${x.users} users`
}

const ms = (v: number) => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2))
const int = (v: number) => Math.round(v).toLocaleString('en-US')
const ratio = (v: number | null) => (v === null ? '-' : v.toFixed(2))

function failuresText(s: CellStats): string {
  if (!s.failures) return '0'
  const codes = Object.entries(s.failuresByCode)
    .map(([code, f]) => `${f.count} ${code}`)
    .join(', ')
  return `${s.failures} (${codes})`
}

function vsText(c: Style, x: CellResult): string {
  return x.vsRc === null ? '-' : x.article === null ? ratio(x.vsRc) : colourRatio(c, x.vsRc, x.article)
}
const anomaliesText = (c: Style, x: CellResult) => (x.workload === 'advisory' ? (x.race.anomalies ? c.red(String(x.race.anomalies)) : '0') : '-')
const failText = (c: Style, x: CellResult) => (x.race.failures ? c.red(failuresText(x.race)) : '0')
const pgTps = (c: Style, x: CellResult) => (x.pgbench ? `${int(x.pgbench.tps)}${x.pgbench.error ? c.yellow(' !') : ''}` : '-')
const slapTps = (c: Style, x: CellResult) => (x.slap ? `${int(x.slap.tps)}${x.slap.error ? c.yellow(' !') : ''}` : '-')
const perSlap = (x: CellResult) => (x.racePerSlap == null ? '-' : ratio(x.racePerSlap))
const perPg = (c: Style, x: CellResult) => (x.racePerPgbench === null ? '-' : x.racePerPgbench >= 0.9 ? c.green(ratio(x.racePerPgbench)) : c.yellow(ratio(x.racePerPgbench)))

/**
 * One row per cell when it fits the screen; otherwise three narrower tables, each grouped by workload: throughput
 * (with failures and anomalies beside TPS: a fast level that breaks the invariant is not a win), latency and
 * retries, and race beside pgbench.
 */
export function table(c: Style, r: BenchReport, w = columns()): string {
  const withPg = r.cells.some((x) => x.pgbench)
  const withAdvisory = r.cells.some((x) => x.workload === 'advisory')
  const head = ['workload', 'level', 'TPS', 'P50 ms', 'P95 ms', 'P99 ms', 'retries', 'failures', 'vs RC', 'article']
  if (withAdvisory) head.push('anomalies')
  if (withPg) head.push('pgbench TPS', 'race/pgbench')
  const withSlap = r.cells.some((x) => x.slap)
  if (withSlap) head.push('slap TPS', 'race/slap')
  const rows = r.cells.map((x) => {
    const s = x.race
    const row: string[] = [groupLabel(x), shortLevel(x.isolation), int(s.tps), ms(s.latencyMs.p50), ms(s.latencyMs.p95), ms(s.latencyMs.p99), String(s.retries), failText(c, x), vsText(c, x), ratio(x.article)]
    if (withAdvisory) row.push(anomaliesText(c, x))
    if (withPg) row.push(pgTps(c, x), perPg(c, x))
    if (withSlap) row.push(slapTps(c, x), perSlap(x))
    return row
  })
  if (fitsWide(head, rows, w)) return fitTable(c, head, rows, [], w)
  const grouped = (cols: string[], cell: (x: CellResult) => string[]) => groupedTable(c, r.cells, cols, cell, w)
  const out = [
    grouped(['level', 'TPS', 'vs RC', 'article', 'failures', ...(withAdvisory ? ['anomalies'] : [])], (x) => [int(x.race.tps), vsText(c, x), ratio(x.article), failText(c, x), ...(withAdvisory ? [anomaliesText(c, x)] : [])]),
    grouped(['level', 'P50 ms', 'P95 ms', 'P99 ms', 'retries'], (x) => [ms(x.race.latencyMs.p50), ms(x.race.latencyMs.p95), ms(x.race.latencyMs.p99), String(x.race.retries)]),
  ]
  if (withPg) out.push(grouped(['level', 'race TPS', 'pgbench TPS', 'race/pgbench'], (x) => [int(x.race.tps), pgTps(c, x), perPg(c, x)]))
  if (withSlap) out.push(grouped(['level', 'race TPS', 'slap TPS', 'race/slap'], (x) => [int(x.race.tps), slapTps(c, x), perSlap(x)]))
  return out.join('\n')
}

function colourRatio(c: Style, measured: number, article: number): string {
  const s = measured.toFixed(2)
  return Math.abs(measured - article) <= 0.05 ? c.green(s) : c.yellow(s)
}

/** One bar group per (workload, hot): TPS per level, scaled to the largest TPS of the run, anomalies beside. */
export function bars(c: Style, r: BenchReport, w = columns()): string {
  const max = Math.max(1, ...r.cells.map((x) => Math.max(x.race.tps, x.pgbench?.tps ?? 0)))
  const tailOf = (x: CellResult) => {
    const tail = [`${int(x.race.tps)} tps`]
    if (x.vsRc !== null && x.isolation !== 'read committed') tail.push(`${ratio(x.vsRc)}x RC${x.article !== null ? `, article ${ratio(x.article)}` : ''}`)
    if (x.race.anomalies) tail.push(c.red(`${x.race.anomalies} anomalies`))
    if (x.race.failures) tail.push(c.red(`${x.race.failures} failed`))
    return tail.join('  ')
  }
  const tails = r.cells.map(tailOf)
  const bw = Math.max(8, Math.min(40, w - 16 - Math.max(...tails.map(width))))
  const lines: string[] = []
  let group = ''
  r.cells.forEach((x, i) => {
    const g = groupLabel(x)
    if (g !== group) {
      lines.push(c.bold(g))
      group = g
    }
    const n = Math.max(0, Math.round((x.race.tps / max) * bw))
    lines.push(...hang(`  ${shortLevel(x.isolation).padEnd(12)} ${c.cyan('█'.repeat(n))}${' '.repeat(bw - n)} ${tails[i]}`, w, 16 + bw))
    if (x.pgbench) {
      const p = Math.max(0, Math.round((x.pgbench.tps / max) * bw))
      lines.push(`  ${'  pgbench'.padEnd(12)} ${c.dim('▒'.repeat(p))}${' '.repeat(bw - p)} ${c.dim(`${int(x.pgbench.tps)} tps`)}`)
    }
  })
  return lines.join('\n')
}

export function mixLines(r: BenchReport): string[] {
  const out: string[] = []
  for (const w of r.config.workloads) {
    const total: Record<string, number> = {}
    for (const x of r.cells.filter((y) => y.workload === w)) for (const [k, v] of Object.entries(x.race.mix)) total[k] = (total[k] ?? 0) + v
    const sum = Object.values(total).reduce((a, b) => a + b, 0)
    if (!sum) continue
    out.push(`${w} mix (race, all cells): ${Object.entries(total).map(([k, v]) => `${k} ${((v / sum) * 100).toFixed(1)}%`).join(', ')} of ${sum.toLocaleString('en-US')} transactions`)
  }
  return out
}

export function text(c: Style, r: BenchReport, w = columns()): string {
  const cfg = r.config
  const lines = [
    `${c.bold('race bench')}  ${r.server.product ?? 'PostgreSQL'} ${r.server.version} (${r.target})`,
    `clients ${cfg.clients}, ${cfg.durationMs / 1000}s a cell after ${cfg.warmupMs / 1000}s warmup, max-tries ${cfg.maxTries}, driver ${cfg.driver}` +
      (cfg.pgbench ? `; pgbench: ${cfg.pgbench.version}, -M prepared -j 1` : '') +
      (cfg.slap ? `; slap: ${cfg.slap.version}` : ''),
    '',
    table(c, r, w),
    '',
    bars(c, r, w),
    '',
    ...mixLines(r),
    r.engine === 'mysql'
      ? `vs RC: TPS / READ COMMITTED TPS of the same row group; article: the isolation article's published ratio (SERIALIZABLE: its 2PL column, InnoDB's).`
      : `vs RC: TPS / READ COMMITTED TPS of the same row group; article: the isolation article's published ratio (SERIALIZABLE: its SSI column).`,
    `article P50/P99 (not per contention): RC 2/12 ms, RR 2/18 ms, SSI 2/25 ms, 2PL 3/150 ms.`,
  ]
  const pair = r.cells.filter((x) => x.pgbench && x.pgbench.tps > 0)
  if (pair.length) lines.push(yardstick(pair))
  const slapped = r.cells.filter((x) => x.slap && x.slap.tps > 0)
  if (slapped.length) {
    const rs = slapped.map((x) => x.race.tps / x.slap!.tps)
    const geo = Math.exp(rs.reduce((a, x) => a + Math.log(x), 0) / rs.length)
    const sum = slapped.reduce((a, x) => a + x.race.tps, 0) / slapped.reduce((a, x) => a + x.slap!.tps, 0)
    lines.push(`race/slap over ${slapped.length} cells (slap runs no SERIALIZABLE cell: it stops at the first deadlock, with no retry):`)
    lines.push(`  race/slap over ${slapped.length} cells: ${sum.toFixed(2)} by total TPS, ${geo.toFixed(2)} geometric mean (cells ${Math.min(...rs).toFixed(2)}-${Math.max(...rs).toFixed(2)}; slap's update adds in SQL, race's writes back what it read)`)
  }
  if (r.cells.some((x) => x.slap?.error)) lines.push(c.yellow('!: slap reported errors: ' + [...new Set(r.cells.map((x) => x.slap?.error).filter(Boolean))].join('; ')))
  if (r.pooler) lines.push('', ...poolerLines(c, r, w))
  if (r.cells.some((x) => x.pgbench?.error)) {
    lines.push(c.yellow('!: pgbench reported errors: ' + [...new Set(r.cells.map((x) => x.pgbench?.error).filter(Boolean))].join('; ')))
  }
  if (r.cells.some((x) => x.race.anomalies)) {
    lines.push('anomalies: advisory checks that saw more than one pending request: the lock did not serialize (REPEATABLE READ: the snapshot predates the lock, article §5.2).')
  }
  return fitLines(lines, w).join('\n')
}

/**
 * --pooler: each cell three ways, side by side (same clients, level and duration; the order alternates from
 * cell to cell): direct with named prepared statements (the table above), direct with unnamed statements, and
 * through the pooler with unnamed statements (PgBouncer 1.18 in transaction mode cannot keep named ones).
 */
export function poolerLines(c: Style, r: BenchReport, w = columns()): string[] {
  const hops: number[] = []
  const parses: number[] = []
  for (const x of r.cells) {
    if (x.pooledPerDirect) hops.push(x.pooledPerDirect)
    if (x.unnamedPerPrepared) parses.push(x.unnamedPerPrepared)
  }
  const tps = (v: CellStats | null | undefined) => (v ? int(v.tps) : '-')
  const p50 = (v: CellStats | null | undefined) => (v ? ms(v.latencyMs.p50) : '-')
  const fails = (x: CellResult) => (x.pooled ? (x.pooled.failures ? c.red(failuresText(x.pooled)) : '0') : '-')
  const head = ['workload', 'level', 'direct TPS', 'unnamed TPS', 'pooled TPS', 'pooled/unnamed', 'unnamed/direct', 'P50 ms d/u/p', 'pooled failures']
  const rows = r.cells.map((x) => [
    groupLabel(x),
    shortLevel(x.isolation),
    int(x.race.tps),
    tps(x.unnamed),
    tps(x.pooled),
    ratio(x.pooledPerDirect ?? null),
    ratio(x.unnamedPerPrepared ?? null),
    `${ms(x.race.latencyMs.p50)} / ${p50(x.unnamed)} / ${p50(x.pooled)}`,
    fails(x),
  ])
  let tables: string
  if (fitsWide(head, rows, w)) tables = fitTable(c, head, rows, [], w)
  else {
    // Narrower: two tables grouped by workload (throughput and ratios; latency and failures), as the table above.
    const grouped = (cols: string[], cell: (x: CellResult) => string[]) => groupedTable(c, r.cells, cols, cell, w)
    tables = [
      grouped(['level', 'direct TPS', 'unnamed TPS', 'pooled TPS', 'pooled / unnamed', 'unnamed / direct'], (x) => [
        int(x.race.tps),
        tps(x.unnamed),
        tps(x.pooled),
        ratio(x.pooledPerDirect ?? null),
        ratio(x.unnamedPerPrepared ?? null),
      ]),
      grouped(['level', 'P50 ms direct', 'P50 ms unnamed', 'P50 ms pooled', 'pooled failures'], (x) => [ms(x.race.latencyMs.p50), p50(x.unnamed), p50(x.pooled), fails(x)]),
    ].join('\n')
  }
  const geo = (v: number[]) => Math.exp(v.reduce((a, x) => a + Math.log(x), 0) / v.length)
  const span = (v: number[]) => `${geo(v).toFixed(2)} geometric mean over ${v.length} cell${v.length === 1 ? '' : 's'} (${Math.min(...v).toFixed(2)}-${Math.max(...v).toFixed(2)})`
  return [
    `${c.bold('through the pooler')}  ${r.pooler}, race's own, in front of the same server`,
    tables,
    ...(hops.length ? [`pooled/unnamed (the pooler's hop, same statements): ${span(hops)}`] : []),
    ...(parses.length ? [`unnamed/direct (parsing every statement instead of preparing it once): ${span(parses)}`] : []),
    'each cell is one noisy sample on a shared machine; the ratios are measured side by side in this run.',
  ]
}

/** race/pgbench over all cells: the sum of TPS (weights busy cells) and the geometric mean of the cell ratios. */
export function yardstick(cells: CellResult[]): string {
  const ratios = cells.map((x) => x.race.tps / x.pgbench!.tps)
  const geo = Math.exp(ratios.reduce((a, x) => a + Math.log(x), 0) / ratios.length)
  const sum = cells.reduce((a, x) => a + x.race.tps, 0) / cells.reduce((a, x) => a + x.pgbench!.tps, 0)
  return `race/pgbench over ${cells.length} cells: ${sum.toFixed(2)} by total TPS, ${geo.toFixed(2)} geometric mean (cells ${Math.min(...ratios).toFixed(2)}-${Math.max(...ratios).toFixed(2)}: one cell is one noisy sample)`
}

// ---------- HTML: one file, inline SVG, no scripts, no network ----------

const LEVEL_COLOUR: Record<string, string> = { 'read committed': '#4e79a7', 'repeatable read': '#f28e2b', serializable: '#e15759' }
const esc = (s: string) => s.replace(/[&<>"]/g, (ch) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[ch]!)

function groups(r: BenchReport): { label: string; cells: CellResult[] }[] {
  const out: { label: string; cells: CellResult[] }[] = []
  for (const x of r.cells) {
    const label = groupLabel(x)
    const g = out.find((y) => y.label === label)
    if (g) g.cells.push(x)
    else out.push({ label, cells: [x] })
  }
  return out
}

/**
 * Round tick values (1, 2, 2.5 or 5 times a power of ten) from 0 to at least `max`, five to nine of them: of those,
 * the ones whose last tick is closest above `max` (the axis fits the data), the fewest on a tie.
 */
export function niceTicks(max: number): number[] {
  if (!(max > 0)) return [0, 1]
  let best = ticksOf(max, 5)
  for (let about = 6; about <= 8; about++) {
    const t = ticksOf(max, about)
    if (t[t.length - 1] < best[best.length - 1]) best = t
  }
  return best
}

function ticksOf(max: number, about: number): number[] {
  const raw = max / about
  const pow = Math.pow(10, Math.floor(Math.log10(raw)))
  const step = [1, 2, 2.5, 5, 10].map((m) => m * pow).find((x) => x >= raw)!
  const out: number[] = []
  for (let v = 0; v < max + step / 2 && out.length < 20; v += step) out.push(Math.round(v * 1e6) / 1e6)
  if (out[out.length - 1] < max) out.push(out[out.length - 1] + step)
  return out
}

/** A conservative width of SVG text at 11px sans-serif (the test renders it and checks nothing overflows). */
const textW = (s: string, px = 11) => Math.ceil(s.length * px * 0.62)

/** Legend items laid out left to right, wrapping onto new rows inside `width`. */
function legendSvg(items: { mark: string; label: string }[], x0: number, y0: number, width: number): { svg: string; height: number } {
  let x = x0
  let y = y0
  const parts: string[] = []
  for (const it of items) {
    const w = 20 + textW(it.label) + 18
    if (x > x0 && x + w > x0 + width) {
      x = x0
      y += 18
    }
    parts.push(`<g class="legend-item" transform="translate(${x},${y})">${it.mark}<text x="20" y="4">${esc(it.label)}</text></g>`)
    x += w
  }
  return { svg: `<g class="legend">${parts.join('')}</g>`, height: y - y0 + 18 }
}

/**
 * Grouped vertical bars: TPS by level for each contention group. Beside TPS, what makes a fast level wrong or
 * costly: a red outline and label for anomalies, a label for failures. The article's published ratios, applied to
 * this server's READ COMMITTED TPS, are black reference marks; pgbench (only with --vs-pgbench) dashed outlines.
 */
function throughputSvg(r: BenchReport): string {
  const gs = groups(r)
  const withPg = r.cells.some((x) => x.pgbench)
  const levels = r.config.isolation
  // The groups share the plot's whole width, bars centred in each: a few groups widen their bars (up to 48) and a
  // single one gets a narrower chart, so the chart is not mostly empty on its right (issue 23).
  const gap = 34
  const perGroup = levels.length * (withPg ? 2 : 1)
  const left = 78
  const W = Math.max(gs.length > 1 ? 640 : 420, left + gs.length * (perGroup * 26 + gap) + 20)
  const slot = (W - 10 - left) / Math.max(1, gs.length)
  const bw = Math.max(26, Math.min(48, Math.floor((slot - gap) / perGroup)))
  const gw = perGroup * bw + gap
  const labelOf = (x: CellResult) => [x.race.anomalies ? `${x.race.anomalies.toLocaleString('en-US')} anomalies` : '', x.race.failures ? `${x.race.failures.toLocaleString('en-US')} failed` : ''].filter(Boolean).join(', ')
  const plotH = 220
  const max = Math.max(1, ...r.cells.map((x) => Math.max(x.race.tps, x.pgbench?.tps ?? 0, (x.article ?? 0) * rcTps(r, x))))
  const ticks = niceTicks(max)
  const axisMax = ticks[ticks.length - 1]
  // A label stands on its bar, rotated: room above the plot only for what does not fit above the bar inside it.
  const top = 12 + Math.max(0, ...r.cells.map((x) => (labelOf(x) ? textW(labelOf(x), 10) + 6 - plotH * (1 - x.race.tps / axisMax) : 0)))
  const bottom = top + plotH
  const y = (v: number) => bottom - (v / axisMax) * plotH
  const parts: string[] = []
  for (const v of ticks) {
    parts.push(`<line x1="${left}" x2="${W - 10}" y1="${y(v)}" y2="${y(v)}" stroke="#ddd"/><text class="tick" x="${left - 6}" y="${y(v) + 4}" text-anchor="end">${esc(v.toLocaleString('en-US'))}</text>`)
  }
  parts.push(`<text class="axis-title" transform="translate(16,${top + plotH / 2}) rotate(-90)" text-anchor="middle">transactions per second</text>`)
  gs.forEach((g, gi) => {
    const x0 = left + gi * slot + (slot - (gw - gap)) / 2
    let k = 0
    for (const x of g.cells) {
      const col = LEVEL_COLOUR[x.isolation] ?? '#888'
      const bx = x0 + k * bw
      const wrong = x.race.anomalies > 0
      parts.push(
        `<rect class="bar" data-level="${esc(x.isolation)}" x="${bx}" y="${y(x.race.tps)}" width="${bw - 4}" height="${bottom - y(x.race.tps)}" fill="${col}"${wrong ? ' stroke="#c00" stroke-width="3"' : ''}><title>${esc(`${g.label} ${x.isolation}: ${int(x.race.tps)} tps (race)${labelOf(x) ? `; ${labelOf(x)}` : ''}`)}</title></rect>`,
      )
      const label = labelOf(x)
      if (label) {
        const lx = bx + (bw - 4) / 2 + 4
        parts.push(`<text class="bar-note" transform="translate(${lx},${y(x.race.tps) - 4}) rotate(-90)" font-size="10" fill="${wrong ? '#c00' : '#a05a00'}">${esc(label)}</text>`)
      }
      if (x.article !== null) {
        const ay = y(x.article * rcTps(r, x))
        parts.push(`<line class="article-mark" x1="${bx - 3}" x2="${bx + bw - 1}" y1="${ay}" y2="${ay}" stroke="#000" stroke-width="2"><title>article: ${x.article} x RC = ${int(x.article * rcTps(r, x))} tps</title></line>`)
      }
      k++
      if (x.pgbench) {
        const px = x0 + k * bw
        parts.push(`<rect class="pgbench-bar" x="${px}" y="${y(x.pgbench.tps)}" width="${bw - 4}" height="${bottom - y(x.pgbench.tps)}" fill="none" stroke="${col}" stroke-dasharray="3 2"><title>${esc(`${g.label} ${x.isolation}: ${int(x.pgbench.tps)} tps (pgbench)`)}</title></rect>`)
        k++
      }
    }
    parts.push(`<text class="group" x="${x0 + (gw - gap) / 2}" y="${bottom + 16}" text-anchor="middle">${esc(g.label)}</text>`)
  })
  parts.push(`<line x1="${left}" x2="${W - 10}" y1="${bottom}" y2="${bottom}" stroke="#888"/>`)
  const xTitle = r.config.workloads.includes('oltp') ? 'workload and contention (oltp: share of accesses to the hot rows)' : 'workload'
  parts.push(`<text class="axis-title" x="${left + (W - left) / 2}" y="${bottom + 36}" text-anchor="middle">${esc(xTitle)}</text>`)
  const items = levels.map((l) => ({ mark: `<rect x="0" y="-5" width="12" height="12" fill="${LEVEL_COLOUR[l] ?? '#888'}"/>`, label: shortLevel(l) }))
  if (r.cells.some((x) => x.article !== null)) items.push({ mark: '<line x1="0" x2="14" y1="1" y2="1" stroke="#000" stroke-width="2"/>', label: "article's ratio x this server's RC" })
  if (withPg) items.push({ mark: '<rect x="0" y="-5" width="12" height="12" fill="none" stroke="#555" stroke-dasharray="3 2"/>', label: 'pgbench, same script' })
  if (r.cells.some((x) => x.race.anomalies)) items.push({ mark: '<rect x="0" y="-5" width="12" height="12" fill="#ccc" stroke="#c00" stroke-width="3"/>', label: 'anomalies: the invariant broke' })
  const legend = legendSvg(items, left, bottom + 60, W - left - 10)
  parts.push(legend.svg)
  const H = bottom + 60 + legend.height
  return `<svg class="chart" id="throughput" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" font-family="sans-serif" font-size="11">${parts.join('')}</svg>`
}

function rcTps(r: BenchReport, x: CellResult): number {
  const rc = r.cells.find((y) => groupLabel(y) === groupLabel(x) && y.isolation === 'read committed')
  return rc?.race.tps ?? 0
}

/** P50/P95/P99 per cell on a log scale (latencies span orders of magnitude under contention). */
function latencySvg(r: BenchReport): string {
  const rows = r.cells
  const rowH = 16
  const left = 16 + Math.max(...rows.map((x) => textW(`${groupLabel(x)} ${shortLevel(x.isolation)}`)))
  const valueW = Math.max(...rows.map((x) => textW(`${ms(x.race.latencyMs.p50)} / ${ms(x.race.latencyMs.p95)} / ${ms(x.race.latencyMs.p99)}`))) + 10
  const W = Math.max(640, left + 360 + valueW)
  const right = W - valueW
  const top = 24
  const plotBottom = top + rows.length * rowH * 1.4
  const all = rows.flatMap((x) => [x.race.latencyMs.p50, x.race.latencyMs.p99]).filter((v) => v > 0)
  const lo = Math.pow(10, Math.floor(Math.log10(Math.min(...all, 1))))
  const hi = Math.pow(10, Math.ceil(Math.log10(Math.max(...all, 1))))
  const x = (v: number) => left + ((Math.log10(Math.max(v, lo)) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo) || 1)) * (right - left)
  const parts: string[] = []
  for (let d = lo; d <= hi * 1.0001; d *= 10) {
    parts.push(`<line x1="${x(d)}" x2="${x(d)}" y1="${top - 6}" y2="${plotBottom}" stroke="#ddd"/><text class="tick" x="${x(d)}" y="${top - 10}" text-anchor="middle">${d < 1 ? Number(d.toPrecision(1)) : d} ms</text>`)
  }
  rows.forEach((c0, i) => {
    const yy = top + i * rowH * 1.4
    const col = LEVEL_COLOUR[c0.isolation] ?? '#888'
    const l = c0.race.latencyMs
    parts.push(`<text x="${left - 8}" y="${yy + 11}" text-anchor="end">${esc(`${groupLabel(c0)} ${shortLevel(c0.isolation)}`)}</text>`)
    parts.push(`<rect x="${left}" y="${yy}" width="${x(l.p99) - left}" height="${rowH - 2}" fill="${col}" opacity="0.25"><title>P99 ${l.p99.toFixed(2)} ms</title></rect>`)
    parts.push(`<rect x="${left}" y="${yy}" width="${x(l.p95) - left}" height="${rowH - 2}" fill="${col}" opacity="0.5"><title>P95 ${l.p95.toFixed(2)} ms</title></rect>`)
    parts.push(`<rect x="${left}" y="${yy}" width="${x(l.p50) - left}" height="${rowH - 2}" fill="${col}"><title>P50 ${l.p50.toFixed(2)} ms</title></rect>`)
    parts.push(`<text x="${x(l.p99) + 4}" y="${yy + 11}">${esc(`${ms(l.p50)} / ${ms(l.p95)} / ${ms(l.p99)}`)}</text>`)
  })
  parts.push(`<text class="axis-title" x="${left + (right - left) / 2}" y="${plotBottom + 18}" text-anchor="middle">latency of a transaction, ms (log scale)</text>`)
  const shade = (o: number) => `<rect x="0" y="-5" width="12" height="12" fill="#555" opacity="${o}"/>`
  const legend = legendSvg([{ mark: shade(1), label: 'P50' }, { mark: shade(0.5), label: 'P95' }, { mark: shade(0.25), label: 'P99 (numbers: P50 / P95 / P99)' }], left, plotBottom + 40, W - left - 10)
  parts.push(legend.svg)
  const H = plotBottom + 40 + legend.height
  return `<svg class="chart" id="latency" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" font-family="sans-serif" font-size="11">${parts.join('')}</svg>`
}

export function html(r: BenchReport): string {
  const cfg = r.config
  const withPg = r.cells.some((x) => x.pgbench)
  const withAdvisory = r.cells.some((x) => x.workload === 'advisory')
  // Failures and anomalies beside TPS: a level that is fast because it let the invariant break is not a win.
  const head = ['workload', 'level', 'TPS', 'failures', ...(withAdvisory ? ['anomalies'] : []), 'vs RC', 'article', 'P50 ms', 'P95 ms', 'P99 ms', 'retries', ...(withPg ? ['pgbench TPS', 'race/pgbench'] : [])]
  const rows = r.cells
    .map((x) => {
      const cells = [
        groupLabel(x),
        shortLevel(x.isolation),
        int(x.race.tps),
        failuresText(x.race),
        ...(withAdvisory ? [x.workload === 'advisory' ? String(x.race.anomalies) : '-'] : []),
        ratio(x.vsRc),
        ratio(x.article),
        ms(x.race.latencyMs.p50),
        ms(x.race.latencyMs.p95),
        ms(x.race.latencyMs.p99),
        String(x.race.retries),
        ...(withPg ? [x.pgbench ? int(x.pgbench.tps) : '-', ratio(x.racePerPgbench)] : []),
      ]
      const bad = (i: number) => (head[i] === 'anomalies' && x.race.anomalies) || (head[i] === 'failures' && x.race.failures)
      return `<tr>${cells.map((v, i) => `<td${bad(i) ? ' class="bad"' : ''}>${esc(v)}</td>`).join('')}</tr>`
    })
    .join('\n')
  const art = ARTICLE.ratios.map((a) => `<tr><td>${esc(a.contention)}${a.hot === null ? '' : ` (${a.hot}% hot)`}</td><td>${a.rc}</td><td>${a.rr}</td><td>${a.serializable2pl}</td><td>${a.ssi}</td></tr>`).join('')
  const notes = [
    "Filled bars: race's load generator.",
    r.cells.some((x) => x.article !== null) ? "Black marks: the article's published ratio applied to this server's READ COMMITTED TPS (where the article published one)." : '',
    withPg ? 'Dashed outlines: pgbench on the same script.' : '',
    r.cells.some((x) => x.race.anomalies) ? 'A red outline and label: anomalies, checks that saw the invariant broken; that level is fast because it is wrong.' : '',
    r.cells.some((x) => x.race.failures) ? 'A label "failed": transactions that still failed after --max-tries, or with another SQLSTATE.' : '',
  ].filter(Boolean)
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>race bench: PostgreSQL ${esc(r.server.version)}</title>
<style>body{font-family:sans-serif;margin:1.5em auto;max-width:960px;padding:0 1em;color:#222}svg.chart{display:block;max-width:100%;height:auto}.scroll{overflow-x:auto}table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right;white-space:nowrap}td:first-child,th:first-child{text-align:left}th{background:#f4f4f4}td.bad{color:#c00;font-weight:bold}.note{color:#555;font-size:90%}</style>
</head><body>
<h1>race bench</h1>
<p>${esc(r.server.product ?? 'PostgreSQL')} ${esc(r.server.version)} (${esc(r.target)}); ${cfg.clients} clients, ${cfg.durationMs / 1000}s a cell after ${cfg.warmupMs / 1000}s warmup, max-tries ${cfg.maxTries}, driver ${esc(cfg.driver)}${cfg.pgbench ? `; ${esc(cfg.pgbench.version)}` : ''}.</p>
<h2>Throughput by isolation level and contention</h2>
${throughputSvg(r)}
<p class="note">${notes.map(esc).join(' ')}</p>
<h2>Latency percentiles (P50 / P95 / P99, log scale)</h2>
${latencySvg(r)}
<h2>Table</h2>
<div class="scroll"><table id="cells"><tr>${head.map((h) => `<th>${esc(h)}</th>`).join('')}</tr>
${rows}</table></div>
<h2>The article's published ratios (RC = 1.0)</h2>
<div class="scroll"><table id="article"><tr><th>workload</th><th>RC</th><th>RR</th><th>Serializable (2PL)</th><th>Serializable (SSI)</th></tr>${art}</table></div>
<p class="note">race compares PostgreSQL's SERIALIZABLE with the SSI column. The article's latencies (not per contention): RC 2/12 ms, RR 2/18 ms, SSI 2/25 ms, 2PL 3/150 ms (P50/P99).</p>
</body></html>
`
}

// ---------- progress ----------

export class Progress {
  private timer?: NodeJS.Timeout
  private doneMs = 0
  private phaseMs = 0
  private phaseStart = 0
  private label = ''
  constructor(
    private readonly totalMs: number,
    private readonly out: NodeJS.WriteStream = process.stderr,
    private readonly tty = !!process.stderr.isTTY,
  ) {}

  phase(label: string, ms: number): void {
    this.doneMs += this.phaseMs
    this.phaseMs = ms
    this.phaseStart = Date.now()
    this.label = label
    if (!this.tty) {
      this.out.write(`${label} (${fmtLeft(ms)})\n`)
      return
    }
    this.draw()
    this.timer ??= setInterval(() => this.draw(), 250)
    this.timer.unref()
  }

  private draw(): void {
    const inPhase = Math.min(this.phaseMs, Date.now() - this.phaseStart)
    const done = this.doneMs + inPhase
    const frac = Math.min(1, done / Math.max(1, this.totalMs))
    const w = 24
    const n = Math.round(frac * w)
    this.out.write(`\r\x1b[2K[${'█'.repeat(n)}${'░'.repeat(w - n)}] ${this.label}  ${fmtLeft(this.totalMs - done)} left`)
  }

  end(): void {
    if (this.timer) clearInterval(this.timer)
    if (this.tty) this.out.write('\r\x1b[2K')
  }
}

function fmtLeft(msLeft: number): string {
  const s = Math.max(0, Math.round(msLeft / 1000))
  return s >= 60 ? `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s` : `${s}s`
}

/** Whether a table with these rows fits w columns at its natural widths (cell text plus borders and padding). */
function fitsWide(head: string[], rows: string[][], w: number): boolean {
  const natural = head.map((h, i) => Math.max(width(h), ...rows.map((row) => width(row[i]))))
  return natural.reduce((a, x) => a + x, 0) + 3 * head.length + 1 <= w
}

/** A narrower table: one bold row per workload group, then a row per level with `cell`'s columns. */
function groupedTable(c: Style, cells: readonly CellResult[], cols: string[], cell: (x: CellResult) => string[], w: number): string {
  const body: CellValue[][] = []
  let group = ''
  for (const x of cells) {
    if (groupLabel(x) !== group) {
      group = groupLabel(x)
      body.push([{ content: c.bold(group), colSpan: cols.length }])
    }
    body.push([shortLevel(x.isolation), ...cell(x)])
  }
  return fitTable(c, cols, body, cols.map((_, i) => (i === 0 ? { shrink: 0 } : {})), w)
}
