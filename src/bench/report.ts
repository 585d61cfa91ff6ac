// What `race bench` shows: the table, a terminal bar chart, the JSON document, a self-contained HTML page
// with inline SVG charts, and the progress bar while it runs.
import { c } from '../report/color.js'
import { plainTable } from '../report/table.js'
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

export function table(r: BenchReport): string {
  const withPg = r.cells.some((x) => x.pgbench)
  const withAdvisory = r.cells.some((x) => x.workload === 'advisory')
  const head = ['workload', 'level', 'TPS', 'P50 ms', 'P95 ms', 'P99 ms', 'retries', 'failures', 'vs RC', 'article']
  if (withAdvisory) head.push('anomalies')
  if (withPg) head.push('pgbench TPS', 'race/pgbench')
  const withSlap = r.cells.some((x) => x.slap)
  if (withSlap) head.push('slap TPS', 'race/slap')
  const t = plainTable(head)
  for (const x of r.cells) {
    const s = x.race
    const vs = x.vsRc === null ? '-' : x.article === null ? ratio(x.vsRc) : colourRatio(x.vsRc, x.article)
    const row: string[] = [
      groupLabel(x),
      shortLevel(x.isolation),
      int(s.tps),
      ms(s.latencyMs.p50),
      ms(s.latencyMs.p95),
      ms(s.latencyMs.p99),
      String(s.retries),
      s.failures ? c.red(failuresText(s)) : '0',
      vs,
      ratio(x.article),
    ]
    if (withAdvisory) row.push(x.workload === 'advisory' ? (s.anomalies ? c.red(String(s.anomalies)) : '0') : '-')
    if (withPg) {
      row.push(x.pgbench ? `${int(x.pgbench.tps)}${x.pgbench.error ? c.yellow(' !') : ''}` : '-')
      row.push(x.racePerPgbench === null ? '-' : x.racePerPgbench >= 0.9 ? c.green(ratio(x.racePerPgbench)) : c.yellow(ratio(x.racePerPgbench)))
    }
    if (withSlap) {
      row.push(x.slap ? `${int(x.slap.tps)}${x.slap.error ? c.yellow(' !') : ''}` : '-')
      row.push(x.racePerSlap == null ? '-' : ratio(x.racePerSlap))
    }
    t.push(row)
  }
  return t.toString()
}

function colourRatio(measured: number, article: number): string {
  const s = measured.toFixed(2)
  return Math.abs(measured - article) <= 0.05 ? c.green(s) : c.yellow(s)
}

/** One bar group per (workload, hot): TPS per level, scaled to the largest TPS of the run. */
export function bars(r: BenchReport, width = 40): string {
  const max = Math.max(1, ...r.cells.map((x) => Math.max(x.race.tps, x.pgbench?.tps ?? 0)))
  const lines: string[] = []
  let group = ''
  for (const x of r.cells) {
    const g = groupLabel(x)
    if (g !== group) {
      lines.push(c.bold(g))
      group = g
    }
    const n = Math.max(0, Math.round((x.race.tps / max) * width))
    const tail = [`${int(x.race.tps)} tps`]
    if (x.vsRc !== null && x.isolation !== 'read committed') tail.push(`${ratio(x.vsRc)}x RC${x.article !== null ? `, article ${ratio(x.article)}` : ''}`)
    lines.push(`  ${shortLevel(x.isolation).padEnd(12)} ${c.cyan('█'.repeat(n))}${' '.repeat(width - n)} ${tail.join('  ')}`)
    if (x.pgbench) {
      const p = Math.max(0, Math.round((x.pgbench.tps / max) * width))
      lines.push(`  ${'  pgbench'.padEnd(12)} ${c.dim('▒'.repeat(p))}${' '.repeat(width - p)} ${c.dim(`${int(x.pgbench.tps)} tps`)}`)
    }
  }
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

export function text(r: BenchReport): string {
  const cfg = r.config
  const lines = [
    `${c.bold('race bench')}  ${r.server.product ?? 'PostgreSQL'} ${r.server.version} at ${r.target}`,
    `clients ${cfg.clients}, ${cfg.durationMs / 1000}s a cell after ${cfg.warmupMs / 1000}s warmup, max-tries ${cfg.maxTries}, driver ${cfg.driver}` +
      (cfg.pgbench ? `; pgbench: ${cfg.pgbench.version}, -M prepared -j 1` : '') +
      (cfg.slap ? `; slap: ${cfg.slap.version}` : ''),
    '',
    table(r),
    '',
    bars(r),
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
  if (r.cells.some((x) => x.pgbench?.error)) {
    lines.push(c.yellow('!: pgbench reported errors: ' + [...new Set(r.cells.map((x) => x.pgbench?.error).filter(Boolean))].join('; ')))
  }
  if (r.cells.some((x) => x.race.anomalies)) {
    lines.push('anomalies: advisory checks that saw more than one pending request: the lock did not serialize (REPEATABLE READ: the snapshot predates the lock, article §5.2).')
  }
  return lines.join('\n')
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

/** Grouped vertical bars: TPS by level for each contention group; article ratios as black ticks, pgbench as outlines. */
function throughputSvg(r: BenchReport): string {
  const gs = groups(r)
  const levels = r.config.isolation
  const bw = 26
  const gap = 30
  const gw = levels.length * bw * (r.config.pgbench ? 2 : 1) + gap
  const W = 70 + gs.length * gw + 20
  const H = 300
  const top = 20
  const bottom = 250
  const max = Math.max(1, ...r.cells.map((x) => Math.max(x.race.tps, x.pgbench?.tps ?? 0, (x.article ?? 0) * rcTps(r, x))))
  const y = (v: number) => bottom - (v / max) * (bottom - top)
  const parts: string[] = []
  for (let i = 0; i <= 4; i++) {
    const v = (max * i) / 4
    parts.push(`<line x1="60" x2="${W - 10}" y1="${y(v)}" y2="${y(v)}" stroke="#ddd"/><text x="55" y="${y(v) + 4}" text-anchor="end">${esc(Math.round(v).toLocaleString('en-US'))}</text>`)
  }
  gs.forEach((g, gi) => {
    const x0 = 70 + gi * gw
    let k = 0
    for (const x of g.cells) {
      const col = LEVEL_COLOUR[x.isolation] ?? '#888'
      const bx = x0 + k * bw
      parts.push(`<rect x="${bx}" y="${y(x.race.tps)}" width="${bw - 4}" height="${bottom - y(x.race.tps)}" fill="${col}"><title>${esc(`${g.label} ${x.isolation}: ${Math.round(x.race.tps)} tps (race)`)}</title></rect>`)
      if (x.article !== null) {
        const ay = y(x.article * rcTps(r, x))
        parts.push(`<line x1="${bx - 2}" x2="${bx + bw - 2}" y1="${ay}" y2="${ay}" stroke="#000" stroke-width="2"><title>article: ${x.article} x RC</title></line>`)
      }
      k++
      if (x.pgbench) {
        const px = x0 + k * bw
        parts.push(`<rect x="${px}" y="${y(x.pgbench.tps)}" width="${bw - 4}" height="${bottom - y(x.pgbench.tps)}" fill="none" stroke="${col}" stroke-dasharray="3 2"><title>${esc(`${g.label} ${x.isolation}: ${Math.round(x.pgbench.tps)} tps (pgbench)`)}</title></rect>`)
        k++
      }
    }
    parts.push(`<text x="${x0 + (gw - gap) / 2}" y="${bottom + 18}" text-anchor="middle">${esc(g.label)}</text>`)
  })
  parts.push(legend(r, 70, H - 18))
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="11">${parts.join('')}</svg>`
}

function rcTps(r: BenchReport, x: CellResult): number {
  const rc = r.cells.find((y) => groupLabel(y) === groupLabel(x) && y.isolation === 'read committed')
  return rc?.race.tps ?? 0
}

function legend(r: BenchReport, x: number, y: number): string {
  const items = r.config.isolation.map((l) => [LEVEL_COLOUR[l] ?? '#888', shortLevel(l)] as const)
  let out = ''
  let at = x
  for (const [col, name] of items) {
    out += `<rect x="${at}" y="${y - 9}" width="10" height="10" fill="${col}"/><text x="${at + 14}" y="${y}">${esc(name)}</text>`
    at += 110
  }
  out += `<line x1="${at}" x2="${at + 14}" y1="${y - 4}" y2="${y - 4}" stroke="#000" stroke-width="2"/><text x="${at + 18}" y="${y}">article ratio x RC</text>`
  if (r.config.pgbench) out += `<rect x="${at + 140}" y="${y - 9}" width="10" height="10" fill="none" stroke="#555" stroke-dasharray="3 2"/><text x="${at + 154}" y="${y}">pgbench</text>`
  return out
}

/** P50/P95/P99 per cell on a log scale (latencies span orders of magnitude under contention). */
function latencySvg(r: BenchReport): string {
  const rows = r.cells
  const rowH = 16
  const W = 760
  const left = 230
  const right = W - 20
  const H = 40 + rows.length * rowH * 1.4
  const all = rows.flatMap((x) => [x.race.latencyMs.p50, x.race.latencyMs.p99]).filter((v) => v > 0)
  const lo = Math.pow(10, Math.floor(Math.log10(Math.min(...all, 1))))
  const hi = Math.pow(10, Math.ceil(Math.log10(Math.max(...all, 1))))
  const x = (v: number) => left + ((Math.log10(Math.max(v, lo)) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo) || 1)) * (right - left)
  const parts: string[] = []
  for (let d = lo; d <= hi; d *= 10) parts.push(`<line x1="${x(d)}" x2="${x(d)}" y1="15" y2="${H - 20}" stroke="#ddd"/><text x="${x(d)}" y="12" text-anchor="middle">${d < 1 ? d.toFixed(2) : d} ms</text>`)
  rows.forEach((c0, i) => {
    const yy = 25 + i * rowH * 1.4
    const col = LEVEL_COLOUR[c0.isolation] ?? '#888'
    const l = c0.race.latencyMs
    parts.push(`<text x="${left - 8}" y="${yy + 11}" text-anchor="end">${esc(`${groupLabel(c0)} ${shortLevel(c0.isolation)}`)}</text>`)
    parts.push(`<rect x="${left}" y="${yy}" width="${x(l.p99) - left}" height="${rowH - 2}" fill="${col}" opacity="0.25"><title>P99 ${l.p99.toFixed(2)} ms</title></rect>`)
    parts.push(`<rect x="${left}" y="${yy}" width="${x(l.p95) - left}" height="${rowH - 2}" fill="${col}" opacity="0.5"><title>P95 ${l.p95.toFixed(2)} ms</title></rect>`)
    parts.push(`<rect x="${left}" y="${yy}" width="${x(l.p50) - left}" height="${rowH - 2}" fill="${col}"><title>P50 ${l.p50.toFixed(2)} ms</title></rect>`)
    parts.push(`<text x="${x(l.p99) + 4}" y="${yy + 11}">${esc(`${ms(l.p50)} / ${ms(l.p95)} / ${ms(l.p99)}`)}</text>`)
  })
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="11">${parts.join('')}</svg>`
}

export function html(r: BenchReport): string {
  const cfg = r.config
  const head = ['workload', 'level', 'TPS', 'P50', 'P95', 'P99', 'retries', 'failures', 'vs RC', 'article', 'pgbench TPS', 'race/pgbench']
  const rows = r.cells
    .map((x) =>
      [groupLabel(x), shortLevel(x.isolation), int(x.race.tps), ms(x.race.latencyMs.p50), ms(x.race.latencyMs.p95), ms(x.race.latencyMs.p99), String(x.race.retries), failuresText(x.race), ratio(x.vsRc), ratio(x.article), x.pgbench ? int(x.pgbench.tps) : '-', ratio(x.racePerPgbench)]
        .map((v) => `<td>${esc(v)}</td>`)
        .join(''),
    )
    .map((tr) => `<tr>${tr}</tr>`)
    .join('\n')
  const art = ARTICLE.ratios.map((a) => `<tr><td>${esc(a.contention)}${a.hot === null ? '' : ` (${a.hot}% hot)`}</td><td>${a.rc}</td><td>${a.rr}</td><td>${a.serializable2pl}</td><td>${a.ssi}</td></tr>`).join('')
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>race bench: PostgreSQL ${esc(r.server.version)}</title>
<style>body{font-family:sans-serif;margin:2em;max-width:1100px;color:#222}table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}td:first-child,th:first-child{text-align:left}th{background:#f4f4f4}.note{color:#555;font-size:90%}</style>
</head><body>
<h1>race bench</h1>
<p>PostgreSQL ${esc(r.server.version)} at ${esc(r.target)}; ${cfg.clients} clients, ${cfg.durationMs / 1000}s a cell after ${cfg.warmupMs / 1000}s warmup, max-tries ${cfg.maxTries}, driver ${esc(cfg.driver)}${cfg.pgbench ? `; ${esc(cfg.pgbench.version)}` : ''}.</p>
<h2>Throughput by isolation level and contention</h2>
${throughputSvg(r)}
<p class="note">Filled bars: race's load generator. Black ticks: the article's published ratio applied to this server's READ COMMITTED TPS. Dashed outlines: pgbench on the same script.</p>
<h2>Latency percentiles (P50 / P95 / P99, log scale)</h2>
${latencySvg(r)}
<h2>Table</h2>
<table><tr>${head.map((h) => `<th>${esc(h)}</th>`).join('')}</tr>
${rows}</table>
<h2>The article's published ratios (RC = 1.0)</h2>
<table><tr><th>workload</th><th>RC</th><th>RR</th><th>Serializable (2PL)</th><th>Serializable (SSI)</th></tr>${art}</table>
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
