// The done-when section of `npm run bench:explore` (issue 41): each figure of the issue's "Done when", run as the
// user runs it (bin/race explore as a child process with default flags, timed whole from spawn to exit, its --json
// read for complete, verdict and runs), beside its yardstick and its limit, met or not. Selected with
// `--only done-when` (every figure) or `--only done-when:KEY[,done-when:KEY]` (KEY: one of KEYS), run by default.
// The figures whose limit is seconds have no yardstick in the same run but the limit itself, and say so; npm test's
// and .ci/run's times cannot be taken inside a bench run, and say where they are taken. The last line:
// "done-when: K of M met" (M: the figures measured here).
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { performance } from 'node:perf_hooks'
import { fileURLToPath } from 'node:url'
import { maskUrl } from '../src/db/target.js'
import { catalogLine, cpuBound, median, yardstick, type YardstickResult } from './yardstick.js'
import { cores, withCpu } from './cpu.js'

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..')
const BIN = path.join(ROOT, 'bin', 'race')
const ex = (f: string) => path.join('examples', f)

/** The figures, in the order printed; `--only done-when:KEY` runs one. */
export const KEYS = ['ledger', 'locked', 'retry', 'orders', 'rows', 'jobs', 'yardstick', 'suite'] as const
export type Key = (typeof KEYS)[number]

/** One figure's line: what it is, its limit, what was measured, met (null: not measured here), and its yardstick. */
export interface Row {
  key: Key
  figure: string
  limit: string
  measured: string
  met: boolean | null
  yardstick: string
}

/** A child race, timed whole. */
export interface ChildRun {
  code: number | null
  seconds: number
  stdout: string
  stderr: string
  /** Killed at its bound (seconds). */
  killedAt?: number
}

/** What a figure reads of race explore --json: the whole process's seconds and exit code beside it. */
export interface Parsed {
  complete: boolean
  /** violated: some run violated the invariant; held: none violated, none unknown, none failed. */
  verdict: 'violated' | 'held' | 'unknown' | 'failed'
  /** The search: reduced, exhaustive, sample or preemptions. */
  search: string
  /** What ran, said: the search, an application race's sessions' mode (isolated, shared), the faults injected. */
  ran: string
  runs: number
  orders: string
  groups: string[]
  shortest: number | null
  code: number | null
  seconds: number
  /** Why there is nothing to read (the child failed before its report, or was killed). */
  error?: string
}

/** Reads a child's --json; a child with no report is an error row (never met), its last line of stderr kept. */
export function parseRun(c: ChildRun): Parsed {
  const none = { complete: false, verdict: 'unknown' as const, search: '-', ran: '-', runs: 0, orders: '-', groups: [], shortest: null, code: c.code, seconds: c.seconds }
  if (c.killedAt !== undefined) return { ...none, error: `killed at ${c.killedAt} s` }
  let j: Record<string, unknown>
  try {
    j = JSON.parse(c.stdout)
  } catch {
    const last = c.stderr.trim().split('\n').pop() ?? ''
    return { ...none, error: `exit ${c.code}, no --json report${last ? `: ${last}` : ''}` }
  }
  // race's --json for a run refused or broken: { command, exitCode, error }, no report.
  if (typeof j !== 'object' || j === null) return { ...none, error: `exit ${c.code}, no --json report` }
  if (typeof j.error === 'string' || typeof j.runs !== 'number') return { ...none, error: `exit ${c.code}, no --json report: ${String(j.error ?? 'no runs in it')}` }
  const n = (k: string) => (typeof j[k] === 'number' ? (j[k] as number) : NaN)
  const violating = n('violating')
  const verdict = violating > 0 ? 'violated' : n('failed') > 0 ? 'failed' : violating === 0 && n('unknown') === 0 ? 'held' : 'unknown'
  const groups = Array.isArray(j.groups) ? (j.groups as { key: string }[]).map((g) => g.key).sort() : []
  const shortest = (j.shortest as { switches?: number } | null)?.switches ?? null
  // What ran: the search, how an application race's sessions ran, and the faults injected (what --inject offered).
  const ran = [String(j.search ?? '-'), (j.sessionsRan as { mode?: string } | undefined)?.mode]
  for (const f of Array.isArray(j.injections) ? (j.injections as { fault: string; runs: number; offered: number }[]) : []) ran.push(`${f.fault} in ${f.runs} of ${f.offered} runs`)
  // A sample is not complete, whatever else it says.
  const complete = j.complete === true && j.search !== 'sample'
  return { complete, verdict, search: String(j.search ?? '-'), ran: ran.filter((x) => x !== undefined).join(', '), runs: n('runs'), orders: String(j.orders ?? '-'), groups, shortest, code: c.code, seconds: c.seconds }
}

/** A figure run once with default flags: what it must show. */
interface RunFigure {
  key: 'ledger' | 'locked' | 'retry' | 'orders' | 'rows'
  figure: string
  args: string[]
  verdict?: 'violated' | 'held'
  exit0?: boolean
  maxSeconds?: number
  maxRuns?: number
}

export const RUNS: RunFigure[] = [
  { key: 'ledger', figure: 'withdrawal, 3 sessions, node-postgres', args: [ex('app/withdraw-ledger.race.mjs'), '--n', '3'], verdict: 'violated', maxSeconds: 120 },
  { key: 'locked', figure: 'its FOR UPDATE fix, 3 sessions', args: [ex('app/withdraw-ledger-locked.race.mjs'), '--n', '3'], verdict: 'held', exit0: true, maxSeconds: 120 },
  {
    key: 'retry',
    figure: 'SERIALIZABLE retry loop, --inject 40001@commit, 2 sessions',
    args: [ex('app/withdraw-retry.race.mjs'), '--isolation', 'serializable', '--inject', '40001@commit'],
    verdict: 'held',
    exit0: true,
    maxSeconds: 120,
  },
  { key: 'orders', figure: 'examples/explore-orders-3.spec, no --max', args: [ex('explore-orders-3.spec')], maxRuns: 168 },
  { key: 'rows', figure: 'examples/explore-rows-3.spec (3 sessions, 3 rows)', args: [ex('explore-rows-3.spec')], maxRuns: 6 },
]

/** The row of a figure run once: met when complete, with the verdict, exit code, seconds and runs it asks. */
export function runRow(f: RunFigure, p: Parsed): Row {
  const limit = ['complete', f.verdict, f.exit0 ? 'exit 0' : undefined, f.maxRuns !== undefined ? `<= ${f.maxRuns} runs` : undefined, f.maxSeconds !== undefined ? `<= ${f.maxSeconds} s` : undefined]
    .filter((x) => x !== undefined)
    .join(', ')
  const yard =
    f.maxSeconds !== undefined
      ? `none in this run but the limit itself (${f.maxSeconds} s)`
      : `the orders of its steps, ${p.orders} (what --exhaustive would run), from the same report`
  if (p.error) return { key: f.key, figure: f.figure, limit, measured: `${p.error} after ${p.seconds.toFixed(1)} s`, met: false, yardstick: yard }
  const met =
    p.complete &&
    (f.verdict === undefined || p.verdict === f.verdict) &&
    (!f.exit0 || p.code === 0) &&
    (f.maxSeconds === undefined || p.seconds <= f.maxSeconds) &&
    (f.maxRuns === undefined || p.runs <= f.maxRuns)
  const measured = `${p.complete ? 'complete' : 'NOT complete'} (${p.ran}), ${p.verdict}, exit ${p.code}, ${p.runs} runs, ${p.seconds.toFixed(1)} s`
  return { key: f.key, figure: f.figure, limit, measured, met, yardstick: yard }
}

/** race with args, as a child with default flags but the server's URL and --json; killed (and said so) at `boundS`. */
export function raceJson(args: string[], url: string, boundS: number): Promise<ChildRun> {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1' }
  for (const k of ['DATABASE_URL', 'PGHOST', 'PGDATABASE', 'PGUSER', 'PGPORT', 'PGPASSWORD', 'PGOPTIONS']) delete env[k]
  return new Promise((resolve, reject) => {
    const t0 = performance.now()
    const child = spawn(process.execPath, [BIN, 'explore', ...args, '--database-url', url, '--json'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    let killed = false
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()))
    child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)))
    const timer = setTimeout(() => ((killed = true), child.kill('SIGTERM')), boundS * 1000)
    child.once('error', (e) => (clearTimeout(timer), reject(e)))
    child.once('close', (code) => {
      clearTimeout(timer)
      resolve({ code, seconds: (performance.now() - t0) / 1000, stdout, stderr, ...(killed ? { killedAt: boundS } : {}) })
    })
  })
}

/** A report written to a file of its own in the temporary folder; its path. */
function keep(text: string, name: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'race-done-when-'))
  const file = path.join(dir, `${name}.json`)
  fs.writeFileSync(file, text)
  return file
}

/** How two runs of one spec differ (the search, complete, runs, the shortest violation, the groups), or undefined. */
export function difference(one: Parsed, two: Parsed): string | undefined {
  const d: string[] = []
  if (one.search !== 'reduced' || two.search !== 'reduced') d.push(`search ${one.search} and ${two.search}`)
  if (!one.complete || !two.complete) d.push(`complete ${one.complete} and ${two.complete}`)
  if (one.runs !== two.runs) d.push(`runs ${one.runs} and ${two.runs}`)
  if (one.shortest !== two.shortest) d.push(`shortest ${one.shortest} and ${two.shortest} switches`)
  const only = (a: string[], b: string[]) => a.filter((g) => !b.includes(g))
  const [a, b] = [only(one.groups, two.groups), only(two.groups, one.groups)]
  if (a.length || b.length) d.push(`groups only on --jobs 1: ${a.join(' | ') || 'none'}; only on --jobs 2: ${b.join(' | ') || 'none'}`)
  return d.length ? d.join('; ') : undefined
}

/** --jobs 2 beside --jobs 1 on the reduced search, rounds alternating which goes first: the same, and how much faster. */
export function jobsRow(pairs: JobsPair[], n = cores()): Row {
  const figure = '--jobs 2 beside --jobs 1, reduced search, explore-orders-3.spec'
  const limit = 'same groups and shortest, <= 0.75x the time'
  const yardstick = `--jobs 1 on the same spec, the same rounds, alternating which goes first (${pairs.length} rounds)`
  const bad = pairs.flatMap((p) => [p.one, p.two]).find((p) => p.error)
  if (bad) return { key: 'jobs', figure, limit, measured: `${bad.error} after ${bad.seconds.toFixed(1)} s`, met: false, yardstick }
  const differ = pairs.map((p, k) => [k + 1, difference(p.one, p.two)] as const).filter(([, d]) => d !== undefined)
  const ratios = pairs.map((p) => p.two.seconds / p.one.seconds)
  const ratio = median(ratios)
  const s = (xs: number[]) => `${median(xs).toFixed(1)} s`
  const same = differ.length ? `NOT the same: ${differ.map(([k, d]) => `round ${k}: ${d}`).join('; ')}` : `same groups, shortest and runs (${pairs[0].one.runs} runs, ${pairs[0].one.groups.length} groups)`
  const measured = `--jobs 1 ${s(pairs.map((p) => p.one.seconds))}, --jobs 2 ${s(pairs.map((p) => p.two.seconds))}: ${ratio.toFixed(2)}x [${Math.min(...ratios).toFixed(2)}-${Math.max(...ratios).toFixed(2)}], ${same}${jobsFloor(pairs, n)}`
  return { key: 'jobs', figure, limit, measured, met: !differ.length && ratio <= 0.75, yardstick }
}

/** One round of the jobs figure: each run's report, and the machine's busy CPU milliseconds during it (speed/cpu.ts). */
export interface JobsPair {
  one: Parsed
  two: Parsed
  cpu?: { one: number; two: number }
}

/**
 * The CPU floor of the jobs figure: how many cores --jobs 1 already kept busy, and the least time --jobs 2's CPU
 * allows on this machine's `n` cores, as a share of --jobs 1's time (medians). Empty where the CPU was not read.
 */
export function jobsFloor(pairs: JobsPair[], n: number): string {
  const read = pairs.filter((p) => p.cpu)
  if (!read.length) return ''
  const busy = median(read.map((p) => p.cpu!.one / 1000 / p.one.seconds))
  const least = median(read.map((p) => p.cpu!.two / 1000 / n / p.one.seconds))
  return `; CPU: --jobs 1 kept ${busy.toFixed(2)} cores busy (${(median(read.map((p) => p.cpu!.one)) / 1000).toFixed(2)} CPU-s), --jobs 2 used ${(median(read.map((p) => p.cpu!.two)) / 1000).toFixed(2)} CPU-s: on ${n} cores at least ${least.toFixed(2)}x --jobs 1's time`
}

/** The yardstick's ratio as a figure: race's order beside isolationtester's permutation, at most 1.0x. */
export function yardstickRow(y: YardstickResult | undefined, where: string): Row {
  const figure = '70 orders of the 2x4 spec on one job'
  const limit = '<= 1.0x isolationtester'
  if (!y) return { key: 'yardstick', figure, limit, measured: 'no isolationtester for this server: not measured', met: false, yardstick: where }
  const m = (xs: number[]) => `${(median(xs) / 1000).toFixed(4)} s`
  // The CPU floor (speed/cpu.ts): what an order costs the machine, and the least time that allows on its cores.
  const n = cores()
  const b = cpuBound(y, n)
  const cpu = b ? `; CPU ${b.cpu.toFixed(2)}x isolationtester's, so at least ${b.least.toFixed(2)}x on ${n} cores` : ''
  return { key: 'yardstick', figure, limit, measured: `${y.ratio.toFixed(2)}x (race ${m(y.race)} an order, isolationtester ${m(y.tester)} a permutation${cpu})`, met: y.ratio <= 1.0, yardstick: where }
}

/** npm test's and .ci/run's times: not measured in a bench run; where they are. */
export function suiteRows(): Row[] {
  const not = (figure: string, limit: string, where: string): Row => ({ key: 'suite', figure, limit, measured: `not measured here: ${where}`, met: null, yardstick: '-' })
  return [
    not('npm test on a fresh clone', '<= 15 min', "scripts/test.ts prints each file's time and the whole wall time at its end"),
    not('.ci/run on a fresh clone', '<= 30 min', 'time .ci/run whole (CI shows the job\'s duration); CONTRIBUTING.md, "What CI runs"'),
  ]
}

/**
 * The keys `--only` selects: every key for no --only or `done-when`, the named ones for `done-when:KEY`, none when
 * --only names other sections alone. An unknown KEY throws (the caller prints one line, exit 2).
 */
export function selectKeys(only: string[] | undefined): Key[] {
  if (!only || only.includes('done-when')) return [...KEYS]
  const named = only.filter((o) => o.startsWith('done-when:')).map((o) => o.slice('done-when:'.length))
  for (const k of named) if (!(KEYS as readonly string[]).includes(k)) throw new BadOnly(`--only done-when:${k}: not a figure (one of ${KEYS.join(', ')})`)
  return KEYS.filter((k) => named.includes(k))
}

export class BadOnly extends Error {}

/** The section's lines: a table of figure, limit, measured, met, each with its yardstick under it, then the count. */
export function formatRows(rows: Row[]): string[] {
  const w = (k: 'figure' | 'limit') => Math.max(k.length, ...rows.map((r) => r[k].length))
  const [fw, lw] = [w('figure'), w('limit')]
  const met = (r: Row) => (r.met === null ? '-' : r.met ? 'met' : 'NOT MET')
  const lines = [`${'figure'.padEnd(fw)}  ${'limit'.padEnd(lw)}  ${'met'.padEnd(7)}  measured`]
  for (const r of rows) {
    lines.push(`${r.figure.padEnd(fw)}  ${r.limit.padEnd(lw)}  ${met(r).padEnd(7)}  ${r.measured}`)
    if (r.yardstick !== '-') lines.push(`${''.padEnd(fw)}  yardstick: ${r.yardstick}`)
  }
  const measured = rows.filter((r) => r.met !== null)
  const notHere = rows.length - measured.length
  lines.push(`done-when: ${measured.filter((r) => r.met).length} of ${measured.length} met${notHere ? ` (${notHere} not measured here)` : ''}`)
  return lines
}

export interface DoneWhenOptions {
  url: string
  /** The server is the embedded one (the yardstick's isolationtester needs its libraries). */
  embedded: boolean
  keys: Key[]
  rounds: number
  /** The yardstick's result when its own section ran already in this run (not run again). */
  yardstick?: YardstickResult | null
  log?: (line: string) => void
}

/** Runs the selected figures one after another and prints the section; its rows are returned. */
export async function doneWhen(o: DoneWhenOptions): Promise<Row[]> {
  const log = o.log ?? console.log
  const rows: Row[] = []
  log(`done-when (issue 41): bin/race explore as a child, default flags, --json read, timed whole; ${maskUrl(o.url)}`)
  const catalogs = await catalogLine(o.url)
  if (catalogs) log(`  ${catalogs}`)
  for (const f of RUNS.filter((r) => o.keys.includes(r.key))) {
    // A figure in seconds is not met past its limit: killed a minute after it; the others are bounded at 5 minutes.
    const c = await raceJson(f.args, o.url, f.maxSeconds !== undefined ? f.maxSeconds + 60 : 300)
    rows.push(runRow(f, parseRun(c)))
    log(`  ${f.key}: ${rows[rows.length - 1].measured}`)
  }
  if (o.keys.includes('jobs')) {
    const pairs: JobsPair[] = []
    const args = RUNS.find((r) => r.key === 'orders')!.args
    const timed = async (j: number) => {
      const { value: c, cpuMs } = await withCpu(() => raceJson([...args, '--jobs', String(j)], o.url, 300))
      return { c, p: parseRun(c), cpuMs }
    }
    for (let k = 0; k < o.rounds; k++) {
      const [one, two] = k % 2 === 0 ? [await timed(1), await timed(2)] : (([b, a]) => [a, b])([await timed(2), await timed(1)])
      pairs.push({ one: one.p, two: two.p, ...(one.cpuMs !== undefined && two.cpuMs !== undefined ? { cpu: { one: one.cpuMs, two: two.cpuMs } } : {}) })
      const d = difference(one.p, two.p)
      const cpu = (x: { cpuMs?: number }) => (x.cpuMs === undefined ? '' : ` (${(x.cpuMs / 1000).toFixed(2)} CPU-s)`)
      log(`  jobs, round ${k + 1}: --jobs 1 ${one.p.seconds.toFixed(1)} s${cpu(one)}, --jobs 2 ${two.p.seconds.toFixed(1)} s${cpu(two)}${d ? `; they differ: ${d}` : ''}`)
      // Two reports that differ are kept, to be read: where --jobs 2 did not give --jobs 1's answer.
      if (d) for (const [j, x] of [[1, one], [2, two]] as const) log(`    --jobs ${j}'s report: ${keep(x.c.stdout, `jobs${j}-round${k + 1}`)}`)
    }
    rows.push(jobsRow(pairs))
  }
  if (o.keys.includes('yardstick')) {
    if (o.yardstick !== undefined) rows.push(yardstickRow(o.yardstick ?? undefined, "isolationtester's 70 permutations, the yardstick section above, same server"))
    else rows.push(yardstickRow(await yardstick(o.url, o.rounds, o.embedded, (l) => log(`  ${l}`)), `isolationtester's 70 permutations, same server, ${o.rounds} rounds alternating`))
  }
  if (o.keys.includes('suite')) rows.push(...suiteRows())
  for (const line of formatRows(rows)) log(line)
  return rows
}
